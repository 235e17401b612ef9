//! `clawless import --from openclaw` through the binary, on a copy of the fixture
//! `tests/fixtures/openclaw` (OpenClaw's state directory) with a file name that is not UTF-8
//! added: the import finishes and lists that file; the persona is agent `openclaw`, offered
//! in `routing.yaml` (its comments kept); then the bot, restarted on that config, answers the
//! owner as the persona, recalling a migrated note and going on with the OpenClaw
//! conversation, and `/agent openclaw` is not refused. Each file or setting not carried is
//! listed with why; a second import writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update, until};
use common::bot::{clawless, post_update, start_bot_with, Serve, SECRET};

/// No fake is reached: the import talks to no one.
const NOWHERE: &str = "http://127.0.0.1:9";

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

/// A data directory, a copy of the default config, and a copy of OpenClaw's fixture folder
/// with a note whose name is not UTF-8.
fn setup(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let data = common::temp_dir(tag);
    let config = data.join("config");
    copy_dir(&clawless_testkit::repo::root().join("config"), &config);
    let openclaw = data.join("openclaw");
    copy_dir(
        &clawless_testkit::repo::root().join("tests/fixtures/openclaw"),
        &openclaw,
    );
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"bad-\xff-name.md");
        std::fs::write(openclaw.join("workspace/memory").join(name), "- a note\n").unwrap();
    }
    (data, config, openclaw)
}

/// `clawless import --from openclaw DIR` with `config` as the config directory (never the
/// repository's).
fn import(data: &Path, config: &Path, dir: &Path) -> Output {
    clawless(data, NOWHERE, NOWHERE)
        .env("CLAWLESS_CONFIG", config)
        .stderr(Stdio::piped())
        .args(["import", "--from", "openclaw", dir.to_str().unwrap()])
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persona_answers_with_the_notes_and_the_conversation() {
    let (data, config, openclaw) = setup("openclaw");
    let out = import(&data, &config, &openclaw.join("workspace"));
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    for part in [
        "memory: 3 notes added, 0 appended to, 0 already there, in agent openclaw's memory",
        "skills: 3 files added",
        "conversations: 1 continued here (their chats talk with openclaw)",
        "workspace/memory.md: joined to MEMORY.md",
        "agent openclaw: written",
        "connector main now offers /agent openclaw",
        "time zone: Europe/Zurich for the owner's chat",
        "let in 444444444",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    let unmapped = text.split("not mapped").nth(1).unwrap_or_default();
    #[cfg(unix)]
    assert!(
        unmapped
            .contains("workspace/memory/bad-\u{fffd}-name.md: a name that is not UTF-8, not read"),
        "{text}"
    );
    for (listed, why) in [
        ("workspace/HEARTBEAT.md", "reminders"),
        ("workspace/BOOTSTRAP.md", "first-run"),
        ("workspace/canvas/index.html", "no place"),
        ("credentials/", "not read"),
        ("agents/main/agent/", "not read"),
        (
            "skills/weather/",
            "the workspace has a skill of the same name",
        ),
        ("telegram:group:-1001234567890", "each member"),
        ("cron:daily-digest", "not a chat"),
        ("earlier conversations", "1 of them, not carried"),
        ("openclaw.json gateway", "no setting here"),
        ("zai/glm-4.7", "no provider zai"),
        ("@sam", "not a Telegram user id"),
    ] {
        let line = unmapped.lines().find(|l| l.contains(listed));
        assert!(
            line.is_some_and(|l| l.contains(why)),
            "{listed} ({why}): {text}"
        );
    }
    assert!(
        !text.contains("FIXTURE-NOT-A-TOKEN"),
        "no value of openclaw.json shown"
    );
    let routing = std::fs::read_to_string(config.join("routing.yaml")).unwrap();
    assert!(
        routing.contains(r#"main: {agent: "assistant", agents: ["assistant", "openclaw"]}"#),
        "{routing}"
    );
    assert!(routing.contains("# rules:"), "the comments stay: {routing}");
    let agent = std::fs::read_to_string(config.join("agents.d/openclaw.yaml")).unwrap();
    assert!(agent.contains("anthropic/claude-opus-4-6") && agent.contains("gemini/gemini-2.5-pro"));

    // The bot on that config: the owner's chat talks with the persona.
    let (f, tg, llm) = fakes().await;
    let config_env = config.to_str().unwrap().to_owned();
    let bot = start_bot_with(
        &data,
        &tg,
        &llm,
        Serve {
            env: &[("CLAWLESS_CONFIG", config_env.as_str())],
            ..Default::default()
        },
    )
    .await;
    post_update(&bot, &text_update(1, "/agent openclaw"), Some(SECRET)).await;
    until("the /agent answer", || f.sent_to(OWNER_ID).len() == 1).await;
    let reply = &f.sent_to(OWNER_ID)[0];
    assert!(reply.contains("already talks with Jarvis"), "{reply}");
    let question = "What is my bike lock code?";
    post_update(&bot, &text_update(2, question), Some(SECRET)).await;
    until("the answer", || f.sent_to(OWNER_ID).len() == 2).await;
    let asked = f.llm_requests.lock().unwrap().last().unwrap().clone();
    let system = asked["system"].to_string();
    assert!(system.contains("Jarvis"), "the persona answers: {system}");
    // Recalled after the question, out of the instructions (the prompt cache's prefix).
    let history = asked["messages"].to_string();
    assert!(
        history.contains("7391"),
        "the migrated note is recalled: {history}"
    );
    assert!(
        history.contains("Platform 7"),
        "the conversation goes on: {history}"
    );
    drop(bot);

    let out = import(&data, &config, &openclaw.join("workspace"));
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    for part in [
        "0 notes added, 0 appended to, 3 already there",
        "skills: 0 files added, 3 already there",
        "agent openclaw: kept",
        "offered on connector main already",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    let out = clawless(&data, NOWHERE, NOWHERE)
        .env("CLAWLESS_CONFIG", &config)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert!(out.status.success(), "the config is valid: {}", said(&out));
}

/// The state directory itself reads the same; without persona files the notes go to the
/// default agent's memory and the routing is left alone.
#[test]
fn the_state_directory_and_a_workspace_without_persona() {
    let (data, config, openclaw) = setup("openclaw-state");
    let out = import(&data, &config, &openclaw);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("conversations: 1 continued"), "{text}");
    assert!(text.contains("skills: 3 files added"), "{text}");

    let (data, config, openclaw) = setup("openclaw-bare");
    for f in ["IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md"] {
        std::fs::remove_file(openclaw.join("workspace").join(f)).unwrap();
    }
    let routing = std::fs::read_to_string(config.join("routing.yaml")).unwrap();
    let out = import(&data, &config, &openclaw);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("in agent assistant's memory"), "{text}");
    assert!(text.contains("no persona files"), "{text}");
    assert_eq!(
        std::fs::read_to_string(config.join("routing.yaml")).unwrap(),
        routing
    );
    let out = clawless(&data, NOWHERE, NOWHERE)
        .env("CLAWLESS_CONFIG", &config)
        .args(["memory", "search", "bike lock code"])
        .output()
        .unwrap();
    assert!(said(&out).contains("7391"), "{}", said(&out));
}
