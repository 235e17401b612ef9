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
use std::time::{Duration, Instant};

use clawless_testkit::servers::{fakes, text_update};
use common::bot::{SECRET, TOKEN};

/// A tmux server of this test's own, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen_of(&self, session: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", session])
    }

    fn keys(&self, keys: &[&str]) {
        self.keys_to("cockpit", keys)
    }

    fn keys_to(&self, session: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", session];
        args.extend(keys);
        self.run(&args);
    }

    /// Captures until `cond` holds (within 30 s); returns that screen.
    async fn until(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        self.until_in("cockpit", what, cond).await
    }

    async fn until_in(&self, session: &str, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen_of(session);
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

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
    let tmux = Tmux {
        socket: format!("clawless-tui-{}", std::process::id()),
    };
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "cockpit",
        "-x",
        "130",
        "-y",
        "40",
        &command,
    ]);
    tmux.until("the chat screen", |s| s.contains("Enter sends"))
        .await;

    // A chat turn: the tool call in line, the answer written in pieces.
    tmux.keys(&["what time is it, slowly", "Enter"]);
    let partial = tmux
        .until("part of the answer", |s| {
            s.contains("Assistant: Tool said") && s.contains('▌')
        })
        .await;
    assert!(
        partial.contains("[tool: current_time (allowed) → ok"),
        "{partial}"
    );
    let done = tmux
        .until("the whole answer", |s| {
            s.contains("Assistant: Tool said") && !s.contains('▌')
        })
        .await;
    assert!(done.contains("You: what time is it, slowly"), "{done}");

    // A call that needs an approval is asked here; `y` lets it run, its result in line.
    tmux.keys(&["run: echo hello-from-exec", "Enter"]);
    tmux.until("the approval asked", |s| s.contains("y allows"))
        .await;
    tmux.keys(&["y"]);
    let ran = tmux
        .until("the command's result and the answer", |s| {
            s.contains("[exec result:")
                && s.contains("(allowed)")
                && s.matches("Assistant: Tool said").count() >= 2
        })
        .await;
    assert!(ran.contains("hello-from-exec"), "{ran}");
    std::fs::write(std::env::temp_dir().join("clawless-tui-chat.txt"), &ran).unwrap();

    // The bot at work: the model held while three updates wait in one chat.
    tmux.keys(&["Tab"]);
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
    tmux.until("the backlog", |s| s.contains("backlog: 3 job(s)"))
        .await;
    f.llm_hang.store(false, Ordering::SeqCst);
    let after = tmux
        .until("the backlog gone and three answers", |s| {
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
    tmux.until("the failed run", |s| {
        s.contains("main/9") && s.contains("failed")
    })
    .await;
    tmux.keys(&["/", "main/9", "Enter"]);
    let failed = tmux
        .until("its events", |s| {
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
    let remote = format!(
        "env -i PATH=/usr/bin:/bin TERM=xterm-256color CLAWLESS_ADMIN_TOKEN={ADMIN} {bin} tui --remote http://{listen}",
        bin = env!("CARGO_BIN_EXE_clawless"),
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "remote",
        "-x",
        "130",
        "-y",
        "40",
        &remote,
    ]);
    tmux.until_in("remote", "the remote chat screen", |s| {
        s.contains("read-only")
    })
    .await;
    tmux.keys_to("remote", &["Tab"]);
    let seen = tmux
        .until_in("remote", "the failed run, remotely", |s| {
            s.contains("main/9") && s.contains("failed") && s.contains("attached to")
        })
        .await;
    assert!(
        seen.contains("main:111111111"),
        "the session, remotely: {seen}"
    );
    tmux.keys_to("remote", &["q"]);
    tmux.keys(&["q"]);
}

const ADMIN: &str = "tui-admin-token-0123456789";
