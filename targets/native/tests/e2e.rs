//! The real `clawless` binary over HTTP on 127.0.0.1, with in-process fake Bot API and LLM
//! servers: the webhook path end to end, and kill -9 + restart recovery.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use axum::Json;
use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use clawless_testkit::spec::spec;
use serde_json::{json, Value};

const TOKEN: &str = "42:E2E-TOKEN";
const SECRET: &str = "e2e-secret";

#[derive(Default)]
struct Fakes {
    /// Bot API calls answered: (method, body).
    calls: Mutex<Vec<(String, Value)>>,
    violations: Mutex<Vec<String>>,
    /// sendMessage attempts seen, answered or not.
    send_attempts: Mutex<usize>,
    llm_requests: Mutex<Vec<Value>>,
    /// While set, the model never answers.
    llm_hang: AtomicBool,
    /// While set, sendMessage never answers.
    send_hang: AtomicBool,
}

impl Fakes {
    fn sent(&self) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == "sendMessage")
            .map(|(_, b)| b.clone())
            .collect()
    }
    fn sent_to(&self, chat: i64) -> Vec<String> {
        self.sent()
            .iter()
            .filter(|b| b["chat_id"] == chat)
            .map(|b| b["text"].as_str().unwrap_or("").to_owned())
            .collect()
    }
    fn llm_count(&self, needle: &str) -> usize {
        // The question is the last message of the request that first asks it.
        let reqs = self.llm_requests.lock().unwrap();
        reqs.iter()
            .filter(|r| {
                r["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .is_some_and(|m| m.to_string().contains(needle))
            })
            .count()
    }
}

async fn bot_api(
    State(f): State<Arc<Fakes>>,
    axum::extract::Path(method): axum::extract::Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let method = method.rsplit('/').next().unwrap_or("").to_owned();
    if let Err(v) = spec().check_call(&method, &body) {
        f.violations.lock().unwrap().push(v.clone());
        return Json(json!({"ok": false, "error_code": 400, "description": v}));
    }
    if method == "sendMessage" {
        *f.send_attempts.lock().unwrap() += 1;
        while f.send_hang.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let result = match method.as_str() {
        "getMe" => {
            json!({"id": fixtures::BOT_ID, "is_bot": true, "first_name": "Clawless", "username": fixtures::BOT_USERNAME})
        }
        "sendMessage" => {
            json!({"message_id": 1, "date": 1, "chat": {"id": body["chat_id"], "type": "private"}, "text": body["text"]})
        }
        _ => json!(true),
    };
    f.calls.lock().unwrap().push((method, body));
    Json(json!({"ok": true, "result": result}))
}

/// A scripted Anthropic model: "time" asks for the clock tool, "long" writes 6000+
/// characters, anything else is echoed.
async fn llm(State(f): State<Arc<Fakes>>, Json(req): Json<Value>) -> Json<Value> {
    f.llm_requests.lock().unwrap().push(req.clone());
    while f.llm_hang.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let msgs = req["messages"].as_array().cloned().unwrap_or_default();
    let last = msgs.last().cloned().unwrap_or(Value::Null);
    if last["content"][0]["type"] == "tool_result" {
        return Json(anthropic_text(&format!(
            "Tool said: {}",
            last["content"][0]["content"].as_str().unwrap_or("")
        )));
    }
    let text = last["content"][0]["text"].as_str().unwrap_or("").to_owned();
    if text.contains("time") {
        return Json(anthropic_tool_use(
            "toolu_e2e",
            "current_time",
            json!({"utc_offset": "UTC"}),
        ));
    }
    if text.contains("long") {
        return Json(anthropic_text(
            &(0..120)
                .map(|i| format!("Line {i:03} {}", "y".repeat(48)))
                .collect::<Vec<_>>()
                .join("\n"),
        ));
    }
    Json(anthropic_text(&format!("You said: {text}")))
}

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

async fn start_bot(data: &std::path::Path, tg: &str, llm: &str) -> Bot {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_clawless"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env_clear()
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
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
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

async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn text_update(id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", id);
    u["message"]["text"] = json!(text);
    u
}

async fn fakes() -> (Arc<Fakes>, String, String) {
    let f = Arc::new(Fakes::default());
    let tg = common::serve(
        axum::Router::new()
            .route("/{*method}", post(bot_api))
            .with_state(f.clone()),
    )
    .await;
    let llm_url = common::serve(
        axum::Router::new()
            .route("/v1/messages", post(llm))
            .with_state(f.clone()),
    )
    .await;
    (f, tg, llm_url)
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
    tokio::time::sleep(Duration::from_millis(300)).await;

    assert_eq!(f.sent_to(OWNER_ID)[0], "You said: hello there");
    assert_eq!(f.sent_to(STRANGER_ID).len(), 1);
    assert_eq!(f.sent_to(GROUP_ID), ["You said: what is 2+2?"]);
    assert_eq!(f.llm_count("hello there"), 1, "duplicate answered once");
    assert_eq!(f.llm_count("Eve"), 0);
    assert!(f
        .sent()
        .iter()
        .all(|b| b["text"].as_str().unwrap().encode_utf16().count() <= 4096));
    assert!(
        f.violations.lock().unwrap().is_empty(),
        "{:?}",
        f.violations.lock().unwrap()
    );
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
    let bot = start_bot(&data, &tg, &llm_url).await;
    until("the answer after restart", || {
        f.sent_to(OWNER_ID).len() == 1
    })
    .await;
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
