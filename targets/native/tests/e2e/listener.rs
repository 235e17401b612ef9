//! The listener's defences. Each test here hangs on a server that reads before it checks, has
//! no timeouts, no connection cap or no shutdown deadline; the bounded waits turn that into a
//! failure.

use std::time::{Duration, Instant};

use clawless_core::shell::MAX_UPDATE_BYTES;
use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update, until};

use super::common;
use super::common::bot::{exited_within, sigterm, start_bot, start_bot_with, Bot, Serve, SECRET};
use super::common::raw::{webhook_head, Raw};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_before_the_body_is_read() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-secret-first");
    let bot = start_bot(&data, &tg, &llm_url).await;
    for secret in [Some("wrong"), None] {
        // 2 MB declared, not one byte of it sent.
        let mut raw = Raw::connect(&bot.url).await;
        raw.send(webhook_head(secret, 2 * 1024 * 1024).as_bytes())
            .await;
        let seen = raw.read_until_closed(Duration::from_secs(3)).await;
        assert_eq!(seen.status(), Some(401), "{seen:?}");
        assert!(seen.says_close(), "{seen:?}");
        assert!(seen.closed.is_some(), "the server closes it: {seen:?}");
    }
    // An unknown connector is refused the same way.
    let mut raw = Raw::connect(&bot.url).await;
    let head = webhook_head(Some(SECRET), 1000).replace("/telegram/main", "/telegram/nobody");
    raw.send(head.as_bytes()).await;
    let seen = raw.read_until_closed(Duration::from_secs(3)).await;
    assert_eq!(seen.status(), Some(404), "{seen:?}");
    assert!(seen.says_close() && seen.closed.is_some(), "{seen:?}");
    // Nothing reached Telegram but the command menu the bot sets at start.
    let calls = f.calls.lock().unwrap();
    assert!(calls.iter().all(|(m, _)| m == "setMyCommands"), "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_cap_is_413_without_reading_it() {
    let (_f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-cap");
    let bot = start_bot(&data, &tg, &llm_url).await;
    let mut raw = Raw::connect(&bot.url).await;
    raw.send(webhook_head(Some(SECRET), MAX_UPDATE_BYTES + 1).as_bytes())
        .await;
    let seen = raw.read_until_closed(Duration::from_secs(3)).await;
    assert_eq!(seen.status(), Some(413), "{seen:?}");
    assert!(seen.says_close() && seen.closed.is_some(), "{seen:?}");
    // A body at the cap is still read (and, not being an update, acknowledged).
    let status = reqwest::Client::new()
        .post(format!("{}/telegram/main", bot.url))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .body(vec![b' '; MAX_UPDATE_BYTES])
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed_after_the_header_timeout() {
    let (_f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-idle");
    let how = Serve {
        env: &[("CLAWLESS_HEADER_TIMEOUT", "0.5")],
        ..Serve::default()
    };
    let bot = start_bot_with(&data, &tg, &llm_url, how).await;
    // Silent from the start.
    let mut silent = Raw::connect(&bot.url).await;
    // A head that never ends.
    let mut slow = Raw::connect(&bot.url).await;
    slow.send(b"POST /telegram/main HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await;
    // Idle after a kept-alive response.
    let mut kept = Raw::connect(&bot.url).await;
    kept.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await;
    let head = kept.read_head(Duration::from_secs(3)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    for (what, raw) in [
        ("silent", &mut silent),
        ("slow head", &mut slow),
        ("kept alive", &mut kept),
    ] {
        let seen = raw.read_until_closed(Duration::from_secs(5)).await;
        assert!(seen.closed.is_some(), "{what} connection left open");
    }
    assert!(still_serves(&bot).await);
}

async fn still_serves(bot: &Bot) -> bool {
    let r = reqwest::get(format!("{}/healthz", bot.url)).await;
    r.is_ok_and(|r| r.status() == 200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_within_the_deadline_with_half_sent_requests_open() {
    let (_f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-term-deadline");
    let how = Serve {
        env: &[
            ("CLAWLESS_SHUTDOWN_DEADLINE", "1"),
            ("CLAWLESS_HEADER_TIMEOUT", "60"),
            ("CLAWLESS_BODY_TIMEOUT", "60"),
        ],
        ..Serve::default()
    };
    let mut bot = start_bot_with(&data, &tg, &llm_url, how).await;
    // Signed, inside the handler, its body a tenth sent.
    let mut signed = Raw::connect(&bot.url).await;
    signed
        .send(format!("{}{{\"update_id\":", webhook_head(Some(SECRET), 1000)).as_bytes())
        .await;
    // Unsigned, its body a tenth sent.
    let mut unsigned = Raw::connect(&bot.url).await;
    unsigned
        .send(format!("{}{{\"update_id\":", webhook_head(None, 1000)).as_bytes())
        .await;
    // Half a head.
    let mut half = Raw::connect(&bot.url).await;
    half.send(b"POST /telegram/main HTTP/1.1\r\n").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let signalled = Instant::now();
    sigterm(&bot);
    let exit = exited_within(&mut bot, Duration::from_secs(5)).await;
    let exit =
        exit.unwrap_or_else(|| panic!("still running {:?} after SIGTERM", signalled.elapsed()));
    assert!(exit.success(), "{exit:?}");
    for raw in [&mut signed, &mut unsigned, &mut half] {
        assert!(raw
            .read_until_closed(Duration::from_secs(1))
            .await
            .closed
            .is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_idle_sockets_do_not_keep_an_update_out() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("e2e-conn-cap");
    // 128 descriptors, as a small box might allow, and 16 connections: 200 idle sockets would
    // exhaust the descriptors of a server without a cap.
    let how = Serve {
        env: &[
            ("CLAWLESS_MAX_CONNECTIONS", "16"),
            ("CLAWLESS_HEADER_TIMEOUT", "60"),
        ],
        nofile: Some(128),
    };
    let bot = start_bot_with(&data, &tg, &llm_url, how).await;
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(Raw::connect(&bot.url).await);
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let status = client
        .post(format!("{}/telegram/main", bot.url))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .body(text_update(60, "through the crowd").to_string())
        .send()
        .await
        .expect("the update is acknowledged")
        .status();
    assert_eq!(status, 200);
    until("the answer", || f.sent_to(OWNER_ID).len() == 1).await;
    // The server closed the oldest idle sockets to stay at its cap.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let open = idle.iter().filter(|r| !r.is_closed()).count();
    assert!(open <= 16, "{open} idle connections still open");
    assert!(
        idle[0].is_closed(),
        "the oldest idle connection was evicted"
    );
}
