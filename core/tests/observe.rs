//! Seeing it work: the event bus and `/metrics` on the whole flow. The counters match what a
//! scenario did (updates accepted and dropped, model calls, tool calls, turns), the text is
//! read back with a Prometheus text-format parser, a storm of 1,000 updates with a stalled
//! subscriber loses nothing and counts the stalled one's drops, and a failed turn's events
//! carry its trace id.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::admin_http::AdminRequest;
use clawless_core::events::{Event, Stamped};
use clawless_core::{Config, Drained};
use clawless_platform::Clock;
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use prometheus_parse::{Scrape, Value as Sample};
use serde_json::json;
use support::{Harness, Wire};

const ADMIN: &str = "an-admin-token-of-some-length";

fn harness() -> Harness {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    Harness::with_env(Wire::Anthropic, config, &[("CLAWLESS_ADMIN_TOKEN", ADMIN)]).unwrap()
}

async fn scrape(h: &Harness, path_name: &str) -> Scrape {
    let reply = h
        .app
        .admin()
        .serve(AdminRequest {
            method: "GET",
            name: path_name,
            authorization: Some(&format!("Bearer {ADMIN}")),
            ..Default::default()
        })
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body_text());
    assert!(reply.content_type.starts_with("text/plain; version=0.0.4"));
    Scrape::parse(reply.body_text().lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text")
}

/// The value of `metric` with every label of `labels`, summed over the series that match.
fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == metric)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .map(|x| match &x.value {
            Sample::Counter(v) | Sample::Gauge(v) | Sample::Untyped(v) => *v,
            _ => 0.0,
        })
        .sum()
}

/// Another instance, `name`, of the app on `h`'s store (as a serverless shell runs many).
fn instance(h: &Harness, name: &str) -> clawless_core::App {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let env = clawless_core::Env::from_pairs([
        ("TELEGRAM_BOT_TOKEN", support::TOKEN.to_string()),
        ("TELEGRAM_WEBHOOK_SECRET", support::SECRET.to_string()),
        ("ANTHROPIC_API_KEY", "k".to_string()),
        ("CLAWLESS_ADMIN_TOKEN", ADMIN.to_string()),
    ]);
    clawless_core::App::new(h.platform.clone(), config, &env, name).unwrap()
}

fn message(id: i64, text: &str) -> serde_json::Value {
    let mut u = fixtures::update("private_text", id);
    u["message"]["message_id"] = json!(100 + id);
    u["message"]["text"] = json!(text);
    u
}

#[test]
fn metrics_count_what_a_scenario_did() {
    block_on(async {
        let h = harness();
        let events = h.app.events().subscribe("test", 1000);
        // Three questions; the second uses a tool twice.
        h.script(200, anthropic_text("one"));
        h.deliver_raw(&message(1, "first")).await;
        h.script(200, anthropic_tool_use("t1", "current_time", json!({})));
        h.script(
            200,
            anthropic_tool_use("t2", "current_time", json!({"zone": "UTC"})),
        );
        h.script(200, anthropic_text("two"));
        h.deliver_raw(&message(2, "what time is it")).await;
        h.script(200, anthropic_text("three"));
        h.deliver_raw(&message(3, "third")).await;
        // A re-delivery and an edit: dropped at the ack.
        h.deliver_raw(&message(3, "third")).await;
        let mut edited = message(4, "edited");
        edited["edited_message"] = edited["message"].take();
        edited.as_object_mut().unwrap().remove("message");
        h.deliver_raw(&edited).await;
        assert_eq!(h.sent_texts(), ["one", "two", "three"]);

        let s = scrape(&h, "metrics").await;
        let accepted = value(
            &s,
            "clawless_updates_accepted_total",
            &[("connector", "main")],
        );
        assert_eq!(accepted, 3.0);
        assert_eq!(
            value(
                &s,
                "clawless_updates_dropped_total",
                &[("reason", "duplicate")]
            ),
            1.0
        );
        assert_eq!(
            value(
                &s,
                "clawless_updates_dropped_total",
                &[("reason", "edited")]
            ),
            1.0
        );
        assert_eq!(
            value(&s, "clawless_model_calls_total", &[("outcome", "ok")]),
            5.0
        );
        assert_eq!(
            value(
                &s,
                "clawless_tool_calls_total",
                &[("tool", "current_time"), ("outcome", "ok")]
            ),
            2.0
        );
        assert_eq!(
            value(&s, "clawless_turns_total", &[("outcome", "answered")]),
            3.0
        );
        assert_eq!(value(&s, "clawless_replies_sent_total", &[]), 3.0);
        // 10 input tokens a call in the fake answers.
        assert_eq!(
            value(&s, "clawless_tokens_total", &[("direction", "input")]),
            50.0
        );
        assert_eq!(value(&s, "clawless_backlog_jobs", &[]), 0.0);
        let turn_count = s
            .samples
            .iter()
            .find(|x| x.metric == "clawless_turn_seconds")
            .map(|x| match &x.value {
                Sample::Histogram(b) => b.iter().map(|b| b.count).fold(0.0, f64::max),
                _ => 0.0,
            });
        assert_eq!(turn_count, Some(3.0));
        // `/metrics` is the same endpoint, behind the same token.
        let plain = h
            .app
            .admin()
            .serve(AdminRequest {
                method: "GET",
                name: "metrics",
                ..Default::default()
            })
            .await;
        assert_eq!(plain.status, 401);

        // The events of the tool turn, in order, under its trace.
        let seen: Vec<Stamped> = events.drain();
        let kinds: Vec<&str> = seen
            .iter()
            .filter(|e| e.trace == "main/2")
            .map(|e| e.event.kind())
            .collect();
        assert_eq!(
            kinds,
            [
                "accepted",
                "model",
                "tool",
                "model",
                "tool",
                "model",
                "reply_sent",
                "turn_ended"
            ]
        );
    });
}

