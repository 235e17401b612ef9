//! `cargo bench -p native --bench ack`: the figures of the native shell.
//!
//! - acks/s and p50/p99 ack latency on the webhook path (secret check, parse, dedupe, enqueue)
//!   with in-memory ports, from 2 concurrent tasks on a 2-thread runtime;
//! - a storm (1,000 updates, 340 re-deliveries) with every event subscriber attached, one of
//!   them stalled: ack p50/p99 and the stalled one's drops; and what publishing one event costs;
//! - core CPU per update for the whole turn (ack + drain + model + send) on in-memory ports
//!   with canned model and Bot API answers;
//! - what one tool round costs the store: Kv calls and the bytes of each checkpoint (`rounds`);
//! - the release binary's size and its idle RSS while serving.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_core::{App, Config, Env};
use clawless_platform::kv::tap::{KvCall, Tapped, Verdict};
use clawless_platform::{HttpResponse, Platform};
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use serde_json::json;

const SECRET: &str = "bench-secret";

fn build_app() -> (Arc<App>, Arc<clawless_platform::FakeHttp>) {
    let (platform, _clock, http) = Platform::in_memory();
    let app = bench_app(platform, &http);
    // A JSON answer says so: without the content type the stream reader takes the body for
    // server-sent events and every turn failed (the whole-turn figure then timed failures).
    let reply = anthropic_text("A short **answer**.");
    http.route("http://llm.bench", move |_| {
        Ok(HttpResponse::json(200, &reply))
    });
    (Arc::new(app), http)
}

/// The bench's app on `platform`, its model at `http://llm.bench` (the caller routes it) and
/// every Bot API call answered by `http`.
fn bench_app(platform: Platform, http: &clawless_platform::FakeHttp) -> App {
    let env = Env::from_pairs([
        ("TELEGRAM_BOT_TOKEN", "1:BENCH"),
        ("TELEGRAM_WEBHOOK_SECRET", SECRET),
        ("TELEGRAM_ALLOWED_USERS", &fixtures::OWNER_ID.to_string()),
        ("ANTHROPIC_API_KEY", "sk-bench"),
        ("ANTHROPIC_BASE_URL", "http://llm.bench"),
    ]);
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let app = App::new(platform, config, &env, "bench").unwrap();
    http.route("https://api.telegram.org/", |_| {
        Ok(HttpResponse::json(200, &json!({"ok": true, "result": {"message_id": 1, "date": 1, "chat": {"id": 1, "type": "private"}}})))
    });
    app
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    // `cargo bench -p native --bench ack -- storm bus`: only those parts (all without names).
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let run = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if run("ack") {
        ack(&rt);
    }
    if run("storm") {
        storm(&rt);
    }
    if run("bus") {
        bus();
    }
    if run("turn") {
        turn(&rt);
    }
    if run("rounds") {
        rounds(&rt);
    }
    if run("binary") {
        binary();
    }
}

/// A Kv's calls by kind, and the bytes written under `inbox/` (the jobs: each turn's
/// checkpoints), as a [`Tapped`] store's hook records them.
#[derive(Default)]
struct Counts {
    calls: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
    job_writes: std::sync::Mutex<Vec<usize>>,
}

impl Counts {
    fn record(&self, call: &KvCall<'_>) {
        if call.kind() == "purge" {
            return;
        }
        *self.calls.lock().unwrap().entry(call.kind()).or_default() += 1;
        if let Some(value) = call.written().filter(|_| call.key().starts_with("inbox/")) {
            self.job_writes.lock().unwrap().push(value.len());
        }
    }

    fn take(&self) -> (std::collections::BTreeMap<&'static str, u64>, Vec<usize>) {
        (
            std::mem::take(&mut *self.calls.lock().unwrap()),
            std::mem::take(&mut *self.job_writes.lock().unwrap()),
        )
    }
}

