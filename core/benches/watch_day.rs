//! What a watch costs: a day of checks every 15 minutes on a page that does not change, then
//! one change, on the real `App` with in-memory ports (the harness of `core/tests`). Prints
//! the model calls and tokens, the page requests and the Kv operations; fails if an unchanged
//! day calls the model at all.
//!
//! `cargo bench -p clawless-core --bench watch_day`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawless_core::Config;
use clawless_platform::kv::tap::{Tapped, Verdict};
use clawless_platform::HttpResponse;
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use serde_json::json;
use support::{Harness, Wire};

const PAGE: &str = "https://status.example/";
const PERIOD: Duration = Duration::from_secs(15 * 60);

fn main() {
    futures::executor::block_on(run());
}

async fn run() {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    config
        .agents
        .get_mut("assistant")
        .unwrap()
        .tools
        .push("watch".into());
    let ops = Arc::new(AtomicUsize::new(0));
    let counted = ops.clone();
    let h = Harness::with_ports(Wire::Anthropic, config, move |p, _, _| {
        let n = counted.clone();
        p.kv = Arc::new(Tapped::new(p.kv.clone(), move |_| {
            n.fetch_add(1, Ordering::Relaxed);
            Verdict::Run
        }));
    });
    let text = Arc::new(Mutex::new("All systems operational.".to_owned()));
    let requests = Arc::new(AtomicUsize::new(0));
    let (served, asked) = (text.clone(), requests.clone());
    h.http.route(PAGE, move |req| {
        asked.fetch_add(1, Ordering::Relaxed);
        let body = served.lock().unwrap().clone();
        let etag = format!("\"{}\"", body.len());
        if req.header_value("if-none-match") == Some(etag.as_str()) {
            return Ok(HttpResponse::new(304, ""));
        }
        let html = format!("<html><body><p>{body}</p></body></html>");
        Ok(HttpResponse::new(200, html)
            .with_header("content-type", "text/html")
            .with_header("etag", etag))
    });
    h.script(
        200,
        anthropic_tool_use(
            "w",
            "watch",
            json!({"action": "create", "url": PAGE, "every": "15m", "task": "tell me what changed"}),
        ),
    );
    h.script(200, anthropic_text("Watching."));
    let mut u = fixtures::update("private_text", 1);
    u["message"]["text"] = json!("watch the status page");
    h.deliver_raw(&u).await;
    let model_before = h.llm_requests().len();
    // The first check learns the page.
    h.clock.advance(Duration::from_secs(2));
    h.app.fire_due().await;
    let (ops0, req0) = (
        ops.load(Ordering::Relaxed),
        requests.load(Ordering::Relaxed),
    );
    for _ in 0..96 {
        h.clock.advance(PERIOD);
        h.app.fire_due().await;
    }
    let day_ops = ops.load(Ordering::Relaxed) - ops0;
    let day_requests = requests.load(Ordering::Relaxed) - req0;
    let day_model = h.llm_requests().len() - model_before;
    println!("a day of a watch every 15 min on an unchanged page (96 checks):");
    println!("  model calls {day_model}, tokens 0");
    println!("  page requests {day_requests} (conditional GETs answered 304)");
    println!(
        "  Kv operations {day_ops} ({:.1} per check)",
        day_ops as f64 / 96.0
    );
    assert_eq!(day_model, 0, "an unchanged page must not call the model");

    *text.lock().unwrap() = "Degraded performance in eu-west.".to_owned();
    h.script(
        200,
        anthropic_text("The status page now says: degraded in eu-west."),
    );
    let (ops1, req1) = (
        ops.load(Ordering::Relaxed),
        requests.load(Ordering::Relaxed),
    );
    h.clock.advance(PERIOD);
    h.app.fire_due().await;
    let turn = &h.llm_requests()[model_before..];
    println!("the page changes (one check):");
    println!(
        "  model calls {}, page requests {}, Kv operations {}",
        turn.len(),
        requests.load(Ordering::Relaxed) - req1,
        ops.load(Ordering::Relaxed) - ops1
    );
    assert_eq!(turn.len(), 1, "a change costs one turn");
}