#[test]
fn a_storm_with_a_stalled_subscriber_loses_nothing_and_counts_the_drops() {
    block_on(async {
        let h = harness();
        let stalled = h.app.events().subscribe("stalled", 10);
        let live = h.app.events().subscribe("live", 100_000);
        let mut published = 0;
        for id in 1..=1000 {
            h.script(200, anthropic_text(&format!("answer {id}")));
            h.deliver_raw(&message(id, "hi")).await;
            published += live.drain().len() as u64;
        }
        assert_eq!(h.sent_texts().len(), 1000, "every update answered");
        assert_eq!(live.dropped(), 0, "a reader that keeps up loses nothing");
        assert!(published >= 5000, "{published}");
        assert_eq!(stalled.dropped(), published - 10);
        let s = scrape(&h, "metrics").await;
        assert_eq!(
            value(&s, "clawless_events_dropped", &[("subscriber", "stalled")]),
            (published - 10) as f64
        );
        assert_eq!(value(&s, "clawless_updates_accepted_total", &[]), 1000.0);
        assert_eq!(
            value(&s, "clawless_turns_total", &[("outcome", "answered")]),
            1000.0
        );
    });
}

#[test]
fn a_failed_turn_is_seen_with_its_trace_and_retries() {
    block_on(async {
        let h = harness();
        let events = h.app.events().subscribe("tui", 1000);
        let lane = h.accept_only("private_text", 7).await.unwrap();
        while let Drained::RetryAt(at) = h.drain(&lane).await {
            let wait = at - h.clock.now_ms();
            h.clock.advance(std::time::Duration::from_millis(wait));
        }
        let seen: Vec<Stamped> = events.drain();
        let of_turn: Vec<&Stamped> = seen.iter().filter(|e| e.trace == "main/7").collect();
        let retries = of_turn
            .iter()
            .filter(|e| matches!(e.event, Event::RetryScheduled { .. }))
            .count();
        assert_eq!(retries, 3);
        let last = of_turn.last().unwrap();
        assert_eq!(
            last.event,
            Event::TurnEnded {
                outcome: "failed".into(),
                latency_ms: last.at_ms - of_turn[0].at_ms
            }
        );
        let s = scrape(&h, "metrics").await;
        assert_eq!(value(&s, "clawless_retries_total", &[]), 3.0);
        assert_eq!(
            value(&s, "clawless_turns_total", &[("outcome", "failed")]),
            1.0
        );
        assert!(value(&s, "clawless_model_calls_total", &[("outcome", "ok")]) == 0.0);
    });
}

#[test]
fn instances_keep_their_counts_and_metrics_sum_them() {
    block_on(async {
        let h = harness();
        h.script(200, anthropic_text("one"));
        h.deliver_raw(&message(1, "first")).await;
        // This instance keeps its counts (as a serverless one does after a drain) …
        h.app.admin().keep_observations().await;
        // … and another instance on the same store sees them beside its own.
        let other = instance(&h, "other");
        let reply = other
            .admin()
            .serve(AdminRequest {
                method: "GET",
                name: "metrics",
                authorization: Some(&format!("Bearer {ADMIN}")),
                ..Default::default()
            })
            .await;
        let s = Scrape::parse(reply.body_text().lines().map(|l| Ok(l.to_owned()))).unwrap();
        assert_eq!(value(&s, "clawless_updates_accepted_total", &[]), 1.0);
        assert_eq!(value(&s, "clawless_instances", &[]), 2.0);
    });
}

