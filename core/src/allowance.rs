//! What the current invocation may still spend. A serverless invocation ends at a wall-clock
//! limit (a Worker's wait-until work about 30 s after the response, a queue consumer's after
//! 15 minutes; a Lambda at its timeout) and may make only so many outbound requests (a Worker
//! on the free plan: 50). The shell says so when it drains ([`Limits`]). The drain then
//! begins a job, a model call or a tool call only when it can expect to finish it with time
//! and requests to spare; otherwise the turn stays in its job (kept after every step, see
//! `turn/progress.rs`) and the lane is handed on ([`crate::Drained::HandOff`]) for the shell
//! to drain at once in a fresh invocation. A model call still under way near the end is given
//! up and made again there (it has no effect to repeat). Typing and previews spend only what
//! the steps leave. Native has no limits. A sub-agent's steps ask the same allowance (it
//! reaches the `spawn` tool in its `ToolContext`), so a child stops as its parent would.
//!
//! Requests are counted at the Http port ([`Counted`]), storage calls at the Kv, Files,
//! Vectors and TextIndex ports ([`count_storage`]), both for the whole app: invocations that
//! share an isolate count each other's too, so a bounded drain errs towards handing on early.
//! A step's audit entry is written when its turn pauses or answers: each step owes one storage
//! call from its start, and a pause writes the books of its invocation's steps, so the last
//! invocation of a long turn does not write every step's.
//!
//! Storage calls count on a Worker. Cloudflare's Workers limits
//! (<https://developers.cloudflare.com/workers/platform/limits/#subrequests>, updated
//! 2026-02-11) call a subrequest "any request that a Worker makes to either Internet
//! resources using the Fetch API or requests to other Cloudflare services like R2, KV, or
//! D1"; the free plan allows 50 a invocation to the Internet, 1,000 to Cloudflare's services.
//! D1's own limits (<https://developers.cloudflare.com/d1/platform/limits/>) allow 50 "queries
//! per Worker invocation" on the free plan, 1,000 on Workers Paid. So a Worker's D1 queries
//! have a limit of their own ([`Limits::storage`]), apart from its fetches ([`Limits::requests`]).
//! Each port call is counted as one query: the D1 adapters make one round trip a call (a
//! batch being one), but for a Vectors upsert on D1 (two, made when memory is indexed) and
//! TextIndex `texts` (one per group of ids: one for a turn's recall); a Vectorize call is
//! counted too, though it falls in the 1,000, which errs early. The reserves are measured in
//! `core/tests/storage_allowance.rs`.
//! Lambda limits neither; native has no limits.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest, HttpResponse, HttpStreamResponse, PortError};

mod stored;

pub use stored::count_storage;

/// What a shell's invocation may spend from the moment it starts draining.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Wall time left (`None`: no limit).
    pub wall: Option<Duration>,
    /// Outbound requests left (`None`: no limit).
    pub requests: Option<u64>,
    /// Storage calls left (`None`: no limit): a Worker's D1 queries (see the module
    /// documentation).
    pub storage: Option<u64>,
}

/// Time kept back after the last step: saving, sending the answer, releasing the lane.
pub const RESERVE_TIME: Duration = Duration::from_secs(4);
/// Requests kept back after the last step: the answer's parts and a retry of one.
pub const RESERVE_REQUESTS: u64 = 6;
/// What a model call is expected to take before one has been seen in this invocation.
pub const MODEL_GUESS: Duration = Duration::from_secs(15);
/// What a tool call is expected to take before one of its tool has been seen (at most its
/// timeout).
pub const TOOL_GUESS: Duration = Duration::from_secs(10);
/// Requests a model call may make (the call, a retry or the next model, "typing…").
const MODEL_REQUESTS: u64 = 3;
/// Requests a tool call may make (an MCP session, a redirect, …).
const TOOL_REQUESTS: u64 = 4;
/// Storage calls kept back after the last step: the answer's checkpoint, the session, the
/// books, the job's end and the lane's release (a plain text turn makes 29 after its model
/// call, `core/tests/storage_allowance.rs`), or the books and the kept state of a pause.
pub const RESERVE_STORAGE: u64 = 30;
/// Storage calls a model call's step may make: its progress kept, the lease renewed and its
/// audit entry (owed from its start, see [`Allowance::storage_left`]).
const MODEL_STORAGE: u64 = 3;
/// Storage calls a tool call's step may make: its ledger entry, its result kept, the lease
/// renewed, the tool's own (memory, files, reminders) and its audit entry.
const TOOL_STORAGE: u64 = 7;
/// The stretch over which previews spread the requests they may make.
const PREVIEW_HORIZON: Duration = Duration::from_secs(120);

