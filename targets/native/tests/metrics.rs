//! `/metrics` across restarts on the real binary: after SIGTERM the next run goes on from the
//! counts the last one had (kept at shutdown, taken over at start), and after `kill -9` no
//! counter falls below what a scrape showed, nor counts the past again — what Prometheus'
//! `rate()` needs to trust a counter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update, until};
use common::bot::{exited_within, post_update, sigterm, start_bot_with, Bot, Serve, SECRET};

const ADMIN: &str = "native-metrics-admin-0123456789";

/// The sum of `clawless_updates_accepted_total` over its series.
async fn accepted(bot: &Bot) -> f64 {
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", bot.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("clawless_updates_accepted_total{")
                || l.starts_with("clawless_updates_accepted_total ")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Sends message `n` and waits for its reply (the `n`th the owner gets).
async fn talk(f: &clawless_testkit::servers::Fakes, bot: &Bot, n: i64) {
    let update = text_update(n, &format!("message {n}"));
    assert_eq!(post_update(bot, &update, Some(SECRET)).await, 200);
    until("the reply", || f.sent_to(OWNER_ID).len() == n as usize).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_go_on_across_sigterm_and_kill_9() {
    let (f, tg, llm) = fakes().await;
    let data = common::temp_dir("metrics-restart");
    let how = || Serve {
        env: &[("CLAWLESS_ADMIN_TOKEN", ADMIN)],
        ..Serve::default()
    };
    let mut bot = start_bot_with(&data, &tg, &llm, how()).await;
    for n in 1..=3 {
        talk(&f, &bot, n).await;
    }
    assert_eq!(accepted(&bot).await, 3.0);
    // Two more, never scraped, then a graceful stop: kept at shutdown.
    for n in 4..=5 {
        talk(&f, &bot, n).await;
    }
    sigterm(&bot);
    assert!(exited_within(&mut bot, Duration::from_secs(30))
        .await
        .is_some());
    drop(bot);
    let mut bot = start_bot_with(&data, &tg, &llm, how()).await;
    assert_eq!(accepted(&bot).await, 5.0, "the next run goes on from 5");
    talk(&f, &bot, 6).await;
    assert_eq!(accepted(&bot).await, 6.0);
    // Killed: what the last scrape showed is kept, nothing is counted twice.
    bot.child.kill().unwrap();
    bot.child.wait().unwrap();
    drop(bot);
    let bot = start_bot_with(&data, &tg, &llm, how()).await;
    assert_eq!(
        accepted(&bot).await,
        6.0,
        "after kill -9: neither fallen nor counted again"
    );
    talk(&f, &bot, 7).await;
    assert_eq!(accepted(&bot).await, 7.0);
}
