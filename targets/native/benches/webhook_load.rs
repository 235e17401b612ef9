//! `cargo bench -p native --bench webhook_load`: the webhook listener under a connection flood.
//!
//! Starts the release `clawless serve` (default limits, 1024 descriptors, as on a small box)
//! with the fake Bot API and model servers, all on 127.0.0.1. Then, without the secret, opens
//! 2,000 idle connections and 400 uploads that declare 2 MB, send 1 MB and stall, while
//! signed updates are posted on fresh connections every 50 ms. Prints the legitimate acks'
//! latency (goal: within 100 ms), the server's peak RSS (goal: under 64 MB, VmHWM) and its
//! open descriptors. Bounded: every wait has a limit and the whole run takes a few seconds.
//! `CLAWLESS_BENCH_BIN=<path>` runs the same flood against another build of `clawless`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const SECRET: &str = "load-secret";
const IDLE: usize = 2_000;
const SLOW: usize = 400;
/// Bounds on the flood: each connect, and all of it.
const CONNECT_LIMIT: Duration = Duration::from_millis(500);
const FLOOD_LIMIT: Duration = Duration::from_secs(15);
/// The client's own sockets: the flood, the posts, the fakes' connections.
const CLIENT_NOFILE: u64 = 4_096;
/// The server's descriptor limit: the common default, the one the flood used to exhaust.
const SERVER_NOFILE: u64 = 1_024;

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    raise_own_nofile();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    let (f, tg, llm) = fakes().await;
    let data = std::env::temp_dir().join(format!("clawless-load-{}", std::process::id()));
    let server = start(&data, &tg, &llm).await;
    let pid = server.child.id();
    println!(
        "server: {} (pid {pid}), open files limit {}",
        binary(),
        nofile_of(pid).unwrap_or_default()
    );

    let quiet = post_updates(&server.url, 1, 20, None).await;
    report("ack latency, no flood", &quiet);

    let flooding = Arc::new(AtomicBool::new(true));
    let flood = tokio::spawn(flood(server.url.clone(), flooding.clone()));
    let under_flood = post_updates(&server.url, 1_000, 40, Some(flooding.clone())).await;
    let (idle, slow) = flood.await.unwrap();
    report("ack latency, during the flood", &under_flood);
    let fds = open_fds(pid);
    let still_open = idle.iter().filter(|s| is_open(s)).count();
    println!(
        "flood: {} connections, {slow} of them stalled 2 MB uploads, none with the secret; \
         still open at the end: {still_open}; server descriptors: {}",
        idle.len(),
        fds.map_or("?".into(), |n| n.to_string())
    );
    let acked = quiet
        .iter()
        .chain(&under_flood)
        .filter(|l| l.is_some())
        .count();
    let deadline = Instant::now() + Duration::from_secs(20);
    while f.sent_to(OWNER_ID).len() < acked && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "answered: {} of {acked} acknowledged updates",
        f.sent_to(OWNER_ID).len()
    );
    match peak_rss_kb(pid) {
        Some(kb) => println!("server peak RSS (VmHWM): {:.1} MB", kb as f64 / 1024.0),
        None => println!("server peak RSS: could not be read"),
    }
    drop(idle);
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}

/// Opens the idle sockets and the stalled uploads, then stops the posting loop. Returns the
/// sockets, still held, and how many uploads sent their head.
async fn flood(url: String, flooding: Arc<AtomicBool>) -> (Vec<TcpStream>, usize) {
    let addr = url.trim_start_matches("http://").to_owned();
    let head = format!(
        "POST /telegram/main HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        2 * 1024 * 1024
    );
    let half = vec![b' '; 1024 * 1024];
    let mut idle = Vec::with_capacity(IDLE + SLOW);
    let mut slow = 0;
    // A server that no longer accepts fills its backlog, and a connect then waits for SYN
    // retries: each connect and the whole flood are bounded.
    let deadline = Instant::now() + FLOOD_LIMIT;
    for i in 0..IDLE + SLOW {
        if Instant::now() >= deadline {
            break;
        }
        let connect = tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect(&addr));
        let Ok(Ok(mut s)) = connect.await else {
            continue;
        };
        // Every sixth connection is an upload, spread through the flood.
        if i % 6 == 5 && slow < SLOW {
            let sent = tokio::time::timeout(CONNECT_LIMIT, s.write_all(head.as_bytes())).await;
            if matches!(sent, Ok(Ok(()))) {
                slow += 1;
            }
            // Half the body; a server that refused at the head has closed already.
            let _ = tokio::time::timeout(CONNECT_LIMIT, s.write_all(&half)).await;
        }
        idle.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    flooding.store(false, Ordering::SeqCst);
    (idle, slow)
}