/// A piece of work the drain is about to begin.
#[derive(Debug, Clone, Copy)]
pub enum Work<'a> {
    /// The next job of the lane.
    Job,
    /// A model call.
    Model,
    /// A call of tool `name`, which times out after `timeout`.
    Tool { name: &'a str, timeout: Duration },
}

impl Work<'_> {
    fn key(&self) -> &str {
        match self {
            Work::Job | Work::Model => "",
            Work::Tool { name, .. } => name,
        }
    }
}

/// What one invocation may still spend (see the module documentation). Shared by everything
/// its drain does, sub-agents included: a clone is the same allowance (it reaches a tool in
/// its [`crate::tools::ToolContext`]); [`Allowance::unbounded`] where there are no limits.
#[derive(Debug, Clone)]
pub struct Allowance {
    /// The instant (Clock ms) the invocation ends.
    until_ms: Option<u64>,
    /// Requests it may make in all.
    requests: Option<u64>,
    counter: Arc<AtomicU64>,
    /// The counter when it began.
    start: u64,
    /// Storage calls it may make in all.
    storage: Option<u64>,
    /// The storage calls counted (see [`count_storage`]) and their count when it began.
    stored: (Arc<AtomicU64>, u64),
    /// Storage calls the steps begun owe: each step's audit entry, written when its turn
    /// pauses or answers. Never paid back: the entries written are counted too, so a later
    /// job of the invocation errs towards handing on early (jobs of a sweep run side by side).
    owed: Arc<AtomicU64>,
    /// Whether a piece of work has begun: the first always may, so each invocation gets on.
    begun: Arc<AtomicBool>,
    /// The longest each kind of work took so far in this invocation (ms; "" = model calls).
    took: Arc<Mutex<BTreeMap<String, u64>>>,
}

/// Two allowances are equal when they are the same one (clones of it).
impl PartialEq for Allowance {
    fn eq(&self, other: &Allowance) -> bool {
        Arc::ptr_eq(&self.begun, &other.begun)
    }
}

impl Eq for Allowance {}

impl Default for Allowance {
    fn default() -> Self {
        Allowance::unbounded()
    }
}

impl Allowance {
    /// No limits (native, tests).
    pub fn unbounded() -> Allowance {
        Allowance::new(Limits::default(), 0, &Arc::default())
    }

    /// `limits` from `now_ms`, counting requests on `counter`.
    pub fn new(limits: Limits, now_ms: u64, counter: &Arc<AtomicU64>) -> Allowance {
        Allowance {
            until_ms: limits
                .wall
                .map(|w| now_ms.saturating_add(u64::try_from(w.as_millis()).unwrap_or(u64::MAX))),
            requests: limits.requests,
            counter: counter.clone(),
            start: counter.load(Ordering::Relaxed),
            storage: limits.storage,
            stored: (Arc::default(), 0),
            owed: Arc::default(),
            begun: Arc::default(),
            took: Arc::default(),
        }
    }

    /// The same, its storage calls counted on `stored` (see [`count_storage`]).
    pub fn counting_storage(mut self, stored: &Arc<AtomicU64>) -> Allowance {
        self.stored = (stored.clone(), stored.load(Ordering::Relaxed));
        self
    }

    pub fn is_bounded(&self) -> bool {
        self.until_ms.is_some() || self.requests.is_some() || self.storage.is_some()
    }

    /// Storage calls made since it began (by anything in this app).
    pub fn storage_used(&self) -> u64 {
        let (count, start) = &self.stored;
        count.load(Ordering::Relaxed).saturating_sub(*start)
    }

    /// Storage calls it may still make, less those its steps owe.
    pub fn storage_left(&self) -> Option<u64> {
        let owed = self.owed.load(Ordering::Relaxed);
        self.storage
            .map(|n| n.saturating_sub(self.storage_used()).saturating_sub(owed))
    }

    /// Requests made since it began (by anything in this app).
    pub fn requests_used(&self) -> u64 {
        self.counter
            .load(Ordering::Relaxed)
            .saturating_sub(self.start)
    }

    /// Requests it may still make.
    pub fn requests_left(&self) -> Option<u64> {
        self.requests
            .map(|n| n.saturating_sub(self.requests_used()))
    }

    /// Time left at `now_ms`.
    pub fn time_left(&self, now_ms: u64) -> Option<Duration> {
        self.until_ms
            .map(|until| Duration::from_millis(until.saturating_sub(now_ms)))
    }

