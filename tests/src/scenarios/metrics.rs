//! `/metrics` on a running shell: what a small scenario did is counted, read before and
//! after with a Prometheus text-format parser (`prometheus-parse`).

use std::future::Future;
use std::time::{Duration, Instant};

use prometheus_parse::{Scrape, Value};

use super::{Shell, BYSTANDER};
use crate::servers::text_update_from;

/// The sum of `metric`'s samples that carry every label of `labels`.
pub fn sample(body: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .unwrap_or_else(|e| panic!("not Prometheus text ({e}):\n{body}"));
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            _ => 0.0,
        })
        .sum()
}

/// A metric, the labels its samples must carry, by how much it must grow, and whether by
/// exactly that.
type Counted = (
    &'static str,
    &'static [(&'static str, &'static str)],
    f64,
    bool,
);

/// Two questions and a re-delivery of the second, in the bystander's private chat: `/metrics`
/// (read by `scrape`) then counts exactly 2 more updates accepted and 1 more dropped as a
/// duplicate, and at least 2 more model calls, answers sent and turns answered (what the
/// shell's own background work, reminders of earlier scenarios among it, adds meanwhile
/// counts there too).
pub async fn metrics_count_a_scenario<F, Fut>(shell: &dyn Shell, scrape: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = String>,
{
    let counted: [Counted; 5] = [
        ("clawless_updates_accepted_total", &[], 2.0, true),
        (
            "clawless_updates_dropped_total",
            &[("reason", "duplicate")],
            1.0,
            true,
        ),
        (
            "clawless_model_calls_total",
            &[("outcome", "ok")],
            2.0,
            false,
        ),
        ("clawless_replies_sent_total", &[], 2.0, false),
        (
            "clawless_turns_total",
            &[("outcome", "answered")],
            2.0,
            false,
        ),
    ];
    let before = scrape().await;
    let f = shell.fakes();
    let had = f.sent_to(BYSTANDER).len();
    let secret = Some(shell.secret());
    let first = text_update_from(BYSTANDER, 990_001, "metrics one").to_string();
    assert_eq!(shell.post(first, secret).await, 200);
    crate::servers::until("the first answer", || f.sent_to(BYSTANDER).len() > had).await;
    let second = text_update_from(BYSTANDER, 990_002, "metrics two").to_string();
    assert_eq!(shell.post(second.clone(), secret).await, 200);
    assert_eq!(
        shell.post(second, secret).await,
        200,
        "a re-delivery is acked"
    );
    crate::servers::until("the second answer", || f.sent_to(BYSTANDER).len() > had + 1).await;
    // The turn ends (and is counted) just after its answer is out.
    let started = Instant::now();
    loop {
        let after = scrape().await;
        let deltas: Vec<(&str, f64, f64)> = counted
            .iter()
            .map(|(m, l, want, _)| (*m, sample(&after, m, l) - sample(&before, m, l), *want))
            .collect();
        let met = deltas
            .iter()
            .zip(&counted)
            .all(|((_, got, want), (.., exact))| match exact {
                true => got == want,
                false => got >= want,
            });
        if met {
            return;
        }
        if started.elapsed() > Duration::from_secs(15) {
            panic!(
                "{}: /metrics counted (metric, got, wanted) {deltas:?}",
                shell.name()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The events kept for `/admin/events` hold the turn traced `trace` from its acceptance to
/// its end, answered. `fetch` answers one page of `/admin/events` for a cursor (none at
/// first); the pages are followed until one comes back empty.
pub async fn assert_turn_kept<F, Fut>(fetch: F, trace: &str)
where
    F: Fn(Option<String>) -> Fut,
    Fut: std::future::Future<Output = serde_json::Value>,
{
    let mut kinds: Vec<String> = Vec::new();
    let mut cursor = None;
    for _ in 0..200 {
        let page = fetch(cursor.take()).await;
        let events = page["events"].as_array().cloned().unwrap_or_default();
        kinds.extend(
            events
                .iter()
                .filter(|e| e["trace"] == trace)
                .filter_map(|e| e["type"].as_str().map(str::to_owned)),
        );
        let next = page["cursor"].as_str().unwrap_or_default();
        assert!(!next.is_empty(), "a page without a cursor: {page}");
        if events.is_empty() {
            break;
        }
        cursor = Some(next.to_owned());
    }
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("accepted"),
        "{trace}: {kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "model"), "{trace}: {kinds:?}");
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("turn_ended"),
        "{trace}: {kinds:?}"
    );
}
