//! `cargo bench -p native --bench index`: webhook acks while a 10 MB memory file is indexed on
//! the native store (libsql on disk, the real `clawless.db` and `index.db`).
//!
//! On a 2-worker runtime, as `clawless serve` runs: one task indexes the file
//! (`MemoryStore::index_file`, local embedder) in three scopes one after the other, another
//! acks a webhook update every millisecond (`App::handle_webhook`: a Kv read and a
//! put-if-absent). Printed: the ack p50/p99/max with nothing else running (the machine's own
//! noise), then while the indexing runs, how long each indexing took and the longest single
//! poll of the indexing task (how long it held an executor thread at once), and the re-index
//! after a one-line append.
//!
//! Run twice: with the index in its own file on its own thread (what `setup` builds), and, for
//! comparison, the same code with the index on the Kv's thread and file (the old layout).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use clawless_core::memory::store::root;
use clawless_core::{App, Config, Env};
use clawless_native::fs::FsFiles;
use clawless_native::index::schema;
use clawless_native::setup;
use clawless_native::store::{Db, SqlKv, SqlText, SqlVectors, KV_SCHEMA};
use clawless_platform::native_io::{ReqwestHttp, SystemClock};
use clawless_platform::Platform;
use clawless_testkit::fixtures;

const SECRET: &str = "bench-secret";
const FILE_BYTES: usize = 10 * 1024 * 1024;
const ACK_EVERY: Duration = Duration::from_millis(1);
/// The 10 MB file is indexed in this many scopes in turn, for more acks to measure.
const SCOPES: [&str; 3] = ["assistant/main", "assistant/main/u1", "assistant/main/u2"];

fn env(data: &Path) -> Env {
    Env::from_pairs([
        ("TELEGRAM_BOT_TOKEN", "1:BENCH"),
        ("TELEGRAM_WEBHOOK_SECRET", SECRET),
        ("TELEGRAM_ALLOWED_USERS", &fixtures::OWNER_ID.to_string()),
        ("ANTHROPIC_API_KEY", "sk-bench"),
        ("CLAWLESS_DATA", &data.to_string_lossy()),
    ])
}

/// The embedded config, with a size cap that lets the whole 10 MB file be indexed.
fn config() -> Config {
    let mut c = Config::load(&clawless_core::config::embedded()).unwrap();
    c.memory.max_file_kb = 16 * 1024;
    c
}

/// About `bytes` of Markdown notes: a heading every 20 lines, lines of words drawn from a
/// 3,000-word vocabulary (deterministic).
fn memory_file(bytes: usize) -> String {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut out = String::with_capacity(bytes + 200);
    let mut line = 0usize;
    while out.len() < bytes {
        if line.is_multiple_of(20) {
            out.push_str(&format!("\n## Notes, part {}\n", line / 20));
        }
        out.push_str("- ");
        for _ in 0..12 {
            out.push_str(&format!("w{} ", next() % 3_000));
        }
        out.push_str("noted.\n");
        line += 1;
    }
    out
}

/// A future that records its longest poll.
struct Timed<F: Future> {
    inner: Pin<Box<F>>,
    longest: Duration,
}