    /// The instant after which work under way is given up (the end less [`RESERVE_TIME`]).
    pub fn give_up_at(&self) -> Option<u64> {
        let reserve = u64::try_from(RESERVE_TIME.as_millis()).unwrap_or(u64::MAX);
        self.until_ms.map(|until| until.saturating_sub(reserve))
    }

    /// What `work` is expected to take: the longest of its kind seen so far, else a guess.
    fn expected(&self, work: Work<'_>) -> (Duration, u64, u64) {
        let seen = self
            .took
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(work.key())
            .copied()
            .map(Duration::from_millis);
        match work {
            Work::Job | Work::Model => (seen.unwrap_or(MODEL_GUESS), MODEL_REQUESTS, MODEL_STORAGE),
            Work::Tool { timeout, .. } => (
                seen.unwrap_or(TOOL_GUESS.min(timeout)).min(timeout),
                TOOL_REQUESTS,
                TOOL_STORAGE,
            ),
        }
    }

    /// Whether `work` may begin at `now_ms`: the first work of an invocation always may;
    /// later work when it is expected to end with [`RESERVE_TIME`], [`RESERVE_REQUESTS`] and
    /// [`RESERVE_STORAGE`] to spare. A model or tool call that may begin owes its audit entry
    /// from then on.
    pub fn may_begin(&self, now_ms: u64, work: Work<'_>) -> bool {
        let may = self.fits(now_ms, work);
        if may && !matches!(work, Work::Job) {
            // The step's audit entry, written when its turn pauses or answers.
            self.owed.fetch_add(1, Ordering::Relaxed);
        }
        may
    }

    /// Whether `work` would begin now ([`Allowance::may_begin`]), nothing noted.
    pub fn may_fit(&self, now_ms: u64, work: Work<'_>) -> bool {
        !self.begun.load(Ordering::Relaxed) || !self.is_bounded() || self.fits_left(now_ms, work)
    }

    /// Whether `work` fits what is left (see [`Allowance::may_begin`]).
    fn fits(&self, now_ms: u64, work: Work<'_>) -> bool {
        if !self.begun.swap(true, Ordering::Relaxed) || !self.is_bounded() {
            return true;
        }
        self.fits_left(now_ms, work)
    }

    /// Whether `work` is expected to end with the reserves to spare.
    fn fits_left(&self, now_ms: u64, work: Work<'_>) -> bool {
        let (time, requests, storage) = self.expected(work);
        let time_ok = self
            .time_left(now_ms)
            .is_none_or(|left| left >= time + RESERVE_TIME);
        let requests_ok = self
            .requests_left()
            .is_none_or(|left| left >= requests + RESERVE_REQUESTS);
        let storage_ok = self
            .storage_left()
            .is_none_or(|left| left >= storage + RESERVE_STORAGE);
        time_ok && requests_ok && storage_ok
    }

    /// Notes that `work` took `ms`, for what later work of its kind is expected to take.
    pub fn took(&self, work: Work<'_>, ms: u64) {
        if !self.is_bounded() {
            return;
        }
        let mut took = self.took.lock().unwrap_or_else(|e| e.into_inner());
        let longest = took.entry(work.key().to_owned()).or_default();
        *longest = (*longest).max(ms);
    }

    /// Whether a request no step needs ("typing…") may be made: one that leaves what the
    /// next step and the answer need.
    pub fn may_spare(&self) -> bool {
        self.requests_left()
            .is_none_or(|left| left > MODEL_REQUESTS + TOOL_REQUESTS + RESERVE_REQUESTS)
    }

    /// How long to wait between previews so the requests they may make last: `base` when
    /// there is no limit, else the spare requests spread over what is left of the invocation
    /// (at most [`PREVIEW_HORIZON`]); `None` when none is spare.
    pub fn preview_every(&self, base: Duration, now_ms: u64) -> Option<Duration> {
        let Some(left) = self.requests_left() else {
            return Some(base);
        };
        let spare = left.saturating_sub(MODEL_REQUESTS + TOOL_REQUESTS + RESERVE_REQUESTS);
        if spare == 0 {
            return None;
        }
        let horizon = self
            .time_left(now_ms)
            .map_or(PREVIEW_HORIZON, |t| t.min(PREVIEW_HORIZON));
        let spread = horizon / u32::try_from(spare).unwrap_or(u32::MAX);
        Some(base.max(spread))
    }
}

