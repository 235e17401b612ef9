//! The counts of an update's acknowledgement, one rule for the app's metrics and the front's
//! ([`crate::front`], which keeps its own instance's counts without the event bus).

use super::{Event, Snapshot, ACK_BUCKETS};

impl Snapshot {
    /// Counts `event` when it is an acknowledgement's: an update stored (`Accepted`, with the
    /// time the ack took) or not (`Dropped`, with why). Other events are left alone.
    pub fn count_ack(&mut self, event: &Event, scratch: &mut String) {
        match event {
            Event::Accepted {
                connector, ack_ms, ..
            } => {
                self.add(
                    "clawless_updates_accepted_total",
                    &[("connector", connector)],
                    1.0,
                    scratch,
                );
                self.observe(
                    "clawless_ack_seconds",
                    &[],
                    ACK_BUCKETS,
                    *ack_ms as f64 / 1000.0,
                    scratch,
                );
            }
            Event::Dropped { connector, reason } => self.add(
                "clawless_updates_dropped_total",
                &[("connector", connector), ("reason", reason)],
                1.0,
                scratch,
            ),
            _ => {}
        }
    }
}