impl<F: Future> Future for Timed<F> {
    type Output = (F::Output, Duration);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let r = self.inner.as_mut().poll(cx);
        self.longest = self.longest.max(started.elapsed());
        r.map(|out| (out, self.longest))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// The app on `data` with the memory index in its own `index.db` (what `setup` builds).
async fn split(data: &Path) -> Arc<App> {
    setup::build_with(&env(data), config(), "bench".into())
        .await
        .unwrap()
        .app
}

/// The app on `data` with the memory index in `clawless.db`, on the Kv's thread.
fn shared(data: &Path) -> Arc<App> {
    let statements: Vec<&str> = KV_SCHEMA.iter().copied().chain(schema()).collect();
    let db = Db::open(&data.join("clawless.db").to_string_lossy(), &statements).unwrap();
    let clock = Arc::new(SystemClock);
    let platform = Platform {
        kv: Arc::new(SqlKv::new(db.clone(), clock.clone())),
        files: Arc::new(FsFiles::new(data.join("files")).unwrap()),
        http: Arc::new(ReqwestHttp::new().unwrap()),
        vectors: Arc::new(SqlVectors::new(db.clone())),
        text: Arc::new(SqlText::new(db)),
        clock,
        exec: None,
    };
    Arc::new(App::new(platform, config(), &env(data), "bench").unwrap())
}

/// Acks one update every [`ACK_EVERY`] until `done`; the latencies.
async fn ack_until(app: Arc<App>, done: Arc<AtomicBool>, first_id: i64) -> Vec<Duration> {
    let mut lat = Vec::new();
    let mut id = first_id;
    while !done.load(Ordering::SeqCst) {
        let body = fixtures::update("private_text", id).to_string();
        let s = Instant::now();
        let r = app
            .handle_webhook("main", Some(SECRET), body.as_bytes())
            .await;
        lat.push(s.elapsed());
        assert_eq!(r.status, 200);
        id += 1;
        tokio::time::sleep(ACK_EVERY).await;
    }
    lat
}

fn summary(mut lat: Vec<Duration>) -> String {
    lat.sort();
    format!(
        "{} acks, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        percentile(&lat, 0.50).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3,
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    )
}

/// Acks for `idle` with nothing else running; prints the figures.
async fn idle(label: &str, app: Arc<App>, idle: Duration, first_id: i64) {
    let done = Arc::new(AtomicBool::new(false));
    let acks = tokio::spawn(ack_until(app, done.clone(), first_id));
    tokio::time::sleep(idle).await;
    done.store(true, Ordering::SeqCst);
    println!(
        "{label}, nothing indexing: {}",
        summary(acks.await.unwrap())
    );
}

/// Indexes `MEMORY.md` of each of `scopes` in turn while acking; prints the figures.
async fn run(label: &str, app: Arc<App>, scopes: &[&'static str], first_id: i64) {
    let done = Arc::new(AtomicBool::new(false));
    let acks = tokio::spawn(ack_until(app.clone(), done.clone(), first_id));
    let indexer = {
        let (app, done) = (app.clone(), done.clone());
        let scopes = scopes.to_vec();
        tokio::spawn(async move {
            let mut took = Vec::new();
            for scope in scopes {
                let started = Instant::now();
                let path = format!("{}/MEMORY.md", root(&scope.into()));
                let (indexed, longest) = Timed {
                    inner: Box::pin(app.memory_store().index_file(&scope.into(), &path)),
                    longest: Duration::ZERO,
                }
                .await;
                assert!(indexed.unwrap());
                took.push(format!(
                    "{:.2} s (longest poll {:.1} ms)",
                    started.elapsed().as_secs_f64(),
                    longest.as_secs_f64() * 1e3
                ));
            }
            done.store(true, Ordering::SeqCst);
            took
        })
    };
    let took = indexer.await.unwrap();
    println!(
        "{label}: indexing took {}; meanwhile {}",
        took.join(", "),
        summary(acks.await.unwrap())
    );
}

/// A data directory holding `text` as `MEMORY.md` of every scope of [`SCOPES`].
fn temp_data(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clawless-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for scope in SCOPES {
        let memory = dir.join("files").join(root(&scope.into()));
        std::fs::create_dir_all(&memory).unwrap();
        std::fs::write(memory.join("MEMORY.md"), text).unwrap();
    }
    dir
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let text = memory_file(FILE_BYTES);
    println!(
        "memory file: {:.1} MB, {} lines",
        text.len() as f64 / 1_048_576.0,
        text.lines().count()
    );
    let started = Instant::now();
    let chunks = clawless_core::memory::chunk::chunk(&text, 400, 80).len();
    println!(
        "chunking it in one go: {:.1} ms, {chunks} chunks (indexing yields every 256)",
        started.elapsed().as_secs_f64() * 1e3
    );
    for (name, label) in [
        ("split", "index.db on its own thread (setup)"),
        (
            "shared",
            "index in clawless.db on the Kv thread (old layout)",
        ),
    ] {
        let data = temp_data(name, &text);
        rt.block_on(async {
            let app = if name == "split" {
                split(&data).await
            } else {
                shared(&data)
            };
            idle(label, app.clone(), Duration::from_secs(3), 1_000).await;
            run(
                &format!("{label}, whole file"),
                app.clone(),
                &SCOPES,
                100_000,
            )
            .await;
            let file = data
                .join("files")
                .join(root(&SCOPES[0].into()))
                .join("MEMORY.md");
            let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
            std::io::Write::write_all(&mut f, b"- The spare key is under the blue pot.\n").unwrap();
            run(
                &format!("{label}, after a one-line append"),
                app,
                &SCOPES[..1],
                1_000_000,
            )
            .await;
        });
        let size = |f: &str| {
            std::fs::metadata(data.join(f))
                .map(|m| m.len() as f64 / 1_048_576.0)
                .unwrap_or(0.0)
        };
        println!(
            "  files: clawless.db {:.1} MB, index.db {:.1} MB",
            size("clawless.db"),
            size("index.db")
        );
        let _ = std::fs::remove_dir_all(&data);
    }
}
