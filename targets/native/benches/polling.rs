//! `cargo bench -p native --bench polling`: long polling on the release binary against a fake
//! Bot API whose `getUpdates` answers as soon as an update arrives (as Telegram's long poll
//! does) and an instant fake model.
//!
//! Prints the idle RSS of the polling process after start, then for 30 private messages sent
//! one after another in one chat (each once the reply to the one before has arrived) the time
//! from handing the update to `getUpdates` to the reply's `sendMessage` reaching the fake:
//! median, p90 and max, and each in order; then the first 20 split at the fakes (handed out,
//! the model asked, sendMessage). Goal (issue 28): median ≤ 5 ms, idle RSS ≤ 10 MB.
//! The chat's outbound allowance (a burst of 20, then one a second) paces the replies past the
//! twentieth: the bench shows it. `CLAWLESS_BENCH_BIN=<path>` runs it against another build.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update};

const MESSAGES: i64 = 30;

fn rss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

async fn run() {
    let (f, tg, llm) = fakes().await;
    let data = std::env::temp_dir().join(format!("clawless-poll-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let bin = std::env::var("CLAWLESS_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_clawless").into());
    let mut child = Command::new(bin)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TELEGRAM_BOT_TOKEN", "1:BENCH")
        .env("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string())
        .env("TELEGRAM_API_BASE", &tg)
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("ANTHROPIC_BASE_URL", &llm)
        .env("CLAWLESS_DATA", &data)
        .env(
            "CLAWLESS_CONFIG",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"),
        )
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let polls = || {
        f.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == "getUpdates")
            .count()
    };
    let started = Instant::now();
    while polls() < 2 {
        assert!(started.elapsed() < Duration::from_secs(20), "never polled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = rss_kb(child.id());

    let mut lat = Vec::new();
    // Each reply's time split at the fakes: pushed -> handed out by getUpdates -> the model
    // asked -> sendMessage.
    let mut stages: Vec<[Duration; 3]> = Vec::new();
    for i in 0..MESSAGES {
        let want = format!("You said: hello {i}");
        let before = f.sent_to(OWNER_ID).len();
        let t = Instant::now();
        f.push_update(text_update(1000 + i, &format!("hello {i}")));
        loop {
            let sent = f.sent_to(OWNER_ID);
            // The fake model echoes what it is given: once the conversation is compacted
            // (past 20 turns) its facts are recalled into the prompt, and echoed after the text.
            if sent.len() > before && sent[before..].iter().any(|s| s.starts_with(&want)) {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "no reply to {i}");
            let _ = tokio::time::timeout(Duration::from_millis(50), f.sent_added.notified()).await;
        }
        lat.push(t.elapsed());
        let marks: Vec<(String, std::time::Instant)> = f
            .timeline
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, at)| *at >= t)
            .cloned()
            .collect();
        let first = |what: &str| marks.iter().find(|(m, _)| m == what).map(|(_, at)| *at);
        if let (Some(out), Some(model), Some(sent)) =
            (first("getUpdates"), first("model"), first("sendMessage"))
        {
            stages.push([out - t, model - out, sent - model]);
        }
    }
    let rss_after = rss_kb(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&data);
    println!(
        "each, in order (ms): {:?}",
        lat.iter()
            .map(|d| (d.as_secs_f64() * 1e4).round() / 10.0)
            .collect::<Vec<_>>()
    );
    lat.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let first20: Vec<[Duration; 3]> = stages.iter().take(20).copied().collect();
    let median = |k: usize| {
        let mut v: Vec<Duration> = first20.iter().map(|s| s[k]).collect();
        v.sort();
        v.get(v.len() / 2).map(|d| ms(*d)).unwrap_or(f64::NAN)
    };
    println!(
        "the first 20 split, medians: pushed -> handed out by getUpdates {:.2} ms, -> the model asked {:.2} ms, -> sendMessage {:.2} ms",
        median(0),
        median(1),
        median(2)
    );
    println!(
        "long polling, release binary: idle RSS after start {:.1} MB ({:.1} MB after the messages); {MESSAGES} messages one after another in one chat, update handed out -> reply sent: median {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        idle.unwrap_or(0) as f64 / 1024.0,
        rss_after.unwrap_or(0) as f64 / 1024.0,
        ms(lat[lat.len() / 2]),
        ms(lat[lat.len() * 9 / 10]),
        ms(lat[lat.len() - 1]),
    );
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