/// Posts signed updates on fresh connections, one every 50 ms: `count` of them, or while
/// `until` holds. `None` marks a post not acknowledged within 5 s.
async fn post_updates(
    url: &str,
    first_id: i64,
    count: usize,
    until: Option<Arc<AtomicBool>>,
) -> Vec<Option<Duration>> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut lat = Vec::new();
    for i in 0.. {
        let more = match &until {
            Some(flag) => flag.load(Ordering::SeqCst) || i < 3,
            None => i < count,
        };
        if !more {
            break;
        }
        let body = text_update(first_id + i as i64, "hello under load").to_string();
        let started = Instant::now();
        let sent = client
            .post(format!("{url}/telegram/main"))
            .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
            .body(body)
            .send()
            .await;
        lat.push(
            sent.ok()
                .filter(|r| r.status() == 200)
                .map(|_| started.elapsed()),
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lat
}

fn report(what: &str, lat: &[Option<Duration>]) {
    let mut ok: Vec<Duration> = lat.iter().flatten().copied().collect();
    ok.sort();
    let missed = lat.len() - ok.len();
    match (ok.get(ok.len() / 2), ok.last()) {
        (Some(p50), Some(max)) => println!(
            "{what}: {} posts, p50 {:.2} ms, max {:.2} ms, {missed} not acknowledged within 5 s",
            lat.len(),
            p50.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        ),
        _ => println!("{what}: none of {} posts acknowledged", lat.len()),
    }
}

/// `clawless serve` under `ulimit -n SERVER_NOFILE`, with the default limits.
async fn start(data: &std::path::Path, tg: &str, llm: &str) -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    // `exec` keeps the pid, so /proc/<pid> is clawless itself.
    let child = Command::new("sh")
        .args([
            "-c",
            &format!("ulimit -n {SERVER_NOFILE} && exec \"$0\" \"$@\""),
            &binary(),
            "serve",
            "--listen",
            &listen,
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TELEGRAM_BOT_TOKEN", "1:LOAD")
        .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .env("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string())
        .env("TELEGRAM_API_BASE", tg)
        .env("ANTHROPIC_API_KEY", "sk-load")
        .env("ANTHROPIC_BASE_URL", llm)
        .env("CLAWLESS_DATA", data)
        .env(
            "CLAWLESS_CONFIG",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"),
        )
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        url: format!("http://{listen}"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(r) = reqwest::get(format!("{}/healthz", server.url)).await {
            if r.status() == 200 {
                return server;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not become healthy");
}

/// The `clawless` under test: this build's, or `CLAWLESS_BENCH_BIN`.
fn binary() -> String {
    std::env::var("CLAWLESS_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_clawless").into())
}

/// Raises this process's soft descriptor limit to `CLIENT_NOFILE` (within the hard limit)
/// with util-linux `prlimit`, when it is lower.
fn raise_own_nofile() {
    let pid = std::process::id();
    let Some((soft, hard)) = nofile_of(pid).and_then(|l| {
        let mut it = l.split('/').map(|n| n.parse::<u64>().unwrap_or(u64::MAX));
        Some((it.next()?, it.next()?))
    }) else {
        return;
    };
    if soft >= CLIENT_NOFILE {
        return;
    }
    let target = CLIENT_NOFILE.min(hard);
    let ok = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={target}:")])
        .status()
        .is_ok_and(|s| s.success());
    println!("open files limit of the bench raised {soft} → {target}: {ok}");
}

/// "soft/hard" open files limit of a process, from /proc/<pid>/limits.
fn nofile_of(pid: u32) -> Option<String> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut fields = line.split_whitespace().skip(3);
    Some(format!("{}/{}", fields.next()?, fields.next()?))
}

fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether the server still holds this socket open: reads what it sent (a 401) until the
/// socket would block (open) or reports EOF or a reset (closed).
fn is_open(s: &TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.try_read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
}
