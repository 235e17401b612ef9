//! The event bus: what happens on the path, as typed [`Event`]s, for what watches beside it —
//! the metrics ([`metrics`], counted as each event is published), the terminal
//! cockpit, anything a shell subscribes. It is a sidecar: the path publishes and never waits.
//! Publishing counts the metrics in this thread's shard and writes the event in place into a
//! ring of fixed slots ([`ring`]) that every [`Subscription`] reads from a cursor of its own;
//! one that is not read fast enough loses the oldest events and counts them (the ack path and
//! the turn never wait on a subscriber). The metrics are kept per thread ([`SHARDS`]), so
//! publishers on different threads do not contend for them.
//!
//! Every event carries the trace id of the job it belongs to (`<connector>/<update id>`, as
//! the log's `key` ends), so a turn's events can be followed from its acceptance to its
//! reply. The audit trail is not fed from here: it is written with the turn's delivery,
//! exactly once through crashes, which a dropping subscriber could not be.

use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

pub mod metrics;
mod ring;

use metrics::Metrics;
pub use ring::{Subscription, SLOTS};

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// An update was stored in the inbox (`ack_ms`: how long the ack path took).
    Accepted {
        connector: CompactString,
        lane: CompactString,
        ack_ms: u64,
    },
    /// An update was not stored, and why (a duplicate, an edit, group chatter, …).
    Dropped {
        connector: CompactString,
        reason: CompactString,
    },
    /// A drainer let go of a lane: `idle`, `busy` (another holds it) or `retry`.
    Drained { lane: String, outcome: String },
    /// A model call ended (`outcome`: `ok` or the error's kind).
    Model {
        model: String,
        /// Input not read from the prompt cache (written to it included).
        input: u64,
        output: u64,
        /// Input read from the prompt cache.
        #[serde(default)]
        cached_input: u64,
        cost_micros: u64,
        latency_ms: u64,
        outcome: String,
    },
    /// A tool call ended: what the policy decided, and whether it failed.
    Tool {
        tool: String,
        level: String,
        decision: String,
        latency_ms: u64,
        error: bool,
    },
    /// A turn waits for the user's approval of `tool`.
    ApprovalAsked { tool: String },
    /// The approval was answered (`outcome` as the audit trail names it).
    ApprovalAnswered { tool: String, outcome: String },
    /// A part of an answer reached Telegram.
    ReplySent {
        chat: i64,
        part: usize,
        parts: usize,
    },
    /// A failed turn is tried again at `retry_at_ms` (not `at_ms`: that is the stamp's).
    RetryScheduled {
        attempt: u32,
        retry_at_ms: u64,
        reason: String,
    },
    /// A turn ended: `answered`, `failed` (the user was told), `waiting` (an approval) or
    /// `nothing` (no reply due); `latency_ms` since its update was accepted.
    TurnEnded { outcome: String, latency_ms: u64 },
    /// A hook request was answered: `result` is `accepted`, `duplicate`, `unauthorized`,
    /// `unknown` (hook `-`), `too_large`, `unsupported_type`, `bad_request`, `rate_limited`
    /// or `storage_error`.
    HookReceived {
        hook: CompactString,
        result: CompactString,
    },
    /// A watch checked its page: `result` is `learned` (the first look), `not_modified`
    /// (304), `unchanged`, `changed` (a turn runs), `failed` or `put_off` (a failing page's
    /// backoff).
    WatchChecked { result: CompactString },
    /// A reminder or task fired into its chat's inbox.
    ReminderFired { reminder: u64 },
    /// A session's older turns were folded into its summary.
    Compacted { folded: usize },
}

impl Event {
    /// The event of a model or tool call's audit step; `None` for other steps.
    pub fn of_step(step: &crate::audit::Step) -> Option<Event> {
        use crate::audit::Step;
        match step {
            Step::Model {
                model,
                input,
                output,
                cached_input,
                cost_micros,
                latency_ms,
                outcome,
                ..
            } => Some(Event::Model {
                model: model.clone(),
                input: *input,
                output: *output,
                cached_input: *cached_input,
                cost_micros: *cost_micros,
                latency_ms: *latency_ms,
                outcome: outcome.clone(),
            }),
            Step::Tool {
                name,
                level,
                decision,
                latency_ms,
                error,
                ..
            } => Some(Event::Tool {
                tool: name.clone(),
                level: level.name().to_owned(),
                decision: decision.clone(),
                latency_ms: *latency_ms,
                error: error.is_some(),
            }),
            _ => None,
        }
    }