/// What one tool round costs the store: Kv calls of a turn with one tool call less those of a
/// turn without, and the bytes of each job write (the checkpoints) in the turn with it.
fn rounds(rt: &tokio::runtime::Runtime) {
    let (mut platform, _clock, http) = Platform::in_memory();
    let kv = Arc::new(Counts::default());
    let counts = kv.clone();
    platform.kv = Arc::new(Tapped::new(platform.kv.clone(), move |call| {
        counts.record(call);
        Verdict::Run
    }));
    let app = bench_app(platform, &http);
    // "time" asks for the clock tool once; its result is answered; anything else at once.
    http.route("http://llm.bench", |req| {
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let last = &body["messages"][body["messages"].as_array().map_or(0, |m| m.len()) - 1];
        let asks =
            last.to_string().contains("what time") && last["content"][0]["type"] != "tool_result";
        let answer = match asks {
            true => anthropic_tool_use("t1", "current_time", json!({"utc_offset": "UTC"})),
            false => anthropic_text("A short **answer**."),
        };
        Ok(HttpResponse::json(200, &answer))
    });
    let turn = |id: i64, text: &'static str| {
        let app = &app;
        async move {
            let mut update = fixtures::update("private_text", id);
            update["message"]["text"] = json!(text);
            let r = app
                .handle_webhook("main", Some(SECRET), update.to_string().as_bytes())
                .await;
            app.drain(&r.lane.unwrap()).await.unwrap();
        }
    };
    let (plain, with_tool, writes) = rt.block_on(async {
        // Warm: identity, menus and the like are read once.
        turn(900_000, "hello").await;
        kv.take();
        turn(900_001, "hello again").await;
        let (plain, _) = kv.take();
        turn(900_002, "what time is it").await;
        let (with_tool, writes) = kv.take();
        (plain, with_tool, writes)
    });
    let answers = http
        .requests()
        .iter()
        .filter(|r| r.url.ends_with("/sendMessage"))
        .count();
    assert_eq!(answers, 3, "every turn answered once");
    let more: Vec<String> = with_tool
        .iter()
        .map(|(kind, n)| {
            format!(
                "{kind} {:+}",
                *n as i64 - *plain.get(kind).unwrap_or(&0) as i64
            )
        })
        .collect();
    println!("Kv calls, turn without a tool: {plain:?}");
    println!(
        "Kv calls per tool round (turn with one tool call, less one without): {}",
        more.join(", ")
    );
    println!("job writes in the turn with one tool call (bytes each, in order): {writes:?}");
}

