//! The event bus across threads: what two threads publish at once is read once each, in
//! order, or counted lost (`core/src/events/ring.rs`; core itself spawns no thread).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use clawless_core::events::{Bus, Event, SLOTS};

fn publish(bus: &Bus, n: u64) {
    bus.publish(n, "main/1", Event::ReminderFired { reminder: n });
}

#[test]
fn what_two_threads_publish_is_read_once_in_order_or_counted_lost() {
    let bus = Arc::new(Bus::default());
    let s = bus.subscribe("reader", SLOTS);
    let per_thread = 20_000u64;
    let publishers: Vec<_> = (0..2)
        .map(|_| {
            let bus = bus.clone();
            std::thread::spawn(move || {
                for n in 0..per_thread {
                    publish(&bus, n);
                }
            })
        })
        .collect();
    let mut seqs = Vec::new();
    while seqs.len() as u64 + s.dropped() < 2 * per_thread {
        seqs.extend(s.drain().into_iter().map(|e| e.seq));
    }
    for p in publishers {
        p.join().unwrap();
    }
    seqs.extend(s.drain().into_iter().map(|e| e.seq));
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "once each, in order");
    assert_eq!(seqs.len() as u64 + s.dropped(), 2 * per_thread);
}
