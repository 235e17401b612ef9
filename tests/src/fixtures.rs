//! Real-format Telegram updates, as files under `tests/fixtures/updates/`.

use serde_json::Value;

macro_rules! fixtures {
    ($($name:literal),* $(,)?) => {
        /// The fixture `name` (file name without `.json`), with its `update_id` set to `id`.
        pub fn update(name: &str, id: i64) -> Value {
            let text = match name {
                $($name => include_str!(concat!("../fixtures/updates/", $name, ".json")),)*
                other => panic!("no fixture {other}"),
            };
            let mut v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            v["update_id"] = Value::from(id);
            v
        }
        /// Every fixture name.
        pub const ALL: &[&str] = &[$($name),*];
    };
}

fixtures!(
    "private_text",
    "private_command_start",
    "private_command_new",
    "group_no_mention",
    "group_mention",
    "group_reply_to_bot",
    "group_command_other_bot",
    "forum_topic_mention",
    "edited_message",
    "photo_caption",
    "photo_no_caption",
    "sticker",
    "unknown_poll",
    "stranger_private",
    "stranger_group_no_mention",
);

/// The ids the fixtures use.
pub const OWNER_ID: i64 = 111_111_111;
pub const STRANGER_ID: i64 = 999_999_999;
pub const BOT_ID: i64 = 7_000_000_001;
pub const BOT_USERNAME: &str = "clawless_test_bot";
pub const GROUP_ID: i64 = -1_001_234_567_890;

/// The setting naming the test MCP server's URL (`<model URL>/mcp`) for
/// [`asking_config`]'s agent.
pub const MCP_URL_ENV: &str = "CLAWLESS_TEST_MCP_URL";

/// Writes into `dir` the repository's `config/` with these changes: `memory_write` and
/// `delete_file` ask first, `message` is offered and allowed, `exec` offered, and the agent has
/// the fakes' MCP server as `demo` and its `wait`, `note` and `page` as `slow` (the config the
/// approval scenarios, the long turns and the kill points run on). Panics when `assistant.yaml`'s tools or policy block has changed
/// shape, so the change cannot silently not happen.
pub fn asking_config(dir: &std::path::Path) {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    copy_dir(&src, dir);
    let agent = dir.join("agents.d/assistant.yaml");
    let text = std::fs::read_to_string(&agent).unwrap_or_default();
    // `message` offered and allowed even to another person: only a turn that read something
    // untrusted makes it ask (the injection scenario). `delete_file`, `write_file` and `exec` offered too
    // (`exec` on native only), `delete_file` asking as `memory_write` does.
    let asking = text
        .replace(
            "  tools: {}",
            "  tools: { memory_write: ask, message: allow, delete_file: ask }",
        )
        .replace(
            "  - schedule\n",
            "  - schedule\n  - message\n  - delete_file\n  - write_file\n  - exec\n",
        );
    // The test MCP server of the fakes (unsafe by default, so its calls ask too).
    // And its `wait`, `note` and `page` alone, safe, as `slow` (long turns, kill points, the
    // injection corpus).
    let asking = format!("{asking}\nmcp:\n  - name: demo\n    url_env: {MCP_URL_ENV}\n  - name: slow\n    url_env: {MCP_URL_ENV}\n    level: safe\n    tools: [wait, note, page]\n");
    assert!(
        asking.contains("memory_write: ask") && asking.contains("  - message\n"),
        "the tools or policy block of assistant.yaml changed shape"
    );
    if let Err(e) = std::fs::write(&agent, asking) {
        panic!("writing {}: {e}", agent.display());
    }
    // The hooks of the hooks scenario (`scenarios::hooks_over_http`).
    let main = dir.join("main.yaml");
    let text = std::fs::read_to_string(&main).unwrap_or_default();
    // Watches checked every 10 s (the watch scenario), on the fakes' page at 127.0.0.1, on
    // one of `PAGE_PORTS`.
    let ports: Vec<String> = PAGE_PORTS.map(|p| p.to_string()).collect();
    let text = text
        .replace("  allow_private: false", "  allow_private: true")
        .replace(
            "  extra_ports: []",
            &format!("  extra_ports: [{}]", ports.join(", ")),
        );
    assert!(
        text.contains("  allow_private: true") && text.contains("  extra_ports: [18"),
        "main.yaml's web: changed shape"
    );
    let text = format!("{text}{}\nwatches:\n  min_every_secs: 10\n", hooks_yaml());
    if let Err(e) = std::fs::write(&main, text) {
        panic!("writing {}: {e}", main.display());
    }
}

/// The ports the fakes' page may be served on ([`crate::servers::Fakes::serve_page`]); the
/// asking config lets the web tools use them.
pub const PAGE_PORTS: std::ops::RangeInclusive<u16> = 18_080..=18_099;

// The hooks of the asking config (the hooks scenario, `scenarios::hooks_over_http`).
/// The setting holding the test hooks' token (a shell running the asking config sets it to
/// [`HOOK_SECRET`]).
pub const HOOK_SECRET_ENV: &str = "CLAWLESS_TEST_HOOK_SECRET";
pub const HOOK_SECRET: &str = "test-hook-secret-0123456789abcdef";
/// Where the test hooks deliver: a group no scenario uses.
pub const HOOK_CHAT: i64 = GROUP_ID - 990;

/// The `hooks:` block the asking config gets.
pub fn hooks_yaml() -> String {
    format!(
        "\nhooks:\n  - name: ci\n    secret_env: {HOOK_SECRET_ENV}\n    chat: {HOOK_CHAT}\n    template: \"CI {{{{status}}}}: {{{{repo.name}}}}\"\n  - name: ask\n    secret_env: {HOOK_SECRET_ENV}\n    chat: {HOOK_CHAT}\n    mode: turn\n"
    )
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    let copied = std::fs::create_dir_all(to).and_then(|()| {
        for entry in std::fs::read_dir(from)? {
            let path = entry?.path();
            let Some(name) = path.file_name() else {
                continue;
            };
            if path.is_dir() {
                copy_dir(&path, &to.join(name));
            } else {
                std::fs::copy(&path, to.join(name))?;
            }
        }
        Ok(())
    });
    if let Err(e) = copied {
        panic!("copying {} to {}: {e}", from.display(), to.display());
    }
}