/// An [`Http`] that counts the requests it sends (see [`Allowance`]).
pub struct Counted {
    pub inner: Arc<dyn Http>,
    pub count: Arc<AtomicU64>,
}

#[async_trait]
impl Http for Counted {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, PortError> {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.inner.send(request).await
    }

    async fn send_streaming(&self, request: HttpRequest) -> Result<HttpStreamResponse, PortError> {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.inner.send_streaming(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thirty_seconds(counter: &Arc<AtomicU64>) -> Allowance {
        let limits = Limits {
            wall: Some(Duration::from_secs(30)),
            requests: Some(50),
            ..Limits::default()
        };
        Allowance::new(limits, 1_000, counter)
    }

    #[test]
    fn the_first_work_always_begins_then_only_what_fits() {
        let counter = Arc::default();
        let a = thirty_seconds(&counter);
        let wait = Work::Tool {
            name: "wait",
            timeout: Duration::from_secs(30),
        };
        // At the very end, the first work still begins: each invocation gets on.
        assert!(a.may_begin(30_000, wait));
        a.took(wait, 10_000);
        // 20 s left: a 10 s tool and the reserve fit.
        assert!(a.may_begin(11_000, wait));
        // 10 s left: they do not.
        assert!(!a.may_begin(21_000, wait));
        // A tool not seen yet is expected to take its guess, at most its timeout.
        let quick = Work::Tool {
            name: "quick",
            timeout: Duration::from_secs(2),
        };
        assert!(a.may_begin(21_000, quick));
    }

    #[test]
    fn requests_are_counted_and_kept_back() {
        let counter = Arc::new(AtomicU64::new(7));
        let a = thirty_seconds(&counter);
        assert!(a.may_begin(1_000, Work::Model));
        counter.fetch_add(38, Ordering::Relaxed);
        assert_eq!(a.requests_left(), Some(12));
        assert!(a.may_begin(1_000, Work::Model), "3 + 6 of 12");
        assert!(!a.may_spare(), "typing would eat into the next step");
        counter.fetch_add(4, Ordering::Relaxed);
        assert!(!a.may_begin(1_000, Work::Model), "3 + 6 of 8");
        assert_eq!(a.preview_every(Duration::from_millis(500), 1_000), None);
    }

    #[test]
    fn storage_calls_are_counted_and_kept_back() {
        let requests = Arc::default();
        let stored = Arc::new(AtomicU64::new(100));
        let limits = Limits {
            storage: Some(50),
            ..Limits::default()
        };
        let a = Allowance::new(limits, 0, &requests).counting_storage(&stored);
        assert!(a.is_bounded());
        assert!(a.may_begin(0, Work::Job));
        stored.fetch_add(50 - MODEL_STORAGE - RESERVE_STORAGE, Ordering::Relaxed);
        assert!(
            a.may_begin(0, Work::Model),
            "what a model step and the reserve need"
        );
        let left = MODEL_STORAGE + RESERVE_STORAGE - 1;
        assert_eq!(
            a.storage_left(),
            Some(left),
            "the step owes its audit entry"
        );
        assert!(!a.may_begin(0, Work::Model));
        assert_eq!(
            a.storage_left(),
            Some(left),
            "a step not begun owes nothing"
        );
        let tool = Work::Tool {
            name: "t",
            timeout: Duration::from_secs(1),
        };
        assert!(!a.may_fit(0, tool));
        assert_eq!(
            a.storage_left(),
            Some(left),
            "asking whether it fits notes nothing"
        );
        assert_eq!(a.requests_left(), None, "requests are not limited here");
    }

    #[test]
    fn previews_spread_what_is_spare() {
        let counter = Arc::default();
        let a = thirty_seconds(&counter);
        let base = Duration::from_millis(500);
        // 50 - 13 = 37 spare over the 30 s left.
        let every = a.preview_every(base, 1_000).unwrap();
        assert_eq!(every, Duration::from_secs(30) / 37);
        assert_eq!(
            Allowance::unbounded().preview_every(base, 1_000),
            Some(base)
        );
        let no_time = Allowance::new(
            Limits {
                wall: None,
                requests: Some(23),
                ..Limits::default()
            },
            0,
            &counter,
        );
        assert_eq!(no_time.preview_every(base, 0), Some(PREVIEW_HORIZON / 10));
    }

    #[test]
    fn unbounded_always_begins() {
        let a = Allowance::unbounded();
        for _ in 0..3 {
            assert!(a.may_begin(u64::MAX, Work::Model));
        }
        assert!(a.may_spare());
        assert_eq!(a.give_up_at(), None);
    }
}
