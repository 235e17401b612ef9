//! The bus's ring and the subscriptions reading it. Every event published is written in place
//! into one of [`SLOTS`] slots, allocated and written once when the bus is made, so publishing
//! allocates nothing for the event and touches no fresh page (a heap copy per event, held
//! until the slowest reader let go of it, made the ack's tail slower in a storm: the fresh
//! pages it faulted in). Each subscription reads the ring from a cursor of its own: one that
//! falls more than its capacity behind loses the oldest events it did not read, and counts
//! them.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use futures::task::AtomicWaker;

use super::Stamped;

/// Events the ring holds: the most a subscription can be behind without losing any. About
/// 150 bytes each, written when the bus is made: 1,024 keep the idle process small (a reader
/// that keeps up, as the cockpit and the journal do, is never that far behind).
pub const SLOTS: usize = 1024;

/// One slot: the event at ring position `at`, or nothing yet (`at` is `u64::MAX`).
struct Slot {
    at: u64,
    event: Option<Stamped>,
}

/// What a reader found at a position.
enum Found {
    Event(Stamped),
    /// Reserved by a publisher still writing it (or not published yet).
    NotYet,
    /// Written over by a later event before it was read.
    Lost,
}

pub(super) struct Ring {
    slots: Box<[Mutex<Slot>]>,
    /// The next position a publisher takes.
    head: AtomicU64,
}

impl Default for Ring {
    fn default() -> Self {
        Ring {
            slots: (0..SLOTS)
                .map(|_| {
                    Mutex::new(Slot {
                        at: u64::MAX,
                        event: None,
                    })
                })
                .collect(),
            head: AtomicU64::new(0),
        }
    }
}

impl Ring {
    /// Writes `e` at the next position, numbered with it (its `seq`).
    pub(super) fn push(&self, mut e: Stamped) {
        let at = self.head.fetch_add(1, Ordering::AcqRel);
        e.seq = at;
        let old = {
            let mut slot = self.slot(at);
            slot.at = at;
            slot.event.replace(e)
        };
        // The event written over is freed outside the slot's lock.
        drop(old);
    }

    fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    fn slot(&self, at: u64) -> MutexGuard<'_, Slot> {
        self.slots[(at % SLOTS as u64) as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, at: u64) -> Found {
        let slot = self.slot(at);
        match &slot.event {
            Some(e) if slot.at == at => Found::Event(e.clone()),
            Some(_) if slot.at > at && slot.at != u64::MAX => Found::Lost,
            _ => Found::NotYet,
        }
    }
}

/// A subscriber's view of the ring: where it has read to, and the task waiting on it.
pub struct Subscription {
    pub(super) name: String,
    ring: Arc<Ring>,
    /// The most events it may be behind (at most [`SLOTS`]).
    cap: u64,
    /// The next position to read, and the events lost before it; taken by readers only.
    read: Mutex<(u64, u64)>,
    waker: AtomicWaker,
    /// Set while the reader waits (so a publish wakes it only then, not on every event).
    waiting: AtomicBool,
    /// Unsubscribed: reads nothing more, and its count of lost events stays as it was.
    closed: AtomicBool,
}

impl Subscription {
    pub(super) fn new(name: &str, ring: Arc<Ring>, cap: usize) -> Subscription {
        let from = ring.head();
        Subscription {
            name: name.to_owned(),
            ring,
            cap: cap.clamp(1, SLOTS) as u64,
            read: Mutex::new((from, 0)),
            waker: AtomicWaker::new(),
            waiting: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// Reads nothing from now on; what it lost so far stays counted.
    pub(super) fn close(&self) {
        let mut read = self.read();
        read.1 = self.lost(*read);
        self.closed.store(true, Ordering::Release);
    }

    /// Events lost before `cursor`, and those it is behind by more than it may be.
    fn lost(&self, (cursor, lost): (u64, u64)) -> u64 {
        if self.closed.load(Ordering::Acquire) {
            return lost;
        }
        lost + self
            .ring
            .head()
            .saturating_sub(cursor.saturating_add(self.cap))
    }

    /// Wakes the reader if it waits (after an event was written).
    pub(super) fn notify(&self) {
        if self.waiting.load(Ordering::Relaxed) && self.waiting.swap(false, Ordering::AcqRel) {
            self.waker.wake();
        }
    }

    fn read(&self) -> MutexGuard<'_, (u64, u64)> {
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Up to `max` events from the cursor on, oldest first; skips (and counts) what it fell
    /// too far behind to read.
    fn take(&self, max: usize) -> Vec<Stamped> {
        let mut read = self.read();
        if self.closed.load(Ordering::Acquire) {
            return Vec::new();
        }
        let (cursor, lost) = &mut *read;
        let head = self.ring.head();
        let oldest = head.saturating_sub(self.cap);
        if *cursor < oldest {
            *lost += oldest - *cursor;
            *cursor = oldest;
        }
        let mut out = Vec::with_capacity((head.saturating_sub(*cursor) as usize).min(max));
        while *cursor < head && out.len() < max {
            match self.ring.get(*cursor) {
                Found::Event(e) => out.push(e),
                Found::Lost => *lost += 1,
                Found::NotYet => break,
            }
            *cursor += 1;
        }
        out
    }

    /// Everything waiting, oldest first.
    pub fn drain(&self) -> Vec<Stamped> {
        self.take(usize::MAX)
    }

    /// The next event, waiting for one.
    pub async fn next(&self) -> Stamped {
        std::future::poll_fn(|cx| {
            // Registered and marked waiting before looking, so an event published in between
            // wakes this task (pairs with the fence in `Bus::publish`).
            self.waker.register(cx.waker());
            self.waiting.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            match self.take(1).pop() {
                Some(e) => {
                    self.waiting.store(false, Ordering::Relaxed);
                    Poll::Ready(e)
                }
                None => Poll::Pending,
            }
        })
        .await
    }

    /// How many events it lost: skipped, and those it is behind by more than it may be.
    pub fn dropped(&self) -> u64 {
        let read = *self.read();
        self.lost(read)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::{Bus, Event, Stamped};
    use super::{Slot, SLOTS};

    #[test]
    fn a_slot_is_small() {
        // What the ring adds to the process's memory: SLOTS of these.
        assert!(std::mem::size_of::<std::sync::Mutex<Slot>>() <= 160);
        assert!(std::mem::size_of::<Stamped>() <= 144);
    }

    fn publish(bus: &Bus, n: u64) {
        bus.publish(n, "main/1", Event::ReminderFired { reminder: n });
    }

    #[test]
    fn a_reader_far_behind_gets_the_newest_and_counts_the_rest() {
        let bus = Bus::default();
        let s = bus.subscribe("behind", usize::MAX);
        for n in 0..(SLOTS as u64 + 100) {
            publish(&bus, n);
        }
        assert_eq!(s.dropped(), 100);
        let got = s.drain();
        assert_eq!(got.len(), SLOTS);
        assert_eq!(got[0].at_ms, 100, "the oldest it could still read");
        assert!(got.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        assert_eq!(s.dropped(), 100, "counted once");
        publish(&bus, 0);
        assert_eq!(s.drain().len(), 1);
        assert_eq!(s.dropped(), 100);
    }
}
