//! Storage calls within the invocation's allowance: on a Worker every Kv, Files, Vectors and
//! TextIndex call is a D1 query, and Cloudflare's free plan allows 50 a invocation (see
//! `core/src/allowance.rs`). The app counts them as it counts outbound requests; a drain whose
//! `Limits::storage` would be passed by the next step hands the lane on instead, and the next
//! invocation goes on from the kept step. A plain text turn's figures are printed here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clawless_core::allowance::Limits;
use clawless_core::{Config, Drained, Lane};
use clawless_platform::kv::tap::{Tapped, Verdict};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::json;
use support::{Harness, Wire};

/// The free plan's D1 queries per invocation.
const FREE_D1_QUERIES: u64 = 50;

/// A harness whose Kv calls the test counts itself, apart from the app's own count.
fn counting_harness() -> (Harness, Arc<AtomicU64>) {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let kv_calls = Arc::new(AtomicU64::new(0));
    let calls = kv_calls.clone();
    let h = Harness::with_ports(Wire::Anthropic, config, move |platform, _, _| {
        platform.kv = Arc::new(Tapped::new(platform.kv.clone(), move |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            Verdict::Run
        }));
    });
    (h, kv_calls)
}

/// What one invocation did: how it ended, the Kv calls the test counted, the storage calls
/// and the requests the app counted.
#[derive(Debug)]
struct Invocation {
    ended: Drained,
    kv: u64,
    storage: u64,
    requests: u64,
}

/// Drains `lane` invocation by invocation, each within `limits`, until it is not handed on.
async fn invocations(h: &Harness, kv: &AtomicU64, lane: &Lane, limits: Limits) -> Vec<Invocation> {
    let mut done = Vec::new();
    loop {
        let before = (
            kv.load(Ordering::Relaxed),
            h.app.storage_calls(),
            h.app.outbound_requests(),
        );
        let ended = h
            .app
            .drain_within(lane, Duration::from_secs(15), limits)
            .await
            .unwrap();
        done.push(Invocation {
            ended,
            kv: kv.load(Ordering::Relaxed) - before.0,
            storage: h.app.storage_calls() - before.1,
            requests: h.app.outbound_requests() - before.2,
        });
        if ended != Drained::HandOff {
            return done;
        }
        assert!(done.len() < 12, "handed on forever: {done:?}");
    }
}

/// Scripts `rounds` model answers each asking for the time at a new offset, then the answer.
fn rounds(h: &Harness, rounds: usize) {
    for i in 0..rounds {
        let input = json!({"utc_offset": format!("+{i:02}:00")});
        h.script(
            200,
            anthropic_tool_use(&format!("toolu_{i}"), "current_time", input),
        );
    }
    h.script(200, anthropic_text("Those are the times."));
}

#[test]
fn a_plain_text_turn_fits_the_free_plans_storage_calls() {
    block_on(async {
        let (h, kv) = counting_harness();
        h.script(200, anthropic_text("Hello!"));
        let (acked, kv_before) = (h.app.storage_calls(), kv.load(Ordering::Relaxed));
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let ack = h.app.storage_calls() - acked;
        let ack_kv = kv.load(Ordering::Relaxed) - kv_before;
        let limits = Limits {
            wall: Some(Duration::from_secs(30)),
            requests: Some(50),
            storage: Some(FREE_D1_QUERIES - ack),
        };
        let done = invocations(&h, &kv, &lane, limits).await;
        println!("a plain text turn: ack {ack} storage calls ({ack_kv} Kv), drain {done:?}");
        assert_eq!(done.len(), 1, "one invocation: {done:?}");
        assert_eq!(done[0].ended, Drained::Idle);
        assert!(ack + done[0].storage <= FREE_D1_QUERIES, "{done:?}");
        assert!(done[0].requests <= 50, "{done:?}");
        // Every storage call the test saw is one the app counted (the app counts Files,
        // Vectors and TextIndex calls too).
        assert!(done[0].kv <= done[0].storage && done[0].kv > 0, "{done:?}");
        assert_eq!(h.sent_texts(), ["Hello!"]);
    });
}

#[test]
fn a_long_turn_is_handed_on_before_its_storage_calls_pass_the_limit() {
    block_on(async {
        let (h, kv) = counting_harness();
        rounds(&h, 7);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let limits = Limits {
            wall: None,
            requests: None,
            storage: Some(FREE_D1_QUERIES),
        };
        let done = invocations(&h, &kv, &lane, limits).await;
        println!("seven tool rounds: {done:?}");
        assert!(
            done.len() >= 2,
            "fifty storage calls do not hold it: {done:?}"
        );
        for i in &done {
            assert!(i.storage <= FREE_D1_QUERIES, "{done:?}");
            assert!(i.kv <= FREE_D1_QUERIES, "{done:?}");
        }
        assert_eq!(h.llm_requests().len(), 8, "no model call made twice");
        assert_eq!(h.sent_texts(), ["Those are the times."], "answered once");
    });
}

#[test]
fn without_a_storage_limit_the_same_turn_runs_through() {
    block_on(async {
        let (h, kv) = counting_harness();
        rounds(&h, 7);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let done = invocations(&h, &kv, &lane, Limits::default()).await;
        println!("seven tool rounds, no limit: {done:?}");
        assert_eq!(done.len(), 1);
        assert!(
            done[0].storage > FREE_D1_QUERIES,
            "the limit above is met: {done:?}"
        );
        assert_eq!(h.sent_texts(), ["Those are the times."]);
    });
}
