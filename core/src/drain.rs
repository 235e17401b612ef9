//! The drain stage: a lane's jobs taken in order under its lease, each handed to the turn
//! stage, the lease renewed beside the work; the sweep drains every lane with pending work.

use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clawless_platform::PortError;
use futures::future::{select, Either};
use futures::StreamExt;

use crate::allowance::{Allowance, Limits, Work};
use crate::app::App;
use crate::ids::Lane;
use crate::inbox::{Drained, Lease, Swept};
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
        self.drain_with(lane, &Allowance::unbounded()).await
    }

    /// [`App::drain`] within what `allowance` leaves: hands the lane on
    /// ([`Drained::HandOff`]) rather than begin work it cannot expect to finish.
    pub async fn drain_with(
        &self,
        lane: &Lane,
        allowance: &Allowance,
    ) -> Result<Drained, PortError> {
        let owner = self.owner();
        loop {
            if !self.inbox.try_lease(lane, &owner).await? {
                self.drained(lane, Drained::Busy);
                return Ok(Drained::Busy);
            }
            let outcome = self.drain_leased(lane, &owner, allowance).await;
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
            Drained::HandOff => "handed_on",
        };
        let event = crate::events::Event::Drained {
            lane: lane.to_string(),
            outcome: outcome.to_owned(),
        };
        self.emit("", event);
    }

    async fn drain_leased(
        &self,
        lane: &Lane,
        owner: &str,
        allowance: &Allowance,
    ) -> Result<Drained, PortError> {
        while let Some((key, job)) = self.inbox.head(lane).await? {
            let now = self.platform.clock.now_ms();
            if job.not_before_ms > now {
                return Ok(Drained::RetryAt(job.not_before_ms));
            }
            if !allowance.may_begin(now, Work::Job) {
                return Ok(Drained::HandOff);
            }
            if self.inbox.discard_if_finished(&key, &job).await? {
                tracing::info!(%lane, update_id = job.update_id, "update finished before; dropped unrun");
                continue;
            }
            let lease = Lease {
                lane,
                owner,
                allowance,
            };
            let step = match select(
                pin!(crate::turn::process(self, &key, job, lease)),
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
                Step::HandOff => return Ok(Drained::HandOff),
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
    pub(crate) async fn drain_and_follow(
        &self,
        lane: &Lane,
        allowance: &Allowance,
    ) -> Result<Drained, PortError> {
        let drained = self.drain_with(lane, allowance).await?;
        if let Some(chat) = lane.task_chat() {
            if let Err(e) = self.drain_with(&chat, allowance).await {
                tracing::warn!(lane = %chat, error = %e, "drain after a background task failed; the sweep retries");
            }
        }
        Ok(drained)
    }

    /// Drains every lane with pending work (at start-up, and on a timer or cron), up to
    /// [`SWEEP_PARALLEL`] lanes at once, so one chat's slow backlog does not hold up the
    /// others. Returns the earliest instant a waiting job should be tried again.
    pub async fn sweep(&self) -> Result<Option<u64>, PortError> {
        Ok(self.sweep_with(&Allowance::unbounded()).await?.next)
    }

    /// [`App::sweep`] within what `allowance` leaves; says which lanes it handed on.
    pub async fn sweep_with(&self, allowance: &Allowance) -> Result<Swept, PortError> {
        let lanes = self.inbox.lanes(1000).await?;
        // Each future owns its lane (a closure over borrowed lanes would not be `Send` for
        // every lifetime, which spawning shells need).
        let drains = lanes.into_iter().map(|lane| async move {
            let drained = self.drain_and_follow(&lane, allowance).await;
            (lane, drained)
        });
        let results: Vec<(Lane, Result<Drained, PortError>)> = futures::stream::iter(drains)
            .buffer_unordered(SWEEP_PARALLEL)
            .collect()
            .await;
        let mut swept = Swept::default();
        for (lane, r) in results {
            match r? {
                Drained::RetryAt(at) => {
                    swept.next = Some(swept.next.map_or(at, |n| n.min(at)));
                }
                Drained::HandOff => swept.handed_on.push(lane),
                Drained::Idle | Drained::Busy => {}
            }
        }
        Ok(swept)
    }

    /// [`App::drain_with`] an invocation's `limits`, then, while the lane's head waits for a
    /// retry due within `max_wait` (and before the invocation's end), waits for it here and
    /// drains again (at most 8 times). What the serverless shells run after the ack; a retry
    /// due later is left to the scheduled sweep, and [`Drained::HandOff`] to a fresh
    /// invocation.
    pub async fn drain_within(
        &self,
        lane: &Lane,
        max_wait: Duration,
        limits: Limits,
    ) -> Result<Drained, PortError> {
        let allowance = self.allowance(limits);
        let drained = self.drain_waiting(lane, max_wait, &allowance).await;
        // A serverless instance may not live to its next scheduled run: its counts now.
        self.admin().keep_observations().await;
        if let Ok(Drained::HandOff) = drained {
            tracing::info!(
                %lane,
                requests = allowance.requests_used(),
                "invocation's allowance spent; the lane is handed on"
            );
        }
        drained
    }

    async fn drain_waiting(
        &self,
        lane: &Lane,
        max_wait: Duration,
        allowance: &Allowance,
    ) -> Result<Drained, PortError> {
        let mut last = Drained::Idle;
        for _ in 0..8 {
            last = self.drain_with(lane, allowance).await?;
            let Drained::RetryAt(at) = last else {
                return Ok(last);
            };
            let wait = Duration::from_millis(at.saturating_sub(self.platform.clock.now_ms()));
            if wait > max_wait || allowance.give_up_at().is_some_and(|end| at >= end) {
                tracing::info!(%lane, retry_at = at, "retry not waited for in this invocation");
                return Ok(last);
            }
            self.platform.clock.sleep(wait).await;
        }
        Ok(last)
    }
}
