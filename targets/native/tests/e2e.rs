//! The real `clawless` binary over HTTP on 127.0.0.1, with in-process fake Bot API and LLM
//! servers: the webhook path end to end, and kill -9 + restart recovery.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::servers::{fakes, recall_after_new, text_update, until};
use serde_json::Value;

const TOKEN: &str = "42:E2E-TOKEN";
const SECRET: &str = "e2e-secret";

struct Bot {
    child: Child,
    url: String,
}

impl Drop for Bot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `clawless` with a clean environment pointing at the fakes.
fn clawless(data: &std::path::Path, tg: &str, llm: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clawless"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .env("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string())
        .env("TELEGRAM_API_BASE", tg)
        .env("ANTHROPIC_API_KEY", "sk-e2e")
        .env("ANTHROPIC_BASE_URL", llm)
        .env("CLAWLESS_DATA", data)
        .env(
            "CLAWLESS_CONFIG",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"),
        )
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit());
    cmd
}

async fn start_bot(data: &std::path::Path, tg: &str, llm: &str) -> Bot {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = clawless(data, tg, llm)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Owned by `Bot` at once, so a failing test still kills and reaps it.
    let bot = Bot {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{}/healthz", bot.url)).send().await {
            if r.status() == 200 {
                return bot;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the bot did not become healthy");
}

async fn post_update(bot: &Bot, update: &Value, secret: Option<&str>) -> u16 {
    let mut req = reqwest::Client::new()
        .post(format!("{}/telegram/main", bot.url))
        .header("content-type", "application/json")
        .body(update.to_string());
    if let Some(s) = secret {
        req = req.header("X-Telegram-Bot-Api-Secret-Token", s);
    }
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_end_to_end() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e");
    let bot = start_bot(&data, &tg, &llm_url).await;

    assert_eq!(
        post_update(&bot, &text_update(1, "hello"), Some("wrong")).await,
        401
    );
    assert_eq!(post_update(&bot, &text_update(1, "hello"), None).await, 401);

    let started = Instant::now();
    assert_eq!(
        post_update(&bot, &text_update(2, "hello there"), Some(SECRET)).await,
        200
    );
    let ack = started.elapsed();
    until("a private reply", || f.sent_to(OWNER_ID).len() == 1).await;
    assert_eq!(f.sent_to(OWNER_ID), ["You said: hello there"]);
    assert!(ack < Duration::from_secs(2), "ack took {ack:?}");
    assert_eq!(f.llm_count("hello"), 1, "the 401s never reached the model");

    // A duplicate delivery is answered once.
    assert_eq!(
        post_update(&bot, &text_update(2, "hello there"), Some(SECRET)).await,
        200
    );
    // The tool round trip.
    post_update(&bot, &text_update(3, "what time is it"), Some(SECRET)).await;
    until("the tool answer", || f.sent_to(OWNER_ID).len() == 2).await;
    assert!(
        f.sent_to(OWNER_ID)[1].starts_with("Tool said: ")
            && f.sent_to(OWNER_ID)[1].contains("UTC+00:00")
    );
    // A long reply is split into valid messages.
    post_update(&bot, &text_update(4, "write something long"), Some(SECRET)).await;
    until("the long answer", || f.sent_to(OWNER_ID).len() >= 4).await;
    // A stranger: one reply, no model call.
    post_update(&bot, &fixtures::update("stranger_private", 5), Some(SECRET)).await;
    post_update(&bot, &fixtures::update("stranger_private", 6), Some(SECRET)).await;
    until("the stranger notice", || f.sent_to(STRANGER_ID).len() == 1).await;
    // Groups: only when mentioned.
    post_update(&bot, &fixtures::update("group_no_mention", 7), Some(SECRET)).await;
    post_update(&bot, &fixtures::update("group_mention", 8), Some(SECRET)).await;
    until("the group answer", || f.sent_to(GROUP_ID).len() == 1).await;
    f.assert_scenario_outcome("hello there").await;
    assert_eq!(f.sent_to(OWNER_ID)[0], "You said: hello there");
    assert_eq!(f.sent_to(STRANGER_ID).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_and_restart_loses_nothing_and_repeats_nothing() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-kill");

    // 1. Killed while the model is thinking: after restart the update is answered once.
    f.llm_hang.store(true, Ordering::SeqCst);
    let mut bot = start_bot(&data, &tg, &llm_url).await;
    assert_eq!(
        post_update(&bot, &text_update(10, "first question"), Some(SECRET)).await,
        200
    );
    until("the model call in flight", || {
        f.llm_count("first question") == 1
    })
    .await;
    bot.child.kill().unwrap();
    bot.child.wait().unwrap();
    f.llm_hang.store(false, Ordering::SeqCst);
    drop(bot);
    let restarted = std::time::Instant::now();
    let bot = start_bot(&data, &tg, &llm_url).await;
    until("the answer after restart", || {
        f.sent_to(OWNER_ID).len() == 1
    })
    .await;
    println!(
        "native crash recovery: answered {:.2} s after the restart",
        restarted.elapsed().as_secs_f64()
    );
    assert!(restarted.elapsed() < Duration::from_secs(60));
    assert_eq!(f.sent_to(OWNER_ID), ["You said: first question"]);
    drop(bot);

    // 2. Killed after the model answered, while sending: no second model call, sent once.
    f.send_hang.store(true, Ordering::SeqCst);
    let mut bot = start_bot(&data, &tg, &llm_url).await;
    let attempts_before = *f.send_attempts.lock().unwrap();
    post_update(&bot, &text_update(11, "second question"), Some(SECRET)).await;
    until("the send in flight", || {
        *f.send_attempts.lock().unwrap() > attempts_before
    })
    .await;
    bot.child.kill().unwrap();
    bot.child.wait().unwrap();
    f.send_hang.store(false, Ordering::SeqCst);
    drop(bot);
    let _bot = start_bot(&data, &tg, &llm_url).await;
    until("the second answer after restart", || {
        f.sent_to(OWNER_ID).len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        f.sent_to(OWNER_ID),
        ["You said: first question", "You said: second question"]
    );
    assert_eq!(
        f.llm_count("second question"),
        1,
        "the checkpointed answer was not asked for again"
    );
    assert!(f.violations.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polling_answers_without_a_public_url() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-poll");
    f.updates
        .lock()
        .unwrap()
        .extend([text_update(70, "polled one"), text_update(71, "polled two")]);
    let child = clawless(&data, &tg, &llm_url)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _bot = Bot {
        child,
        url: String::new(),
    };
    until("both polled updates answered", || {
        f.sent_to(OWNER_ID).len() == 2
    })
    .await;
    assert_eq!(
        f.sent_to(OWNER_ID),
        ["You said: polled one", "You said: polled two"]
    );
    // The next poll starts after the last update.
    until("a poll past the last update", || {
        f.calls
            .lock()
            .unwrap()
            .iter()
            .any(|(m, b)| m == "getUpdates" && b["offset"] == 72)
    })
    .await;
    assert!(f.violations.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_turn_in_flight() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-term");
    let mut bot = start_bot(&data, &tg, &llm_url).await;
    f.llm_hang.store(true, Ordering::SeqCst);
    post_update(&bot, &text_update(80, "slow question"), Some(SECRET)).await;
    until("the model call in flight", || {
        f.llm_count("slow question") == 1
    })
    .await;
    let status = Command::new("kill")
        .args(["-TERM", &bot.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    f.llm_hang.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = bot.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");
    assert_eq!(
        f.sent_to(OWNER_ID),
        ["You said: slow question"],
        "answered before exiting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_token_and_key_are_named() {
    let data = common::temp_dir("e2e-missing");
    let out = Command::new(env!("CARGO_BIN_EXE_clawless"))
        .env_clear()
        .env("CLAWLESS_DATA", &data)
        .env(
            "CLAWLESS_CONFIG",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "a missing setting exits with 3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TELEGRAM_BOT_TOKEN") && err.contains("ANTHROPIC_API_KEY or OPENAI_API_KEY"),
        "{err}"
    );
}

#[test]
fn every_command_has_help_and_usage_errors_exit_with_2() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_clawless"))
            .env_clear()
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["serve", "--help"],
        &["chat", "--help"],
        &["config", "check", "--help"],
        &["webhook", "set", "--help"],
        &["webhook", "info", "--help"],
        &["webhook", "delete", "--help"],
        &["memory", "search", "--help"],
        &["memory", "reindex", "--help"],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage:"),
            "{args:?}"
        );
    }
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(
        run(&["webhook", "set"]).status.code(),
        Some(2),
        "URL missing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_connector_is_a_usage_error_naming_the_choices() {
    let (_f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-connector");
    let out = clawless(&data, &tg, &llm_url)
        .args(["webhook", "info", "--connector", "nope"])
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"nope\"") && err.contains("main"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_chat_and_webhook_commands() {
    use std::io::Write;
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-cli");
    let mut child = clawless(&data, &tg, &llm_url)
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello from the terminal\n")
        .unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("You said: hello from the terminal"));

    let out = clawless(&data, &tg, &llm_url)
        .args(["webhook", "set", "https://bot.example.com"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = f.calls.lock().unwrap().clone();
    let (_, body) = calls.iter().find(|(m, _)| m == "setWebhook").unwrap();
    assert_eq!(body["url"], "https://bot.example.com/telegram/main");
    assert_eq!(body["secret_token"], SECRET);
    let out = clawless(&data, &tg, &llm_url)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("environment OK"));
    assert!(f.violations.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_written_memory_is_recalled() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-memory");
    // Written by hand where memory lived before it was per person: the bot's start-up run
    // moves it to the owner's memory and indexes it, with no CLI command run before.
    let dir = data.join("files/memory/assistant/main");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("MEMORY.md"),
        "# Family\nMy sister Ana lives in Lisbon.\n",
    )
    .unwrap();
    let bot = start_bot(&data, &tg, &llm_url).await;
    // The start-up sweep indexes the file (milliseconds); leave it ample time before asking.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    post_update(
        &bot,
        &text_update(90, "where does my sister live?"),
        Some(SECRET),
    )
    .await;
    until("the answer", || f.sent_to(OWNER_ID).len() == 1).await;
    let reqs = f.llm_requests.lock().unwrap().clone();
    let system = reqs[0]["system"].as_str().unwrap();
    assert!(
        system.contains("Relevant memories") && system.contains("Lisbon"),
        "{system}"
    );
    drop(bot);
    assert!(data
        .join(format!("files/memory/assistant/main/u{OWNER_ID}/MEMORY.md"))
        .exists());
    // The CLI finds it too, and has nothing left to re-index.
    let out = clawless(&data, &tg, &llm_url)
        .args(["memory", "reindex"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("main: 0 file(s) re-indexed"),
        "already indexed by the bot"
    );
    let out = clawless(&data, &tg, &llm_url)
        .args(["memory", "search", "sister Lisbon"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && printed.contains("MEMORY.md lines 1-2") && printed.contains("Ana"),
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_told_before_new_is_recalled_after_it() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-recall");
    let bot = start_bot(&data, &tg, &llm_url).await;
    recall_after_new(&f, 1, |u| {
        let bot = &bot;
        async move {
            assert_eq!(post_update(bot, &u, Some(SECRET)).await, 200);
        }
    })
    .await;
    let notes = data.join("files/memory/assistant/main/u111111111/memory");
    let written: Vec<_> = std::fs::read_dir(&notes).unwrap().collect();
    assert_eq!(written.len(), 1, "one daily note under {notes:?}");
}
