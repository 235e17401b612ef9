//! Firing due reminders, from every shell's scheduler: each due entry becomes a job in its
//! chat's lane under a deterministic update id, then the record is advanced by
//! compare-and-swap (a one-off leaves a tombstone first, so no import fires it again). Why that
//! is exactly once, through restores and merges too, is written in [`crate::schedule`].

use clawless_platform::PortError;
use futures::StreamExt;

use crate::app::App;
use crate::ids::{ConnectorId, Lane};
use crate::inbox::Job;
use crate::keys;
use crate::schedule::{fire_update_id, Fire, What};

/// At most this many firings per run; the rest are the next run's (at once on native).
pub const MAX_FIRINGS_PER_RUN: usize = 200;

/// The least time before [`App::fire_due`] looks at the due index again.
const RETRY_FAILED_MS: u64 = 1_000;

impl App {
    /// Fires every reminder that is due and drains the lanes it gave work to; returns when
    /// the next one is due (ms). What the native runner runs at that time; the serverless
    /// shells fire from [`App::scheduled`] each minute.
    pub async fn fire_due(&self) -> Option<u64> {
        let lanes = self.enqueue_due().await;
        // Native only: nothing bounds the work.
        let allowance = &crate::allowance::Allowance::unbounded();
        let drains = lanes.into_iter().map(|lane| async move {
            if let Err(e) = self.drain_and_follow(&lane, allowance).await {
                tracing::warn!(%lane, error = %e, "drain after a firing failed; the sweep retries");
            }
        });
        futures::stream::iter(drains)
            .buffer_unordered(crate::drain::SWEEP_PARALLEL)
            .collect::<Vec<()>>()
            .await;
        // A firing that failed leaves its entry due now: asking again at once would spin
        // while storage is down, so the next try is a few seconds off at the earliest.
        let soonest = self.platform.clock.now_ms().saturating_add(RETRY_FAILED_MS);
        self.next_due().await.map(|at| at.max(soonest))
    }

    /// The earliest due time a reminder or task was given since the last call (ms), if any:
    /// what a runner that waits for the next firing must learn after each turn, without
    /// listing the due index.
    pub fn due_written(&self) -> Option<u64> {
        self.wake.take()
    }

    /// When the next reminder is due (ms), if any (possibly past, when a firing failed).
    pub async fn next_due(&self) -> Option<u64> {
        match self.schedules().next_due().await {
            Ok(at) => at,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the due index");
                None
            }
        }
    }

    /// Puts every due firing in the inbox (at most [`MAX_FIRINGS_PER_RUN`]); returns the
    /// lanes that got one. Failures are logged: the entry stays and the next run retries it.
    pub async fn enqueue_due(&self) -> Vec<Lane> {
        let now = self.platform.clock.now_ms();
        let due = match self.schedules().due(now, MAX_FIRINGS_PER_RUN).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "could not list due reminders");
                return Vec::new();
            }
        };
        let mut lanes: Vec<Lane> = Vec::new();
        for (entry, at, connector, chat, id) in due {
            match self.fire_one(&entry, at, &connector, chat, id, now).await {
                Ok(Some(lane)) if !lanes.contains(&lane) => lanes.push(lane),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(%connector, id, error = %e, "firing failed; retried next run")
                }
            }
        }
        lanes
    }

    /// One due entry: the firing enqueued (a repeat is dropped by the inbox), a one-off's
    /// tombstone written, the record advanced, the entry deleted.
    async fn fire_one(
        &self,
        entry: &str,
        at: u64,
        connector: &ConnectorId,
        chat: i64,
        id: u64,
        now: u64,
    ) -> Result<Option<Lane>, PortError> {
        let store = self.schedules();
        let kv = &*self.platform.kv;
        let Some((read, r)) = store.load(&keys::reminder(connector, chat, id)).await? else {
            kv.delete(entry).await?; // cancelled, or a one-off already fired
            return Ok(None);
        };
        if r.next_ms != at {
            kv.delete(entry).await?; // stale: the record has moved on
            return Ok(None);
        }
        let update_id = fire_update_id(id, at);
        let lane = match r.what {
            What::Spawn { .. } => Lane::of_tasks(connector, chat),
            _ => Lane::of_chat(connector, chat),
        };
        let fire = Fire {
            reminder: id,
            at_ms: at,
            what: r.what.clone(),
        };
        let job = Job::of_firing(connector, update_id, &r.origin, fire, at);
        if self.inbox.accept(&lane, &job).await? {
            let trace = crate::turn::trace(&job);
            self.emit(&trace, crate::events::Event::ReminderFired { reminder: id });
        } else {
            tracing::info!(%connector, id, at, "firing already in the inbox");
        }
        // Before the one-off's record goes: no import brings back what left a tombstone.
        if !r.repeats() {
            store.mark_fired(&r, at).await?;
        }
        if !store.advance(&r, &read, now).await? {
            tracing::info!(%connector, id, at, "reminder advanced by another run");
        }
        kv.delete(entry).await?;
        Ok(Some(lane))
    }
}
