//! `cargo bench -p cf-worker --features workerd` (after both Worker builds; `.ci/run` shows
//! how): the figures of the Worker shell.
//!
//! - bundle size: the wasm and the JS glue, raw and gzip -9 (what the free plan's limit and
//!   start-up time depend on);
//! - core time per update inside workerd on in-memory ports with canned model and Bot API
//!   answers (the test build's `/__bench`): ack, whole turn, and building the app (the
//!   per-isolate start-up after wasm instantiation);
//! - through Miniflare with D1: the first webhook of a fresh isolate (wasm instantiation +
//!   start-up + schema check + ack) and the wall time of warm acks (an upper bound on their
//!   CPU: it includes D1's own work and the local HTTP hop);
//! - the first webhook split, medians of five fresh isolates each: a fresh isolate's first
//!   request to `/healthz` (wasm instantiation, no storage), the webhook right after it (app
//!   start-up, the schema made in a new database, the ack), and the first webhook of a fresh
//!   isolate on a database an earlier one made (what a deployed bot's new isolates see);
//! - the ack while one chat's turns drain behind a slow model (1 s an answer): 20 messages of
//!   that chat posted at once, then 40 more of it 50 ms apart, each ack's wall time (p50, p95).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use clawless_testkit::miniflare::{bot_vars, Miniflare, SECRET};
use clawless_testkit::servers::{fakes, text_update, until};
use serde_json::{json, Value};

fn gzip_len(path: &Path) -> usize {
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(path)
        .output()
        .expect("gzip runs");
    out.stdout.len()
}

/// A stranger's update: acknowledged, answered with a notice, never sent to the model.
fn stranger(id: i64) -> Value {
    let mut u = text_update(id, "hi");
    u["message"]["from"]["id"] = json!(42);
    u["message"]["chat"]["id"] = json!(42);
    u
}

