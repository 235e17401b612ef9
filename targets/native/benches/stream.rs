//! `cargo bench -p native --bench stream`: a streamed reply on the release `clawless serve`,
//! over real HTTP on 127.0.0.1.
//!
//! A fake model (Anthropic wire) answers each turn with server-sent events: its first token
//! after `FIRST_TOKEN`, then one token every 20 ms (50 tokens/s), `TOKENS` in all. A fake Bot
//! API records every call with its time. For each of `RUNS` private messages the bench prints
//! the time from the webhook post to the first visible text (the first `sendMessageDraft`),
//! that time less the moment the model sent its first token (the shell's own share; goal:
//! ≤ 50 ms), the time to the final `sendMessage`, and the Bot API calls the reply took, by
//! method. Then the same for a group with `streaming.groups` on (placeholder edits), each run
//! in a group of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use axum::Json;
use clawless_testkit::fixtures::{GROUP_ID, OWNER_ID};
use clawless_testkit::servers::serve;
use serde_json::{json, Value};

const SECRET: &str = "stream-secret";
const RUNS: i64 = 5;
const TOKENS: usize = 100;
const EVERY: Duration = Duration::from_millis(20);
const FIRST_TOKEN: Duration = Duration::from_millis(300);

#[derive(Default)]
struct Seen {
    /// Every Bot API call: (method, when, body).
    calls: Vec<(String, Instant, Value)>,
    /// When the model sent each stream's first token.
    first_tokens: Vec<Instant>,
}

type Shared = Arc<Mutex<Seen>>;

async fn bot_api(
    State(seen): State<Shared>,
    Path(method): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let method = method.rsplit('/').next().unwrap_or("").to_owned();
    let mut s = seen.lock().unwrap();
    s.calls.push((method.clone(), Instant::now(), body.clone()));
    let n = s.calls.len() as i64;
    Json(match method.as_str() {
        "sendMessage" => json!({"ok": true, "result": {"message_id": 10_000 + n, "date": 1,
            "chat": {"id": body["chat_id"], "type": "private"}, "text": body["text"]}}),
        "getMe" => json!({"ok": true, "result": {"id": 7_000_000_001i64, "is_bot": true,
            "first_name": "Clawless", "username": "clawless_test_bot"}}),
        _ => json!({"ok": true, "result": true}),
    })
}

fn event(kind: &str, data: Value) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

