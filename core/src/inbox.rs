//! The durable inbox: updates are stored on acknowledgement and processed after it, exactly
//! once, in order per lane (one lane per chat), surviving crashes.
//!
//! Keys (all through the Kv port, built in [`crate::keys`]):
//! - `inbox/<lane>/<update_id:020>`: a pending [`Job`], written with put-if-absent on accept;
//!   lexical order is update order.
//! - `seen/<connector>/<update_id>`: written when a job finishes, kept `dedupe_hours`; a
//!   re-delivered update finds it (or its pending job) and is dropped.
//! - `lease/<lane>`: who is draining the lane, with a TTL so a crashed drainer's lease lapses.
//!
//! A job carries its checkpoint: once the model has answered, the rendered parts are stored
//! before anything is sent, and each sent part is counted, so a retry after a crash neither
//! calls the model again nor re-sends what was delivered.

use std::sync::Arc;
use std::time::Duration;

use clawless_platform::{Clock, Kv, KvExt, PortError};
use serde::{Deserialize, Serialize};

use crate::agent::{PendingCall, RunState, Verdict};
use crate::config::InboxConfig;
use crate::ids::{Lane, SessionKey};
use crate::keys;
use crate::llm::ChatMessage;
use crate::telegram::render::Part;

mod job;

pub use job::{Job, MediaState, Stage};

/// How long a drainer holds a lane without renewing it. A live drainer renews every few
/// seconds beside its work (`App::keep_lease`), so a crashed one's lane is free again within
/// this long. Drainers check they still hold the lane before every write that matters
/// (fencing), so a lapsed lease can cost a repeated model call but never a second answer.
pub const LEASE_TTL: Duration = Duration::from_secs(20);

/// A drainer's hold on a lane.
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    pub lane: &'a Lane,
    pub owner: &'a str,
    /// What the holder's invocation may still spend.
    pub allowance: &'a crate::allowance::Allowance,
}

/// The answer, once decided: what to send, how much was sent, and the session turn to apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub parts: Vec<Part>,
    pub sent: usize,
    /// Reply to this message id with the first part (groups).
    #[serde(default)]
    pub reply_to: Option<i64>,
    /// `(session key, messages)` to append to that session, at most once.
    #[serde(default)]
    pub session_turn: Option<(SessionKey, Vec<ChatMessage>)>,
    /// The untrusted text the session holds once `session_turn` is applied (see
    /// [`crate::session::Session::tainted`]): what the turn read, `None` when it read none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint: Option<String>,
    /// Spend and audit entries to write beside the delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub books: Option<Box<crate::usage::Books>>,
}

/// What was answered, and by whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    AllowOnce,
    /// Allowed, and the tool runs without asking in this chat for `approvals.grant_minutes`.
    AllowForAWhile,
    Deny,
    Expired,
    Superseded,
    /// `/stop`: the turn ends without another model call.
    Stopped,
}

impl Outcome {
    pub(crate) fn verdict(self) -> Verdict {
        match self {
            Outcome::AllowOnce | Outcome::AllowForAWhile => Verdict::Approved,
            Outcome::Deny | Outcome::Stopped => Verdict::Denied,
            Outcome::Expired => Verdict::Expired,
            Outcome::Superseded => Verdict::Superseded,
        }
    }

    /// How the audit trail names it.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::AllowOnce => "allowed once",
            Outcome::AllowForAWhile => "allowed for a while",
            Outcome::Deny => "denied",
            Outcome::Expired => "expired",
            Outcome::Superseded => "superseded",
            Outcome::Stopped => "stopped",
        }
    }
}

/// A turn waiting for an approval, kept in its job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suspended {
    /// Names this approval in the buttons: `<update id>.<model round>`.
    pub id: String,
    pub run: RunState,
    pub call: PendingCall,
    /// Who may answer besides the connector's owner: whose message started the turn.
    pub asker: i64,
    /// The approval message, once sent.
    pub message_id: Option<i64>,
    pub expires_ms: u64,
    pub answer: Option<(Outcome, Option<String>)>,
    /// Spend and audit entries to write beside the approval message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub books: Option<Box<crate::usage::Books>>,
}

/// What draining a lane ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Nothing left.
    Idle,
    /// Another drainer holds the lane.
    Busy,
    /// The head job waits for a retry at this instant (ms).
    RetryAt(u64),
    /// The invocation's allowance is spent with work left: its turn is kept in the job, and
    /// the shell should drain the lane again at once in a fresh invocation (see
    /// [`crate::allowance`]).
    HandOff,
}

