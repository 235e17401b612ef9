//! The event bus: what happens on the path, as typed [`Event`]s, for what watches beside it —
//! the metrics ([`metrics`], counted as each event is published), the terminal
//! cockpit, anything a shell subscribes. It is a sidecar: the path publishes and never waits.
//! Publishing counts the metrics in this thread's shard and pushes one shared copy of the
//! event to each [`Subscription`]'s bounded queue without a lock (a lock-free ring); one that
//! is not read fast enough drops what does not fit and counts it (the ack path and the turn
//! never wait on a subscriber). What publishers on different threads would otherwise contend
//! for (the metrics, the event numbers, the drop counts) is kept per thread ([`SHARDS`]).
//!
//! Every event carries the trace id of the job it belongs to (`<connector>/<update id>`, as
//! the log's `key` ends), so a turn's events can be followed from its acceptance to its
//! reply. The audit trail is not fed from here: it is written with the turn's delivery,
//! exactly once through crashes, which a dropping subscriber could not be.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use std::task::Poll;

use futures::task::AtomicWaker;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

pub mod metrics;

use metrics::Metrics;

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
    Dropped { connector: String, reason: String },
    /// A drainer let go of a lane: `idle`, `busy` (another holds it) or `retry`.
    Drained { lane: String, outcome: String },
    /// A model call ended (`outcome`: `ok` or the error's kind).
    Model {
        model: String,
        input: u64,
        output: u64,
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
                cost_micros,
                latency_ms,
                outcome,
                ..
            } => Some(Event::Model {
                model: model.clone(),
                input: *input,
                output: *output,
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
            Event::ReminderFired { .. } => "reminder_fired",
            Event::Compacted { .. } => "compacted",
        }
    }
}

/// An event as published: its number in this process, when, and its trace.
///
/// Numbers are unique and rise in the order one thread published; events of different
/// threads are ordered only by `at_ms` (each thread numbers from a counter of its own, so
/// publishers on two threads do not contend for one).
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

/// Where events go: the metrics, then every subscription.
#[derive(Default)]
pub struct Bus {
    /// Each shard's count of events published (see [`Stamped::seq`]).
    seq: Sharded,
    subscriptions: ArcSwap<Vec<Arc<Subscription>>>,
    pub(crate) metrics: Metrics,
}

impl Bus {
    /// Publishes `event`: counted in the metrics, then offered to every subscription (one that
    /// is full drops it and counts the drop). Never waits: the list is read without a lock
    /// (`arc-swap`) and each queue takes a push without one.
    pub fn publish(&self, at_ms: u64, trace: impl Into<CompactString>, event: Event) {
        self.metrics.observe(&event);
        let subs = self.subscriptions.load();
        let Some((last, others)) = subs.split_last() else {
            return;
        };
        // Shared, not copied: a reader that takes it last gets it without a copy, and the
        // copies the others need are made on their side, not on the path.
        let stamped = Arc::new(Stamped {
            seq: self.seq.next(),
            at_ms,
            trace: trace.into(),
            event,
        });
        for s in others {
            s.offer(stamped.clone());
        }
        last.offer(stamped);
    }

    /// A new subscription named `name` (in the dropped-events metric) holding at most `cap`
    /// events not yet read.
    pub fn subscribe(&self, name: &str, cap: usize) -> Arc<Subscription> {
        let (tx, rx) = mpsc::sync_channel(cap.max(1));
        let s = Arc::new(Subscription {
            name: name.to_owned(),
            tx,
            rx: Mutex::new(rx),
            waker: AtomicWaker::new(),
            waiting: AtomicBool::new(false),
            dropped: Sharded::default(),
        });
        self.subscriptions.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(s.clone());
            list
        });
        s
    }

    /// Stops `s` from receiving (its drops stay counted in the metrics).
    pub fn unsubscribe(&self, s: &Arc<Subscription>) {
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

/// A subscriber's bounded queue of events: a bounded channel (a lock-free ring for the
/// publishers; the reader's end behind a lock only readers take) and the waker of the task
/// waiting on it.
pub struct Subscription {
    name: String,
    tx: SyncSender<Arc<Stamped>>,
    rx: Mutex<Receiver<Arc<Stamped>>>,
    waker: AtomicWaker,
    /// Set while the reader waits (so a push wakes it only then, not on every event).
    waiting: AtomicBool,
    dropped: Sharded,
}

impl Subscription {
    fn offer(&self, e: Arc<Stamped>) {
        match self.tx.try_send(e) {
            Ok(()) => {
                // Pairs with the fence in `next`: either the reader sees this event, or this
                // sees it waiting.
                fence(Ordering::SeqCst);
                if self.waiting.load(Ordering::Relaxed)
                    && self.waiting.swap(false, Ordering::AcqRel)
                {
                    self.waker.wake();
                }
            }
            Err(TrySendError::Full(_)) => {
                self.dropped.next();
            }
            // The receiver lives as long as the subscription: not reached.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Everything waiting, oldest first (shared with the other subscriptions, not copied).
    pub fn drain(&self) -> Vec<Arc<Stamped>> {
        self.rx().try_iter().collect()
    }

    /// The next event, waiting for one.
    pub async fn next(&self) -> Arc<Stamped> {
        std::future::poll_fn(|cx| {
            // Registered and marked waiting before looking, so an event offered in between
            // wakes this task.
            self.waker.register(cx.waker());
            self.waiting.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            match self.rx().try_recv() {
                Ok(e) => {
                    self.waiting.store(false, Ordering::Relaxed);
                    Poll::Ready(e)
                }
                Err(_) => Poll::Pending,
            }
        })
        .await
    }

    fn rx(&self) -> std::sync::MutexGuard<'_, Receiver<Arc<Stamped>>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many events did not fit.
    pub fn dropped(&self) -> u64 {
        self.dropped.sum()
    }
}

/// Shards of the counts the bus keeps on the path (the publish path runs on every thread at
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

/// A count kept in [`SHARDS`] parts.
#[derive(Default)]
struct Sharded([Padded; SHARDS]);

#[derive(Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl Sharded {
    /// Counts one on this thread's shard and returns a number no other call returns (this
    /// shard's count, with the shard in its low digits).
    fn next(&self) -> u64 {
        let i = shard();
        let n = self.0[i].0.fetch_add(1, Ordering::Relaxed) + 1;
        n * SHARDS as u64 + i as u64
    }

    fn sum(&self) -> u64 {
        self.0.iter().map(|p| p.0.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::future::Future;

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