/// One streamed answer: `TOKENS` words at 50 tokens/s after `FIRST_TOKEN`.
async fn model(State(seen): State<Shared>, Json(body): Json<Value>) -> Response {
    assert_eq!(body["stream"], true, "the reply is asked to stream");
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(8);
    tokio::spawn(async move {
        let start = json!({"type": "message_start", "message": {"id": "msg_b", "type": "message",
            "role": "assistant", "model": "bench", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 20, "output_tokens": 1}}});
        let _ = tx.send(Ok(event("message_start", start))).await;
        tokio::time::sleep(FIRST_TOKEN).await;
        let block = json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}});
        let _ = tx.send(Ok(event("content_block_start", block))).await;
        for i in 0..TOKENS {
            let delta = json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": format!("word{i} ")}});
            if i == 0 {
                seen.lock().unwrap().first_tokens.push(Instant::now());
            } else {
                tokio::time::sleep(EVERY).await;
            }
            let _ = tx.send(Ok(event("content_block_delta", delta))).await;
        }
        let stop = json!({"type": "content_block_stop", "index": 0});
        let _ = tx.send(Ok(event("content_block_stop", stop))).await;
        let delta = json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": TOKENS}});
        let _ = tx.send(Ok(event("message_delta", delta))).await;
        let _ = tx
            .send(Ok(event("message_stop", json!({"type": "message_stop"}))))
            .await;
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The repository's config with `streaming.groups` switched on, in a temporary directory.
fn config_with_group_streaming(dir: &std::path::Path) {
    let src = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"));
    copy_dir(src, dir);
    let main = dir.join("main.yaml");
    let text = std::fs::read_to_string(&main).unwrap();
    let text = text.replace("  groups: false", "  groups: true");
    assert!(text.contains("  groups: true"));
    std::fs::write(main, text).unwrap();
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn update(id: i64, chat: i64) -> Value {
    let chat = match chat < 0 {
        true => json!({"id": chat, "type": "supergroup", "title": "Bench"}),
        false => json!({"id": chat, "type": "private", "first_name": "Owner"}),
    };
    let text = match chat["type"] == "private" {
        true => "tell me a story".to_owned(),
        false => "@clawless_test_bot tell me a story".to_owned(),
    };
    let mut message = json!({"message_id": id, "date": 1_700_000_000,
        "chat": chat, "from": {"id": OWNER_ID, "is_bot": false, "first_name": "Owner"},
        "text": text});
    if chat["type"] != "private" {
        message["entities"] = json!([{"type": "mention", "offset": 0, "length": 18}]);
    }
    json!({"update_id": id, "message": message})
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let seen = Shared::default();
        let tg = serve(
            axum::Router::new()
                .route("/{*method}", post(bot_api))
                .with_state(seen.clone()),
        )
        .await;
        let llm = serve(
            axum::Router::new()
                .route("/v1/messages", post(model))
                .with_state(seen.clone()),
        )
        .await;
        let data = std::env::temp_dir().join(format!("clawless-stream-{}", std::process::id()));
        let config = data.join("config");
        config_with_group_streaming(&config);
        let port = free_port();
        let _server = Server(
            Command::new(env!("CARGO_BIN_EXE_clawless"))
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .env_clear()
                .env("TELEGRAM_BOT_TOKEN", "1:BENCH")
                .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
                .env("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string())
                .env("TELEGRAM_API_BASE", &tg)
                .env("ANTHROPIC_API_KEY", "sk-bench")
                .env("ANTHROPIC_BASE_URL", &llm)
                .env("CLAWLESS_DATA", data.join("data"))
                .env("CLAWLESS_CONFIG", &config)
                .env("RUST_LOG", "error")
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let url = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let mut up = false;
        for _ in 0..400 {
            if client.get(format!("{url}/healthz")).send().await.is_ok() {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(up, "clawless serve did not start");

        for (label, chat, first_visible) in [
            ("private chat (drafts)", OWNER_ID, "sendMessageDraft"),
            ("group, streaming.groups (placeholder)", GROUP_ID, "sendMessage"),
        ] {
            println!("{label}: {TOKENS} tokens at 50 tokens/s, first token after {FIRST_TOKEN:?}");
            let mut overheads = Vec::new();
            for run in 0..RUNS {
                let id = 1_000 + run + if chat < 0 { 100 } else { 0 };
                // A group of its own per run: the same group would wait out the outbound
                // limiter (one message a second per chat) right after the previous answer.
                let chat = if chat < 0 { chat - run } else { chat };
                let (calls_before, tokens_before) = {
                    let s = seen.lock().unwrap();
                    (s.calls.len(), s.first_tokens.len())
                };
                let posted = Instant::now();
                let status = client
                    .post(format!("{url}/telegram/main"))
                    .header("content-type", "application/json")
                    .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
                    .body(update(id, chat).to_string())
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert_eq!(status, 200);
                let answered = |s: &Seen| {
                    s.calls[calls_before..].iter().any(|(m, _, b)| {
                        let text = b["text"].as_str().unwrap_or("");
                        (m == "sendMessage" || m == "editMessageText")
                            && text.trim_end().ends_with(&format!("word{}", TOKENS - 1))
                            && b.get("parse_mode").is_some()
                    })
                };
                let deadline = Instant::now() + Duration::from_secs(30);
                while !answered(&seen.lock().unwrap()) {
                    assert!(Instant::now() < deadline, "no answer within 30 s");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                // Lets anything after the answer (none expected) arrive.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let s = seen.lock().unwrap();
                let calls = &s.calls[calls_before..];
                let first_token = s.first_tokens[tokens_before];
                let first = calls
                    .iter()
                    .find(|(m, _, _)| m == first_visible)
                    .map(|c| c.1)
                    .expect("no text shown before the answer");
                let last = calls.last().map(|c| c.1).unwrap();
                let mut by_method: BTreeMap<&str, usize> = BTreeMap::new();
                for (m, _, _) in calls {
                    *by_method.entry(m.as_str()).or_default() += 1;
                }
                let overhead = first.saturating_duration_since(first_token);
                overheads.push(overhead);
                println!(
                    "  run {run}: first text {:>4} ms after the post, {:.2} ms after the first token; \
                     answer at {:>4} ms; {} Bot API calls: {by_method:?}",
                    (first - posted).as_millis(),
                    overhead.as_secs_f64() * 1000.0,
                    (last - posted).as_millis(),
                    calls.len(),
                );
            }
            overheads.sort();
            println!(
                "  first token → first visible text: median {:.2} ms, max {:.2} ms",
                overheads[overheads.len() / 2].as_secs_f64() * 1000.0,
                overheads.last().unwrap().as_secs_f64() * 1000.0
            );
        }
        let _ = std::fs::remove_dir_all(&data);
    });
}
