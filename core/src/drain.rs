//! The drain stage: a lane's jobs taken in order under its lease, each handed to the turn
//! stage, the lease renewed beside the work; the sweep drains every lane with pending work.

use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clawless_platform::PortError;
use futures::future::{select, Either};
use futures::StreamExt;

use crate::app::App;
use crate::ids::Lane;
use crate::inbox::{Drained, Lease};
use crate::turn::Step;

/// How often a drainer renews its lease while it works (a third of the lease's life).
pub const LEASE_RENEW_EVERY: Duration = Duration::from_secs(6);

/// Lanes a sweep drains at once.
pub const SWEEP_PARALLEL: usize = 8;

impl App {
    fn owner(&self) -> String {
        format!(
            "{}-{}",
            self.instance,
            self.counter.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Processes a lane's jobs in order until it is empty or its head must wait.
    pub async fn drain(&self, lane: &Lane) -> Result<Drained, PortError> {
        let owner = self.owner();
        loop {
            if !self.inbox.try_lease(lane, &owner).await? {
                self.drained(lane, Drained::Busy);
                return Ok(Drained::Busy);
            }
            let outcome = self.drain_leased(lane, &owner).await;
            self.inbox.release(lane, &owner).await?;
            match outcome? {
                // A job accepted while we released would find the lease still held: look again.
                Drained::Idle if self.inbox.head(lane).await?.is_some() => continue,
                other => {
                    self.drained(lane, other);
                    return Ok(other);
                }
            }
        }
    }

    /// Publishes how a drain of `lane` ended.
    fn drained(&self, lane: &Lane, how: Drained) {
        let outcome = match how {
            Drained::Idle => "idle",
            Drained::Busy => "busy",
            Drained::RetryAt(_) => "retry",
        };
        let event = crate::events::Event::Drained {
            lane: lane.to_string(),
            outcome: outcome.to_owned(),
        };
        self.emit("", event);
    }

    async fn drain_leased(&self, lane: &Lane, owner: &str) -> Result<Drained, PortError> {
        while let Some((key, job)) = self.inbox.head(lane).await? {
            if job.not_before_ms > self.platform.clock.now_ms() {
                return Ok(Drained::RetryAt(job.not_before_ms));
            }
            let lease = Lease { lane, owner };
            let step = match select(
                pin!(self.process(&key, job, lease)),
                pin!(self.keep_lease(lease)),
            )
            .await
            {
                Either::Left((step, _)) => step,
                Either::Right((never, _)) => match never {},
            };
            match step? {
                Step::Done => {}
                Step::RetryAt(at) => return Ok(Drained::RetryAt(at)),
                Step::LostLease => return Ok(Drained::Busy),
            }
            if !self.inbox.hold(lease).await? {
                return Ok(Drained::Busy);
            }
        }
        Ok(Drained::Idle)
    }

    /// Renews `lease` every [`LEASE_RENEW_EVERY`] for as long as it is polled, beside the
    /// work it covers, so a live drainer keeps its lane through a slow model call and a dead
    /// one's lease lapses within [`crate::inbox::LEASE_TTL`]. It never ends: a lost lease is
    /// only logged here; the fencing checks before each write act on it.
    async fn keep_lease(&self, lease: Lease<'_>) -> std::convert::Infallible {
        loop {
            // Give the work its turn first: with a clock whose sleeps end at once (tests),
            // this loop must still wait for the work between renewals.
            crate::task::yield_now().await;
            self.platform.clock.sleep(LEASE_RENEW_EVERY).await;
            match self.inbox.hold(lease).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(lane = %lease.lane, "lease lost to another drainer"),
                Err(e) => tracing::warn!(lane = %lease.lane, error = %e, "lease renewal failed"),
            }
        }
    }

    /// [`App::drain`]; after a background task's lane, its chat's lane too, where the task's
    /// answer waits to join the session.
    pub(crate) async fn drain_and_follow(&self, lane: &Lane) -> Result<Drained, PortError> {
        let drained = self.drain(lane).await?;
        if let Some(chat) = lane.task_chat() {
            if let Err(e) = self.drain(&chat).await {
                tracing::warn!(lane = %chat, error = %e, "drain after a background task failed; the sweep retries");
            }
        }
        Ok(drained)
    }

    /// Drains every lane with pending work (at start-up, and on a timer or cron), up to
    /// [`SWEEP_PARALLEL`] lanes at once, so one chat's slow backlog does not hold up the
    /// others. Returns the earliest instant a waiting job should be tried again.
    pub async fn sweep(&self) -> Result<Option<u64>, PortError> {
        let lanes = self.inbox.lanes(1000).await?;
        // Each future owns its lane (a closure over borrowed lanes would not be `Send` for
        // every lifetime, which spawning shells need).
        let drains = lanes
            .into_iter()
            .map(|lane| async move { self.drain_and_follow(&lane).await });
        let results: Vec<Result<Drained, PortError>> = futures::stream::iter(drains)
            .buffer_unordered(SWEEP_PARALLEL)
            .collect()
            .await;
        let mut next: Option<u64> = None;
        for r in results {
            if let Drained::RetryAt(at) = r? {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        Ok(next)
    }

    /// [`App::drain`], then, while the lane's head waits for a retry due within `max_wait`,
    /// waits for it here and drains again (at most 8 times). What the serverless shells run
    /// after the ack; a retry due later is left to the scheduled sweep.
    pub async fn drain_within(
        &self,
        lane: &Lane,
        max_wait: Duration,
    ) -> Result<Drained, PortError> {
        let drained = self.drain_waiting(lane, max_wait).await;
        // A serverless instance may not live to its next scheduled run: its counts now.
        self.keep_observations().await;
        drained
    }

    async fn drain_waiting(&self, lane: &Lane, max_wait: Duration) -> Result<Drained, PortError> {
        let mut last = Drained::Idle;
        for _ in 0..8 {
            last = self.drain(lane).await?;
            let Drained::RetryAt(at) = last else {
                return Ok(last);
            };
            let wait = Duration::from_millis(at.saturating_sub(self.platform.clock.now_ms()));
            if wait > max_wait {
                tracing::info!(%lane, retry_at = at, "left for the scheduled sweep");
                return Ok(last);
            }
            self.platform.clock.sleep(wait).await;
        }
        Ok(last)
    }
}