    /// Its `type`, as the serialised form names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Accepted { .. } => "accepted",
            Event::Dropped { .. } => "dropped",
            Event::Drained { .. } => "drained",
            Event::Model { .. } => "model",
            Event::Tool { .. } => "tool",
            Event::ApprovalAsked { .. } => "approval_asked",
            Event::ApprovalAnswered { .. } => "approval_answered",
            Event::ReplySent { .. } => "reply_sent",
            Event::RetryScheduled { .. } => "retry_scheduled",
            Event::TurnEnded { .. } => "turn_ended",
            Event::HookReceived { .. } => "hook_received",
            Event::WatchChecked { .. } => "watch_checked",
            Event::ReminderFired { .. } => "reminder_fired",
            Event::Compacted { .. } => "compacted",
        }
    }
}

/// An event as published: its number in this process (unique, rising in the order events
/// were published), when, and its trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stamped {
    pub seq: u64,
    pub at_ms: u64,
    /// `<connector>/<update id>` of the job it belongs to; empty when none.
    #[serde(default)]
    pub trace: CompactString,
    #[serde(flatten)]
    pub event: Event,
}

/// Where events go: the metrics, then the ring every subscription reads.
#[derive(Default)]
pub struct Bus {
    ring: Arc<ring::Ring>,
    subscriptions: ArcSwap<Vec<Arc<Subscription>>>,
    pub(crate) metrics: Metrics,
}

impl Bus {
    /// Publishes `event`: counted in the metrics, then written into the ring for the
    /// subscriptions (a waiting reader is woken). Never waits: the list is read without a
    /// lock (`arc-swap`), and the ring's slot is one no other publisher is writing.
    pub fn publish(&self, at_ms: u64, trace: impl Into<CompactString>, event: Event) {
        self.metrics.observe(&event);
        let subs = self.subscriptions.load();
        if subs.is_empty() {
            return;
        }
        self.ring.push(Stamped {
            seq: 0,
            at_ms,
            trace: trace.into(),
            event,
        });
        // Pairs with the fence in `Subscription::next`: either the reader sees this event,
        // or this sees it waiting.
        fence(Ordering::SeqCst);
        for s in subs.iter() {
            s.notify();
        }
    }

    /// A new subscription named `name` (in the dropped-events metric) that may be at most
    /// `cap` events behind (at most [`SLOTS`]); it reads what is published from now on.
    pub fn subscribe(&self, name: &str, cap: usize) -> Arc<Subscription> {
        let s = Arc::new(Subscription::new(name, self.ring.clone(), cap));
        self.subscriptions.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(s.clone());
            list
        });
        s
    }

    /// Stops `s` from receiving (its drops stay counted in the metrics).
    pub fn unsubscribe(&self, s: &Arc<Subscription>) {
        s.close();
        self.subscriptions.rcu(|list| {
            let mut list = Vec::clone(list);
            list.retain(|x| !Arc::ptr_eq(x, s));
            list
        });
    }

    /// `(subscription name, events it dropped)` for every subscription.
    pub fn drops(&self) -> Vec<(String, u64)> {
        self.subscriptions
            .load()
            .iter()
            .map(|s| (s.name.clone(), s.dropped()))
            .collect()
    }
}

/// Shards of the metrics the bus keeps on the path (the publish path runs on every thread at
/// once): each thread counts in its own, on a cache line of its own, so two threads
/// acknowledging updates at once neither wait for nor pass one line back and forth.
pub(crate) const SHARDS: usize = 8;

