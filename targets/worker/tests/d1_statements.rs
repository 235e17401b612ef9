//! What the Worker's ack costs, counted: a webhook update sends exactly two D1 statements (the
//! conditional inbox write, then the dedupe read) before the response; the drain runs after it.
//! The test build (feature `test-routes`) counts the statements the D1 adapter sends and
//! reports those of each ack in `x-clawless-d1-statements`.
//!
//! Needs `CLAWLESS_NODE`, `CLAWLESS_NODE_MODULES` and `CLAWLESS_WORKER_TEST_BUILD` (see
//! `.ci/run`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::miniflare::{bot_vars, Miniflare, SECRET};
use clawless_testkit::servers::{fakes, text_update, until};
use serde_json::Value;

/// Posts `update` and returns the D1 statements its ack sent.
async fn ack_statements(mf: &Miniflare, update: &Value) -> usize {
    let r = reqwest::Client::new()
        .post(format!("{}/telegram/main", mf.url))
        .header("content-type", "application/json")
        .header("x-telegram-bot-api-secret-token", SECRET)
        .body(update.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let count = r.headers()["x-clawless-d1-statements"].to_str().unwrap();
    count.parse().unwrap()
}

/// Waits until no lane has a job or a lease left (the drain after an ack is over).
async fn drained(mf: &Miniflare) {
    for _ in 0..200 {
        let rows = mf
            .control(
                "sql",
                "SELECT key FROM kv WHERE key LIKE 'inbox/%' OR key LIKE 'lease/%'",
            )
            .await;
        if rows.as_array().is_some_and(Vec::is_empty) {
            // The drainer's last look at the inbox comes after its release.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the lane was not drained");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_ack_sends_two_d1_statements() {
    let (f, tg, llm) = fakes().await;
    let mf = Miniflare::start("CLAWLESS_WORKER_TEST_BUILD", bot_vars(&tg, &llm), false);
    // The first update of a fresh isolate (its schema check is start-up, not the ack), then
    // one on the warm isolate once the first is answered and its drain is over.
    for (id, n) in [(1, 1), (2, 2)] {
        assert_eq!(
            ack_statements(&mf, &text_update(id, "count me")).await,
            2,
            "update {id}: the conditional inbox write and the dedupe read, nothing more"
        );
        until("the answer", || f.sent_to(OWNER_ID).len() == n).await;
        drained(&mf).await;
    }
}