fn ack(rt: &tokio::runtime::Runtime) {
    // Ack path.
    let (app, _) = build_app();
    let n = 40_000i64;
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            fixtures::update("private_text", 1_000 + i)
                .to_string()
                .into_bytes()
        })
        .collect();
    let bodies = Arc::new(bodies);
    let started = Instant::now();
    let lat = rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..2 {
            let (app, bodies) = (app.clone(), bodies.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(bodies.len() / 2);
                for body in bodies.iter().skip(t).step_by(2) {
                    let s = Instant::now();
                    let r = app.handle_webhook("main", Some(SECRET), body).await;
                    lat.push(s.elapsed());
                    assert_eq!(r.status, 200);
                }
                lat
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    let elapsed = started.elapsed();
    let mut lat = lat;
    lat.sort();
    println!(
        "webhook ack path (in-memory ports, 2 tasks): {:.0} acks/s over {n} updates",
        n as f64 / elapsed.as_secs_f64()
    );
    println!(
        "ack latency: p50 {:?}, p99 {:?}",
        percentile(&lat, 0.50),
        percentile(&lat, 0.99)
    );
}

fn storm(rt: &tokio::runtime::Runtime) {
    // Storm: 1,000 updates and 340 re-deliveries, every subscriber attached (the journal, a
    // cockpit reading on a task of its own as `clawless tui` does, and one that never reads),
    // 2 tasks, 20 rounds on fresh apps.
    let mut storm = Vec::new();
    let mut stalled_drops = 0;
    for round in 0..20i64 {
        let (app, _) = build_app();
        let stalled = app.events().subscribe("stalled", 16);
        let live = app.events().subscribe("cockpit", 4_096);
        let mut bodies: Vec<Vec<u8>> = (0..1_000)
            .map(|i| {
                fixtures::update("private_text", round * 10_000 + i)
                    .to_string()
                    .into_bytes()
            })
            .collect();
        let again: Vec<Vec<u8>> = bodies.iter().step_by(3).take(340).cloned().collect();
        bodies.extend(again);
        let bodies = Arc::new(bodies);
        // As the cockpit reads: it waits for an event, takes all that wait, and draws (a
        // frame, taken as 16 ms here) before it waits again.
        let reader = rt.spawn(async move {
            loop {
                live.next().await;
                live.drain();
                tokio::time::sleep(Duration::from_millis(16)).await;
            }
        });
        storm.extend(rt.block_on(async {
            let mut tasks = Vec::new();
            for t in 0..2 {
                let (app, bodies) = (app.clone(), bodies.clone());
                tasks.push(tokio::spawn(async move {
                    let mut lat = Vec::with_capacity(bodies.len() / 2);
                    for body in bodies.iter().skip(t).step_by(2) {
                        let s = Instant::now();
                        let r = app.handle_webhook("main", Some(SECRET), body).await;
                        lat.push(s.elapsed());
                        assert_eq!(r.status, 200);
                    }
                    lat
                }));
            }
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        }));
        reader.abort();
        stalled_drops += stalled.dropped();
    }
    storm.sort();
    println!(
        "storm (1,000 updates + 340 re-deliveries, 20 rounds, subscribers attached, one stalled): ack p50 {:?}, p99 {:?}; stalled subscriber dropped {stalled_drops}",
        percentile(&storm, 0.50),
        percentile(&storm, 0.99)
    );
    assert!(
        stalled_drops > 0,
        "the stalled subscriber's drops are counted"
    );
}

fn bus() {
    // What the bus adds to one ack: an `accepted` event published (metrics counted, offered
    // to three subscribers: the journal, a cockpit that reads, one that never reads).
    let bus = clawless_core::events::Bus::default();
    let _journal = bus.subscribe("journal", 2_000);
    let _stalled = bus.subscribe("stalled", 16);
    let live = bus.subscribe("cockpit", 4_096);
    let events = 1_000_000u32;
    let started = Instant::now();
    for i in 0..events {
        bus.publish(
            u64::from(i),
            "main/123456789",
            clawless_core::events::Event::Accepted {
                connector: "main".into(),
                lane: "main:111111111".into(),
                ack_ms: 0,
            },
        );
        if i % 64 == 0 {
            live.drain();
        }
    }
    println!(
        "bus: one accepted event published to 3 subscribers: {:?}",
        started.elapsed() / events
    );
}

fn turn(rt: &tokio::runtime::Runtime) {
    // Whole turn, single task.
    let (app, http) = build_app();
    let turns = 3_000i64;
    let cpu = rt.block_on(async {
        let started = Instant::now();
        for i in 0..turns {
            let body = fixtures::update("private_text", 500_000 + i).to_string();
            let r = app
                .handle_webhook("main", Some(SECRET), body.as_bytes())
                .await;
            app.drain(&r.lane.unwrap()).await.unwrap();
        }
        started.elapsed()
    });
    // Every turn was answered: a failing turn is not timed as one.
    let answers = http
        .requests()
        .iter()
        .filter(|r| r.url.ends_with("/sendMessage"))
        .count();
    assert_eq!(answers, turns as usize, "every turn answered once");
    println!(
        "core per update, whole turn (ack + drain + model + send, in-memory ports): {:?}",
        cpu / turns as u32
    );
}

fn binary() {
    // Binary size and idle RSS.
    let bin = env!("CARGO_BIN_EXE_clawless");
    let size = std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0);
    println!("binary {bin}: {:.2} MB", size as f64 / 1_048_576.0);
    match idle_rss(bin) {
        Some(kb) => println!(
            "idle RSS (serve, after start): {:.1} MB",
            kb as f64 / 1024.0
        ),
        None => println!("idle RSS: could not be measured"),
    }
}

/// Starts `clawless serve`, waits for /healthz, then reads VmRSS.
fn idle_rss(bin: &str) -> Option<u64> {
    let data = std::env::temp_dir().join(format!("clawless-bench-{}", std::process::id()));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let mut child = std::process::Command::new(bin)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("TELEGRAM_BOT_TOKEN", "1:BENCH")
        .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("CLAWLESS_DATA", &data)
        .env(
            "CLAWLESS_CONFIG",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"),
        )
        .env("RUST_LOG", "error")
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut ok = false;
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss = ok
        .then(|| std::fs::read_to_string(format!("/proc/{}/status", child.id())).ok())
        .flatten()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        });
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&data);
    rss
}