/// What a sweep left.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// The earliest instant a waiting job should be tried again.
    pub next: Option<u64>,
    /// Lanes handed on with work left (see [`Drained::HandOff`]).
    pub handed_on: Vec<Lane>,
}

pub struct Inbox {
    pub kv: Arc<dyn Kv>,
    pub clock: Arc<dyn Clock>,
    pub config: InboxConfig,
}

impl Inbox {
    /// Stores a new job. `Ok(false)`: this update was already accepted (pending or done).
    ///
    /// The job is put first and `seen` read after: [`Inbox::finish`] writes `seen` before it
    /// removes the job, so a put that lands after a finished twin's removal always finds its
    /// `seen` row (read first, a redelivery racing the twin's finish could miss both). Such a
    /// put is taken back here; a drainer that took it in the instant between finds the same
    /// row ([`Inbox::finished_before`]) and runs nothing.
    pub async fn accept(&self, lane: &Lane, job: &Job) -> Result<bool, PortError> {
        let bytes = serde_json::to_vec(job).map_err(|e| PortError::invalid(e.to_string()))?;
        let key = keys::job(lane, job.update_id);
        if !self.kv.put_if_absent(&key, &bytes, None).await? {
            return Ok(false);
        }
        if self.finished_before(job).await? {
            self.kv
                .compare_and_swap(&key, Some(&bytes), None, None)
                .await?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether `job`'s update already finished (its `seen` row is kept).
    async fn finished_before(&self, job: &Job) -> Result<bool, PortError> {
        Ok(self
            .kv
            .get(&keys::seen(&job.connector, job.update_id))
            .await?
            .is_some())
    }

    /// Removes `job` unrun when it is fresh (stage `New`, never tried) and its update already
    /// finished: a redelivery that raced its twin's finish ([`Inbox::accept`]). `true` when
    /// it was removed. One Kv read for a fresh job; none for another.
    pub async fn discard_if_finished(&self, key: &str, job: &Job) -> Result<bool, PortError> {
        if !matches!(job.stage, Stage::New)
            || job.attempts > 0
            || !self.finished_before(job).await?
        {
            return Ok(false);
        }
        self.kv.delete(key).await?;
        Ok(true)
    }

    /// The lane's first job, if any, in one Kv call (a scan of one entry, not a listing and
    /// a read). An unreadable job is logged and removed.
    pub async fn head(&self, lane: &Lane) -> Result<Option<(String, Job)>, PortError> {
        loop {
            let Some(entry) = self
                .kv
                .scan(&keys::lane_jobs(lane), "", 1)
                .await?
                .into_iter()
                .next()
            else {
                return Ok(None);
            };
            match serde_json::from_slice::<Job>(&entry.value) {
                Ok(job) => return Ok(Some((entry.key, job))),
                Err(e) => {
                    tracing::error!(key = entry.key, error = %e, "unreadable inbox job dropped");
                    self.kv.delete(&entry.key).await?;
                }
            }
        }
    }

    /// The job after `key` in `lane`, if any: what arrived while the head waits.
    pub async fn next_after(
        &self,
        lane: &Lane,
        key: &str,
    ) -> Result<Option<(String, Job)>, PortError> {
        let Some(next) = self
            .kv
            .list_after(&keys::lane_jobs(lane), key, 1)
            .await?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        Ok(self.kv.get_json::<Job>(&next).await?.map(|job| (next, job)))
    }

    pub async fn save(&self, key: &str, job: &Job) -> Result<(), PortError> {
        self.kv.put_json(key, job, None).await
    }

    /// Marks a job finished: remembered as seen, then removed from the lane.
    pub async fn finish(&self, key: &str, job: &Job) -> Result<(), PortError> {
        self.kv
            .put(
                &keys::seen(&job.connector, job.update_id),
                b"1",
                Some(self.config.dedupe_ttl()),
            )
            .await?;
        self.kv.delete(key).await
    }

    /// Schedules the next try of a failed job with exponential backoff; `false` when its
    /// attempts are used up.
    pub async fn retry_later(&self, key: &str, job: &mut Job) -> Result<Option<u64>, PortError> {
        job.attempts += 1;
        if job.attempts >= self.config.max_attempts {
            return Ok(None);
        }
        let delay = self.config.backoff_secs.saturating_mul(1000) << (job.attempts - 1).min(16);
        // Saturating: a huge `backoff_secs` waits "forever" rather than overflowing (found
        // with the config fuzz target).
        job.not_before_ms = self.clock.now_ms().saturating_add(delay);
        self.save(key, job).await?;
        Ok(Some(job.not_before_ms))
    }

    /// Puts a job off until `until_ms` without counting an attempt: it did not fail, it
    /// waits its turn (the outbound limiter's next slot).
    pub async fn defer(&self, key: &str, job: &mut Job, until_ms: u64) -> Result<u64, PortError> {
        job.not_before_ms = until_ms;
        self.save(key, job).await?;
        Ok(until_ms)
    }

    pub async fn try_lease(&self, lane: &Lane, owner: &str) -> Result<bool, PortError> {
        self.kv
            .put_if_absent(&keys::lease(lane), owner.as_bytes(), Some(LEASE_TTL))
            .await
    }

    /// Extends our lease, or takes the lane again if it lapsed and nobody else took it.
    /// `false`: another drainer holds the lane; stop without writing.
    pub async fn hold(&self, lease: Lease<'_>) -> Result<bool, PortError> {
        let key = keys::lease(lease.lane);
        let b = lease.owner.as_bytes();
        Ok(self
            .kv
            .compare_and_swap(&key, Some(b), Some(b), Some(LEASE_TTL))
            .await?
            || self.kv.put_if_absent(&key, b, Some(LEASE_TTL)).await?)
    }

    pub async fn release(&self, lane: &Lane, owner: &str) -> Result<(), PortError> {
        self.kv
            .compare_and_swap(&keys::lease(lane), Some(owner.as_bytes()), None, None)
            .await
            .map(drop)
    }

    /// Drops every lease. Only for a process that knows no other drainer can be alive, such
    /// as the native binary at start-up (one process per data directory): a crashed run's
    /// leases would otherwise hold its lanes until they lapse.
    pub async fn clear_leases(&self) -> Result<usize, PortError> {
        let leases = self.kv.list(keys::LEASES, 10_000).await?;
        for k in &leases {
            self.kv.delete(k).await?;
        }
        Ok(leases.len())
    }

    /// Lanes with pending jobs, at most `limit` of them: one listing per lane, each skipping
    /// past every job of the lane before, so a lane with thousands of pending jobs never
    /// hides the others.
    pub async fn lanes(&self, limit: usize) -> Result<Vec<Lane>, PortError> {
        let mut lanes = Vec::new();
        let mut after = String::new();
        while lanes.len() < limit {
            let Some(key) = self
                .kv
                .list_after(keys::INBOX, &after, 1)
                .await?
                .into_iter()
                .next()
            else {
                break;
            };
            let Some((lane, _)) = key
                .strip_prefix(keys::INBOX)
                .and_then(|rest| rest.rsplit_once('/'))
            else {
                after = key; // not a job key: step over it
                continue;
            };
            let lane = Lane::new(lane);
            // '~' sorts after the digits of every update id: past all of this lane's jobs.
            after = format!("{}~", keys::lane_jobs(&lane));
            lanes.push(lane);
        }
        Ok(lanes)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use clawless_platform::{FakeClock, MemoryKv};
    use futures::executor::block_on;
    use serde_json::Value;

    #[test]
    fn huge_settings_saturate_instead_of_overflowing() {
        // Found with the config fuzz target: `dedupe_hours * 3600` and `now + backoff`
        // overflowed for settings near u64::MAX.
        let clock = Arc::new(FakeClock::new(1_700_000_000_000));
        let inbox = Inbox {
            kv: Arc::new(MemoryKv::new(clock.clone())),
            clock,
            config: InboxConfig {
                max_attempts: 4,
                backoff_secs: u64::MAX,
                dedupe_hours: u64::MAX,
            },
        };
        let mut job = Job::new("main".into(), 1, Value::Null, 0);
        let lane = Lane::new("main:1");
        let key = keys::job(&lane, 1);
        block_on(async {
            assert!(inbox.accept(&lane, &job).await.unwrap());
            assert_eq!(
                inbox.retry_later(&key, &mut job).await.unwrap(),
                Some(u64::MAX)
            );
            inbox.finish(&key, &job).await.unwrap();
            assert!(!inbox.accept(&lane, &job).await.unwrap(), "still seen");
        });
    }
}
