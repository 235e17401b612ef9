//! `cargo bench -p lambda --features emulators`: the Lambda shell's figures.
//!
//! - cold start: process spawn → first `/next` call, median of 10 (the DynamoDB and Lambda
//!   clients are built before the first `/next`);
//! - warm ack latency through the Runtime API emulator, and the DynamoDB calls each ack makes
//!   (counted by a proxy in front of moto);
//! - the sizes of the release `bootstrap` (this machine's) and of the arm64 one with its zip,
//!   when `cargo lambda build --release --arm64` has run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use clawless_testkit::servers::{fakes, serve, text_update};
use common::emulator::{start_emulator, start_function, SECRET};

struct Proxy {
    target: String,
    calls: AtomicUsize,
    client: reqwest::Client,
}

/// Forwards to moto, counting DynamoDB API calls.
async fn forward(
    State(p): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (axum::http::StatusCode, HeaderMap, Bytes) {
    if headers.contains_key("x-amz-target") {
        p.calls.fetch_add(1, Ordering::SeqCst);
    }
    let mut req = p
        .client
        .request(
            method,
            format!(
                "{}{}",
                p.target,
                uri.path_and_query().map(|x| x.as_str()).unwrap_or("/")
            ),
        )
        .body(body);
    for (k, v) in headers
        .iter()
        .filter(|(k, _)| *k != "host" && *k != "content-length")
    {
        req = req.header(k, v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let mut out = HeaderMap::new();
    for (k, v) in resp
        .headers()
        .iter()
        .filter(|(k, _)| *k != "content-length" && *k != "transfer-encoding")
    {
        out.insert(k.clone(), v.clone());
    }
    (status, out, resp.bytes().await.unwrap())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Cold start.
        let mut colds = Vec::new();
        for _ in 0..10 {
            let (emu, runtime) = start_emulator().await;
            let spawned = Instant::now();
            let _f = start_function(
                &runtime,
                "http://127.0.0.1:9",
                "unused",
                "http://127.0.0.1:9",
                "http://127.0.0.1:9",
            );
            while emu.nexts.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            colds.push(emu.nexts.lock().unwrap()[0] - spawned);
        }
        println!(
            "cold start (spawn -> first /next, median of 10): {:?}",
            median(colds)
        );

        // Warm acks and DynamoDB calls per ack.
        let moto = common::moto();
        let proxy = Arc::new(Proxy {
            target: moto.url.clone(),
            calls: AtomicUsize::new(0),
            client: reqwest::Client::new(),
        });
        let proxy_url = serve(
            axum::Router::new()
                .fallback(forward)
                .with_state(proxy.clone()),
        )
        .await;
        let client = common::dynamo_client(&moto).await;
        common::create_table(&client, "bench").await;
        let (_fakes, tg, llm) = fakes().await;
        let (emu, runtime) = start_emulator().await;
        emu.hold_async.store(true, Ordering::SeqCst);
        let _f = start_function(&runtime, &proxy_url, "bench", &tg, &llm);
        let post =
            |id: i64| common::url_event("/telegram/main", &text_update(id, "bench"), Some(SECRET));
        emu.invoke(post(1)).await;
        let before = proxy.calls.load(Ordering::SeqCst);
        let n = 200;
        let mut lat = Vec::new();
        for i in 0..n {
            let t = Instant::now();
            let r = emu.invoke(post(100 + i)).await;
            lat.push(t.elapsed());
            assert_eq!(r["statusCode"], 200);
        }
        let calls = proxy.calls.load(Ordering::SeqCst) - before;
        lat.sort();
        println!(
            "warm ack through the emulator ({n} updates, moto behind a proxy): p50 {:?}, p99 {:?}",
            lat[lat.len() / 2],
            lat[lat.len() * 99 / 100]
        );
        println!("DynamoDB calls per ack: {:.2}", calls as f64 / n as f64);
    });

    let native = env!("CARGO_BIN_EXE_bootstrap");
    println!(
        "bootstrap ({}): {:.2} MB",
        std::env::consts::ARCH,
        size(native) as f64 / 1_048_576.0
    );
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target").into());
    let arm = format!("{target}/lambda/bootstrap/bootstrap");
    if std::path::Path::new(&arm).exists() {
        let zip = std::env::temp_dir().join("clawless-bootstrap.zip");
        let script = format!(
            "import zipfile; z = zipfile.ZipFile({:?}, 'w', zipfile.ZIP_DEFLATED, compresslevel=9); z.write({arm:?}, 'bootstrap'); z.close()",
            zip.to_string_lossy()
        );
        let ok = std::process::Command::new("python3")
            .args(["-c", &script])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        println!(
            "bootstrap (arm64, cargo lambda): {:.2} MB",
            size(&arm) as f64 / 1_048_576.0
        );
        if ok {
            println!(
                "deployment zip (arm64): {:.2} MB",
                size(&zip.to_string_lossy()) as f64 / 1_048_576.0
            );
        }
    } else {
        println!(
            "arm64 bootstrap not built: run `cargo lambda build --release --arm64 -p lambda` first"
        );
    }
}

fn size(path: &str) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}
