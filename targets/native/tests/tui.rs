//! `clawless tui` driven as a person would, in tmux (send-keys, capture-pane), with the fake
//! Bot API and model servers: a chat turn whose answer is written in pieces, with its tool
//! call in line; the panels with the session, a backlog that rises while the model is held
//! and falls after, and a turn that failed for good with its trace id. Needs tmux (`.ci/run`
//! installs it): `cargo test -p native --features tmux --test tui`.

#![cfg(feature = "tmux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::sync::atomic::Ordering;

use clawless_testkit::servers::{fakes, text_update};
use clawless_testkit::tmux::Tmux;
use common::bot::{SECRET, TOKEN};

/// The repository's config, retries made quick (two tries, 1 s apart).
fn quick_config(dir: &std::path::Path) -> std::path::PathBuf {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config");
    let out = dir.join("config");
    let copied = Command::new("cp")
        .args(["-r", repo])
        .arg(&out)
        .status()
        .unwrap();
    assert!(copied.success());
    let main = out.join("main.yaml");
    let text = std::fs::read_to_string(&main).unwrap();
    let text = text
        .replace("max_attempts: 4", "max_attempts: 2")
        .replace("backoff_secs: 3", "backoff_secs: 1");
    std::fs::write(&main, text).unwrap();
    // `exec` offered: unsafe, so each call asks.
    let agent = out.join("agents.d/assistant.yaml");
    let text = std::fs::read_to_string(&agent).unwrap();
    assert!(text.contains("  # - exec\n"));
    std::fs::write(&agent, text.replace("  # - exec\n", "  - exec\n")).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cockpit_streams_a_chat_and_shows_the_bot_at_work() {
    let (f, tg, llm) = fakes().await;
    let data = common::temp_dir("tui");
    let config = quick_config(&data);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let command = format!(
        "env -i PATH=/usr/bin:/bin TERM=xterm-256color TELEGRAM_BOT_TOKEN={TOKEN} \
         TELEGRAM_WEBHOOK_SECRET={SECRET} TELEGRAM_ALLOWED_USERS={owner} TELEGRAM_API_BASE={tg} \
         ANTHROPIC_API_KEY=sk-tui ANTHROPIC_BASE_URL={llm} CLAWLESS_DATA={data} \
         CLAWLESS_CONFIG={config} CLAWLESS_ADMIN_TOKEN={ADMIN} {bin} tui --serve {listen}",
        owner = clawless_testkit::fixtures::OWNER_ID,
        data = data.display(),
        config = config.display(),
        bin = env!("CARGO_BIN_EXE_clawless"),
    );
    let tmux = Tmux::new("tui");
    tmux.start("cockpit", &command);
    let session = "cockpit";
    tmux.until_in(session, "the chat screen", |s| s.contains("Enter sends"))
        .await;

    // A chat turn: the tool call in line, the answer written in pieces.
    tmux.keys_to(session, &["what time is it, slowly", "Enter"]);
    let partial = tmux
        .until_in(session, "part of the answer", |s| {
            s.contains("Assistant: Tool said") && s.contains('▌')
        })
        .await;
    assert!(
        partial.contains("[tool: current_time (allowed) → ok"),
        "{partial}"
    );
    let done = tmux
        .until_in(session, "the whole answer", |s| {
            s.contains("Assistant: Tool said") && !s.contains('▌')
        })
        .await;
    assert!(done.contains("You: what time is it, slowly"), "{done}");

    // A call that needs an approval is asked here; `y` lets it run, its result in line.
    tmux.keys_to(session, &["run: echo hello-from-exec", "Enter"]);
    tmux.until_in(session, "the approval asked", |s| s.contains("y allows"))
        .await;
    tmux.keys_to(session, &["y"]);
    let ran = tmux
        .until_in(session, "the command's result and the answer", |s| {
            s.contains("[exec result:")
                && s.contains("(allowed)")
                && s.matches("Assistant: Tool said").count() >= 2
        })
        .await;
    assert!(ran.contains("hello-from-exec"), "{ran}");
    std::fs::write(std::env::temp_dir().join("clawless-tui-chat.txt"), &ran).unwrap();

    // The bot at work: the model held while three updates wait in one chat.
    tmux.keys_to(session, &["Tab"]);
    f.llm_hang.store(true, Ordering::SeqCst);
    let client = reqwest::Client::new();
    for id in 1..=3 {
        let r = client
            .post(format!("http://{listen}/telegram/main"))
            .header("x-telegram-bot-api-secret-token", SECRET)
            .body(text_update(id, &format!("question {id}")).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    tmux.until_in(session, "the backlog", |s| s.contains("backlog: 3 job(s)"))
        .await;
    f.llm_hang.store(false, Ordering::SeqCst);
    let after = tmux
        .until_in(session, "the backlog gone and three answers", |s| {
            s.contains("backlog: 0 job(s)") && s.matches("answered").count() >= 3
        })
        .await;
    assert!(after.contains("main:"), "the session of the chat: {after}");

    // A turn that fails for good, found by its trace id.
    let r = client
        .post(format!("http://{listen}/telegram/main"))
        .header("x-telegram-bot-api-secret-token", SECRET)
        .body(text_update(9, "model down please").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    tmux.until_in(session, "the failed run", |s| {
        s.contains("main/9") && s.contains("failed")
    })
    .await;
    tmux.keys_to(session, &["/", "main/9", "Enter"]);
    let failed = tmux
        .until_in(session, "its events", |s| {
            s.contains("Events of main/9") && s.contains("turn_ended")
        })
        .await;
    assert!(failed.contains("retry_scheduled"), "{failed}");
    std::fs::write(
        std::env::temp_dir().join("clawless-tui-panels.txt"),
        &failed,
    )
    .unwrap();

    // The same turn from elsewhere: a cockpit attached through the admin endpoint.
    let (panels, events) = tmux
        .remote_cockpit_shows(
            env!("CARGO_BIN_EXE_clawless"),
            &format!("http://{listen}"),
            ADMIN,
            "main/9",
            "failed",
        )
        .await;
    assert!(
        panels.contains("main:111111111"),
        "the session, remotely: {panels}"
    );
    assert!(events.contains("retry_scheduled"), "{events}");
    tmux.keys_to(session, &["q"]);
}

const ADMIN: &str = "tui-admin-token-0123456789";
