//! Test-only route (feature `test-routes`): `GET /__bench` times the core inside workerd (V8 +
//! this wasm) on in-memory ports with canned model and Bot API answers, so the figures are the
//! CPU an update costs here without I/O. workerd's `performance.now()` has millisecond
//! resolution, so updates are timed in batches of [`BATCH`] and each figure is a batch mean.

use std::sync::Arc;

use clawless_core::{App, Config, Env};
use clawless_platform::{HttpResponse, Platform};
use clawless_testkit::fixtures;
use clawless_testkit::llm::anthropic_text;
use js_sys::Reflect;
use serde_json::json;
use wasm_bindgen::{JsCast, JsValue};
use worker::{Response, Result};

use crate::inbound::CONFIG_JSON;

const SECRET: &str = "bench-secret";
const BATCH: i64 = 50;
const BATCHES: i64 = 40;

fn now_ms() -> f64 {
    let perf = Reflect::get(&js_sys::global(), &JsValue::from_str("performance"))
        .unwrap_or(JsValue::UNDEFINED);
    Reflect::get(&perf, &JsValue::from_str("now"))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .and_then(|f| f.call0(&perf).ok())
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0)
}

fn build_app() -> std::result::Result<App, String> {
    let (platform, _clock, http) = Platform::in_memory();
    let env = Env::from_pairs([
        ("TELEGRAM_BOT_TOKEN", "1:BENCH"),
        ("TELEGRAM_WEBHOOK_SECRET", SECRET),
        ("TELEGRAM_ALLOWED_USERS", &fixtures::OWNER_ID.to_string()),
        ("ANTHROPIC_API_KEY", "sk-bench"),
        ("ANTHROPIC_BASE_URL", "http://llm.bench"),
    ]);
    let config = Config::from_json(CONFIG_JSON).map_err(|e| e.to_string())?;
    let app = App::new(platform, config, &env, "bench").map_err(|e| e.to_string())?;
    let reply = serde_json::to_vec(&anthropic_text("A short **answer**.")).unwrap_or_default();
    http.route("http://llm.bench", move |_| {
        Ok(HttpResponse::new(200, reply.clone()))
    });
    http.route("https://api.telegram.org/", |_| {
        Ok(HttpResponse::json(200, &json!({"ok": true, "result": {"message_id": 1, "date": 1, "chat": {"id": 1, "type": "private"}}})))
    });
    Ok(app)
}

pub async fn run() -> Result<Response> {
    let started = now_ms();
    let mut apps = Vec::new();
    for _ in 0..BATCH {
        apps.push(build_app().map_err(worker::Error::RustError)?);
    }
    let startup_ms = (now_ms() - started) / BATCH as f64;
    let app = Arc::new(
        apps.pop()
            .ok_or_else(|| worker::Error::RustError("no app".into()))?,
    );

    let body = |id: i64| {
        fixtures::update("private_text", id)
            .to_string()
            .into_bytes()
    };
    let (mut ack, mut turn) = (Vec::new(), Vec::new());
    let mut id = 1_000;
    for _ in 0..BATCHES {
        let bodies: Vec<Vec<u8>> = (0..BATCH).map(|i| body(id + i)).collect();
        id += BATCH;
        let t = now_ms();
        for b in &bodies {
            app.handle_webhook("main", Some(SECRET), b).await;
        }
        ack.push((now_ms() - t) / BATCH as f64);
    }
    // Whole turns on another app (the acks above left 1000 jobs in their lane): ack, then
    // drain (recall, model, render, send).
    let app = Arc::new(
        apps.pop()
            .ok_or_else(|| worker::Error::RustError("no app".into()))?,
    );
    for _ in 0..BATCHES {
        let bodies: Vec<Vec<u8>> = (0..BATCH)
            .map(|i| {
                let mut u = fixtures::update("private_text", id + i);
                u["message"]["text"] =
                    json!(format!("question number {} about the weather", id + i));
                u.to_string().into_bytes()
            })
            .collect();
        id += BATCH;
        let t = now_ms();
        for b in &bodies {
            let r = app.handle_webhook("main", Some(SECRET), b).await;
            if let Some(lane) = r.lane {
                app.drain(&lane)
                    .await
                    .map_err(|e| worker::Error::RustError(e.to_string()))?;
            }
        }
        turn.push((now_ms() - t) / BATCH as f64);
    }
    Response::from_json(&json!({
        "startup_ms": startup_ms,
        "ack_ms": ack,
        "turn_ms": turn,
    }))
}

/// What each invocation used, as JSON lines: `{"kind", "ms", "requests", "cut"}`.
static INVOCATIONS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Runs `work` as one invocation: ended at the shell's cut (`CLAWLESS_TEST_CUT_MS`), as
/// Cloudflare ends wait-until work 30 s after the response (Miniflare does not), and kept with
/// its wall time and the outbound requests made meanwhile.
pub async fn invocation(
    shell: &crate::setup::Shell,
    kind: &str,
    work: impl std::future::Future<Output = ()>,
) {
    use futures::future::{select, Either};
    let started = js_sys::Date::now();
    let before = shell.app.outbound_requests();
    let cut = match shell.cut {
        Some(cut) => {
            let work = std::pin::pin!(work);
            match select(work, worker::Delay::from(cut)).await {
                Either::Left(_) => false,
                Either::Right(_) => {
                    worker::console_error!("{kind} invocation cut after {} ms", cut.as_millis());
                    true
                }
            }
        }
        None => {
            work.await;
            false
        }
    };
    let line = json!({
        "kind": kind,
        "ms": (js_sys::Date::now() - started).max(0.0) as u64,
        "requests": shell.app.outbound_requests().saturating_sub(before),
        "cut": cut,
    });
    INVOCATIONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(line.to_string());
}

/// `GET /__invocations`: what each invocation of this isolate used, one JSON line each.
pub fn invocations() -> Result<Response> {
    let lines = INVOCATIONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .join("\n");
    Response::ok(lines)
}