/// This thread's shard (threads are given one in turn the first time they ask).
pub(crate) fn shard() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    MINE.with(|m| {
        if m.get() == usize::MAX {
            m.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
        }
        m.get()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::future::Future;
    use std::sync::atomic::AtomicU64;
    use std::task::Poll;

    fn dropped(reason: &str) -> Event {
        Event::Dropped {
            connector: "main".into(),
            reason: reason.into(),
        }
    }

    #[test]
    fn a_full_subscription_drops_and_counts_while_others_get_everything() {
        let bus = Bus::default();
        let stalled = bus.subscribe("stalled", 2);
        let live = bus.subscribe("live", 100);
        for i in 0..10 {
            bus.publish(i, "main/1", dropped("duplicate"));
        }
        assert_eq!(stalled.drain().len(), 2);
        assert_eq!(stalled.dropped(), 8);
        let got = live.drain();
        assert_eq!(got.len(), 10);
        assert!(
            got.windows(2).all(|w| w[0].seq < w[1].seq),
            "numbered in order"
        );
        assert_eq!(bus.drops(), [("stalled".into(), 8), ("live".into(), 0)]);
        bus.unsubscribe(&stalled);
        bus.publish(11, "", dropped("x"));
        assert_eq!(stalled.drain().len(), 0);
    }

    #[test]
    fn events_serialise_with_their_type_and_trace() {
        let e = Stamped {
            seq: 1,
            at_ms: 5,
            trace: "main/7".into(),
            event: Event::TurnEnded {
                outcome: "answered".into(),
                latency_ms: 1200,
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "turn_ended");
        assert_eq!(v["trace"], "main/7");
        assert_eq!(serde_json::from_value::<Stamped>(v).unwrap(), e);
        assert_eq!(e.event.kind(), "turn_ended");
    }

    #[test]
    fn every_event_reads_back_inside_its_stamp() {
        // A field named as one of the stamp's would make the stamp unreadable (flattened).
        let all = [
            Event::Accepted {
                connector: "c".into(),
                lane: "l".into(),
                ack_ms: 1,
            },
            dropped("duplicate"),
            Event::Drained {
                lane: "l".into(),
                outcome: "idle".into(),
            },
            Event::Model {
                model: "m".into(),
                input: 1,
                output: 2,
                cached_input: 5,
                cost_micros: 3,
                latency_ms: 4,
                outcome: "ok".into(),
            },
            Event::Tool {
                tool: "t".into(),
                level: "safe".into(),
                decision: "allowed".into(),
                latency_ms: 1,
                error: false,
            },
            Event::ApprovalAsked { tool: "t".into() },
            Event::ApprovalAnswered {
                tool: "t".into(),
                outcome: "denied".into(),
            },
            Event::ReplySent {
                chat: -1,
                part: 1,
                parts: 2,
            },
            Event::RetryScheduled {
                attempt: 1,
                retry_at_ms: 9,
                reason: "r".into(),
            },
            Event::TurnEnded {
                outcome: "answered".into(),
                latency_ms: 5,
            },
            Event::HookReceived {
                hook: "ci".into(),
                result: "accepted".into(),
            },
            Event::WatchChecked {
                result: "changed".into(),
            },
            Event::ReminderFired { reminder: 3 },
            Event::Compacted { folded: 4 },
        ];
        for event in all {
            let e = Stamped {
                seq: 7,
                at_ms: 8,
                trace: "main/1".into(),
                event,
            };
            let text = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<Stamped>(&text).unwrap(), e, "{text}");
        }
    }

    #[test]
    fn next_waits_for_an_event_and_only_a_waiting_reader_is_woken() {
        struct Wakes(AtomicU64);
        impl futures::task::ArcWake for Wakes {
            fn wake_by_ref(w: &Arc<Self>) {
                w.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let wakes = Arc::new(Wakes(AtomicU64::new(0)));
        let woken = || wakes.0.load(Ordering::SeqCst);
        let waker = futures::task::waker(wakes.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        let bus = Arc::new(Bus::default());
        let s = bus.subscribe("tui", 8);
        let mut next = std::pin::pin!(s.next());
        assert!(next.as_mut().poll(&mut cx).is_pending());
        bus.publish(1, "", dropped("edited"));
        assert_eq!(woken(), 1, "the waiting reader is woken");
        let Poll::Ready(e) = next.as_mut().poll(&mut cx) else {
            panic!("ready after a publish")
        };
        assert_eq!(e.event.kind(), "dropped");
        bus.publish(2, "", dropped("a"));
        bus.publish(3, "", dropped("b"));
        assert_eq!(woken(), 1, "a reader that is not waiting is not woken");
        let mut again = std::pin::pin!(s.next());
        assert!(
            again.as_mut().poll(&mut cx).is_ready(),
            "what waits is taken at once"
        );
        assert_eq!(s.drain().len(), 1);
        let mut third = std::pin::pin!(s.next());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        bus.publish(4, "", dropped("c"));
        assert_eq!(woken(), 2);
    }
}