/// Wall ms of `f`'s future.
async fn timed<F: std::future::Future>(f: F) -> (f64, F::Output) {
    let t = Instant::now();
    let out = f.await;
    (t.elapsed().as_secs_f64() * 1000.0, out)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn sorted(values: &Value) -> Vec<f64> {
    let mut v: Vec<f64> = values
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let build = std::env::var("CLAWLESS_WORKER_BUILD").expect("CLAWLESS_WORKER_BUILD");
    let build = Path::new(&build);
    let (wasm, glue) = (build.join("index_bg.wasm"), build.join("index.js"));
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as usize;
    let (wasm_gz, glue_gz) = (gzip_len(&wasm), gzip_len(&glue));
    println!(
        "bundle: wasm {} KB ({} KB gzip), glue {} KB ({} KB gzip), total {} KB gzip",
        size(&wasm) / 1024,
        wasm_gz / 1024,
        size(&glue) / 1024,
        glue_gz / 1024,
        (wasm_gz + glue_gz) / 1024
    );

    let mf = Miniflare::start("CLAWLESS_WORKER_TEST_BUILD", json!({}), false);
    let (status, body) = mf.get("/__bench").await;
    assert_eq!(status, 200, "{body}");
    let figures: Value = serde_json::from_str(&body).unwrap();
    let (ack, turn) = (sorted(&figures["ack_ms"]), sorted(&figures["turn_ms"]));
    println!(
        "in workerd, in-memory ports (means of 50-update batches): ack p50 {:.3} ms p99 {:.3} ms; whole turn p50 {:.3} ms p99 {:.3} ms; app start-up {:.3} ms",
        percentile(&ack, 0.5),
        percentile(&ack, 0.99),
        percentile(&turn, 0.5),
        percentile(&turn, 0.99),
        figures["startup_ms"].as_f64().unwrap()
    );

    drop(mf);

    let (_f, tg, llm) = fakes().await;
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", bot_vars(&tg, &llm), false);
    let t = Instant::now();
    assert_eq!(mf.post_update(&stranger(1), Some(SECRET)).await, 200);
    let first = t.elapsed().as_secs_f64() * 1000.0;
    let mut warm = Vec::new();
    for id in 2..302 {
        let t = Instant::now();
        assert_eq!(mf.post_update(&stranger(id), Some(SECRET)).await, 200);
        warm.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    warm.sort_by(f64::total_cmp);
    println!(
        "through Miniflare with D1: first webhook of a fresh isolate {first:.1} ms; warm ack wall p50 {:.2} ms p95 {:.2} ms p99 {:.2} ms",
        percentile(&warm, 0.5),
        percentile(&warm, 0.95),
        percentile(&warm, 0.99)
    );
    drop(mf);

    let vars = bot_vars(&tg, &llm);
    let (mut health, mut after_health, mut existing, mut d1_warm) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..5 {
        let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", vars.clone(), false);
        let (ms, (status, _)) = timed(mf.get("/healthz")).await;
        assert_eq!(status, 200);
        health.push(ms);
        let (ms, status) = timed(mf.post_update(&stranger(1), Some(SECRET))).await;
        assert_eq!(status, 200);
        after_health.push(ms);
        drop(mf);

        let dir = std::env::temp_dir().join(format!(
            "clawless-workerd-bench-{}-{round}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let options = json!({"vars": vars, "vectorize": false, "persist": dir});
        let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options.clone());
        assert_eq!(mf.post_update(&stranger(1), Some(SECRET)).await, 200);
        drop(mf);
        let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options.clone());
        let (ms, status) = timed(mf.post_update(&stranger(2), Some(SECRET))).await;
        assert_eq!(status, 200);
        existing.push(ms);
        drop(mf);
        // Miniflare's D1 is a local simulator started on first use: started from outside the
        // Worker first, the webhook's time is the isolate's and the statements' own.
        let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
        mf.control("sql", "SELECT 1").await;
        let (ms, status) = timed(mf.post_update(&stranger(3), Some(SECRET))).await;
        assert_eq!(status, 200);
        d1_warm.push(ms);
        drop(mf);
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!(
        "the first webhook split (medians of 5 fresh isolates): first request /healthz {:.1} ms, then the first webhook {:.1} ms (new database); first webhook of a fresh isolate on an existing database {:.1} ms, the same with the D1 simulator started first {:.1} ms",
        median(health),
        median(after_health),
        median(existing),
        median(d1_warm)
    );

    if let Ok(front) = std::env::var("CLAWLESS_WORKER_FRONT_BUILD") {
        front_figures(Path::new(&front), &vars).await;
    }

    // One chat's turns draining behind a slow model while more of its messages come in.
    let (f, tg, llm) = fakes().await;
    f.llm_delay_ms
        .store(1_000, std::sync::atomic::Ordering::SeqCst);
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", bot_vars(&tg, &llm), false);
    let first: Vec<Value> = (1..=20)
        .map(|id| text_update(id, &format!("turn {id}")))
        .collect();
    let posts = first.iter().map(|u| mf.post_update(u, Some(SECRET)));
    for status in futures::future::join_all(posts).await {
        assert_eq!(status, 200);
    }
    let requests = || f.llm_requests.lock().unwrap().len();
    until("the first slow turn asks the model", || requests() > 0).await;
    let mut acks = Vec::new();
    for id in 21..61 {
        let (ms, status) =
            timed(mf.post_update(&text_update(id, &format!("more {id}")), Some(SECRET))).await;
        assert_eq!(status, 200);
        acks.push(ms);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let asked = requests();
    acks.sort_by(f64::total_cmp);
    println!(
        "acks while one chat's 20 slow turns drain (a model answering in 1 s; 40 more of its messages, 50 ms apart; {asked} model requests meanwhile): wall p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms",
        percentile(&acks, 0.5),
        percentile(&acks, 0.95),
        acks[acks.len() - 1]
    );
}

/// The front Worker (`front.toml`) in front of the assistant's, as the pair deploys: its
/// bundle, the first webhook of a fresh front isolate on a database an earlier one made (five
/// fresh processes; the D1 simulator started from outside first, as above), and its warm acks.
async fn front_figures(build: &Path, vars: &Value) {
    let (wasm, glue) = (build.join("index_bg.wasm"), build.join("index.js"));
    println!(
        "front bundle: wasm {} KB gzip, glue {} KB gzip",
        gzip_len(&wasm) / 1024,
        gzip_len(&glue) / 1024
    );
    let mut first = Vec::new();
    for round in 0..5 {
        let dir = std::env::temp_dir().join(format!(
            "clawless-workerd-bench-front-{}-{round}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let options = json!({"vars": vars, "persist": dir, "queue": true, "front": true});
        let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options.clone());
        assert_eq!(mf.post_update(&stranger(1), Some(SECRET)).await, 200);
        drop(mf);
        let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
        let front = mf.front.clone().expect("the front's URL");
        mf.control("sql", "SELECT 1").await;
        let body = stranger(2).to_string();
        let (ms, status) = timed(mf.post_body_to(&front, body, Some(SECRET))).await;
        assert_eq!(status, 200);
        first.push(ms);
        if round == 0 {
            warm_acks(
                &mf,
                &front,
                "with the assistant draining each update beside it",
            )
            .await;
        }
        drop(mf);
        let _ = std::fs::remove_dir_all(&dir);
    }
    // No queue consumer: the lanes wait (for a cron that does not come here), so nothing but
    // the acks uses the D1 simulator: the ack's own cost, as the assistant's above.
    let options = json!({"vars": vars, "queue": false, "front": true});
    let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
    let front = mf.front.clone().expect("the front's URL");
    assert_eq!(
        mf.post_body_to(&front, stranger(1).to_string(), Some(SECRET))
            .await,
        200
    );
    warm_acks(&mf, &front, "alone").await;
    drop(mf);
    let mut sorted_first = first.clone();
    sorted_first.sort_by(f64::total_cmp);
    println!(
        "through the front Worker: first webhook of a fresh isolate on an existing database, D1 started first: median {:.1} ms (of 5: {:.1} to {:.1} ms)",
        median(first),
        sorted_first[0],
        sorted_first[4]
    );
}

/// 300 stranger updates posted one after another to the front at `front`: the wall time of
/// each ack, p50, p95 and p99.
async fn warm_acks(mf: &Miniflare, front: &str, beside: &str) {
    let mut warm = Vec::new();
    for id in 1_000..1_300 {
        let body = stranger(id).to_string();
        let (ms, status) = timed(mf.post_body_to(front, body, Some(SECRET))).await;
        assert_eq!(status, 200);
        warm.push(ms);
    }
    warm.sort_by(f64::total_cmp);
    println!(
        "through the front Worker, {beside}: warm ack wall p50 {:.2} ms p95 {:.2} ms p99 {:.2} ms",
        percentile(&warm, 0.5),
        percentile(&warm, 0.95),
        percentile(&warm, 0.99)
    );
}