#[test]
fn an_instance_follows_the_events_another_kept() {
    block_on(async {
        let h = harness();
        let watcher = instance(&h, "watcher");
        let page = |cursor: Option<String>| {
            let query = cursor.map(|c| format!("after={c}"));
            let watcher = &watcher;
            async move {
                let reply = watcher
                    .admin()
                    .serve(AdminRequest {
                        method: "GET",
                        name: "events",
                        authorization: Some(&format!("Bearer {ADMIN}")),
                        query: query.as_deref(),
                        ..Default::default()
                    })
                    .await;
                assert_eq!(reply.status, 200, "{}", reply.body_text());
                serde_json::from_str::<clawless_core::observe::EventPage>(reply.body_text())
                    .unwrap()
            }
        };
        h.script(200, anthropic_text("one"));
        h.deliver_raw(&message(1, "first")).await;
        h.app.admin().keep_observations().await;
        let first = page(None).await;
        let kinds: Vec<&str> = first
            .events
            .iter()
            .filter(|e| e.trace == "main/1")
            .map(|e| e.event.kind())
            .collect();
        assert_eq!(kinds, ["accepted", "model", "reply_sent", "turn_ended"]);
        // Nothing new: an empty page, the same cursor.
        let again = page(Some(first.cursor.clone())).await;
        assert!(again.events.is_empty());
        assert_eq!(again.cursor, first.cursor);
        h.clock.advance(std::time::Duration::from_secs(1));
        h.script(200, anthropic_text("two"));
        h.deliver_raw(&message(2, "second")).await;
        h.app.admin().keep_observations().await;
        let next = page(Some(first.cursor)).await;
        assert!(next.events.iter().all(|e| e.trace != "main/1"));
        assert!(next.events.iter().any(|e| e.trace == "main/2"));
        // The stores too, as the cockpit shows them.
        let reply = watcher
            .admin()
            .serve(AdminRequest {
                method: "GET",
                name: "overview",
                authorization: Some(&format!("Bearer {ADMIN}")),
                ..Default::default()
            })
            .await;
        let o: clawless_core::observe::Overview = serde_json::from_str(reply.body_text()).unwrap();
        assert_eq!(o.sessions.len(), 1);
        assert_eq!(o.sessions[0].1, 4, "two turns of two messages");
    });
}

#[test]
fn counters_go_on_across_a_kill_and_a_restart_and_never_fall() {
    block_on(async {
        let h = harness();
        let accepted = |s: &Scrape| value(s, "clawless_updates_accepted_total", &[]);
        h.script(200, anthropic_text("one"));
        h.deliver_raw(&message(1, "first")).await;
        // Scraped, then killed (`kill -9`: nothing kept after the scrape).
        let seen = accepted(&scrape(&h, "metrics").await);
        assert_eq!(seen, 1.0);
        // The next process of this store takes over what the dead one kept.
        let next = instance(&h, "test-2");
        assert_eq!(next.admin().adopt_metrics("test").await, 1);
        let after = scrape_app(&next).await;
        assert_eq!(accepted(&after), seen, "neither counted again nor fallen");
        assert_eq!(value(&after, "clawless_instances", &[]), 1.0);
        // A graceful stop keeps the counts; the third process goes on from them.
        next.admin().keep_observations().await;
        let third = instance(&h, "test-3");
        assert_eq!(third.admin().adopt_metrics("test").await, 1);
        assert_eq!(accepted(&scrape_app(&third).await), seen);
        // Taking over twice adds nothing.
        assert_eq!(third.admin().adopt_metrics("test").await, 0);
        assert_eq!(accepted(&scrape_app(&third).await), seen);
    });
}

/// `/metrics` of another instance on the harness's store.
async fn scrape_app(app: &clawless_core::App) -> Scrape {
    let reply = app
        .admin()
        .serve(AdminRequest {
            method: "GET",
            name: "metrics",
            authorization: Some(&format!("Bearer {ADMIN}")),
            ..Default::default()
        })
        .await;
    Scrape::parse(reply.body_text().lines().map(|l| Ok(l.to_owned()))).unwrap()
}
