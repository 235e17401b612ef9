//! What the app shows of itself beside the event bus: `/metrics` (the counts of every
//! instance, see [`crate::events::metrics`], plus the inbox's backlog and the subscribers'
//! drops), the stores as the cockpit shows them ([`Overview`]), and the keeping of this
//! instance's counts and events in the Kv (`journal.rs`), which is how a cockpit attached to
//! a Worker or a Lambda (`clawless tui --remote`) sees them.

mod journal;

pub use journal::{EventPage, JOURNAL_CAP};

use std::sync::Mutex;
use std::time::Duration;

use clawless_platform::{Kv, KvExt};

use crate::app::Admin;
use crate::events::metrics::Snapshot;
use crate::keys;

/// How long an instance's stored counts outlive its last write.
const KEPT: Duration = Duration::from_secs(3 * 86_400);
/// The most instances' counts summed in one scrape.
const MAX_INSTANCES: usize = 200;
/// The most inbox jobs counted for the backlog gauge.
const MAX_BACKLOG: usize = 10_000;

impl Admin<'_> {
    /// The Prometheus text of `/metrics`: this instance's live counts plus every other kept
    /// instance's, then the gauges (the inbox backlog and its lanes, the instances summed)
    /// and the events each subscriber dropped. A storage failure leaves the stored parts out
    /// (logged); the live counts are always there.
    pub async fn metrics_text(self) -> String {
        // Kept before shown: a value Prometheus has seen is never undercut after a crash.
        self.keep_metrics().await;
        let mut sum = self.app.events.metrics.snapshot();
        let mine = keys::metrics(&self.app.instance);
        let mut instances = 1;
        match self
            .app
            .platform
            .kv
            .list(keys::METRICS, MAX_INSTANCES)
            .await
        {
            Ok(stored) => {
                for key in stored.iter().filter(|k| **k != mine) {
                    match self.app.platform.kv.get_json::<Snapshot>(key).await {
                        Ok(Some(s)) => {
                            sum.merge(&s);
                            instances += 1;
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!(key, error = %e, "stored metrics unreadable"),
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "stored metrics not listed"),
        }
        let mut gauges = vec![(
            "clawless_instances",
            "Instances whose counts are summed here.",
            Vec::new(),
            instances as f64,
        )];
        match self.app.platform.kv.list(keys::INBOX, MAX_BACKLOG).await {
            Ok(jobs) => {
                let lanes: std::collections::BTreeSet<&str> = jobs
                    .iter()
                    .filter_map(|k| k.strip_prefix(keys::INBOX)?.rsplit_once('/'))
                    .map(|(lane, _)| lane)
                    .collect();
                gauges.push((
                    "clawless_backlog_jobs",
                    "Jobs waiting in the inbox (counted up to 10,000).",
                    Vec::new(),
                    jobs.len() as f64,
                ));
                gauges.push((
                    "clawless_backlog_lanes",
                    "Lanes (chats) with jobs waiting.",
                    Vec::new(),
                    lanes.len() as f64,
                ));
            }
            Err(e) => tracing::warn!(error = %e, "inbox not listed for the backlog"),
        }
        for (name, dropped) in self.app.events.drops() {
            gauges.push((
                "clawless_events_dropped",
                "Events a live subscriber of this instance did not read in time.",
                vec![("subscriber", name)],
                dropped as f64,
            ));
        }
        sum.render(&gauges)
    }

    /// Keeps this instance's counts in the Kv when they changed since last kept (the
    /// serverless shells' instances come and go; `/metrics` sums what they kept), and its
    /// events since the last time (see `journal.rs`). Failures are logged.
    pub async fn keep_observations(self) {
        self.keep_journal().await;
        self.keep_metrics().await;
    }

    /// Takes over the counts that earlier processes of this store kept (their instance
    /// names starting with `prefix`, this one's excepted): added to this instance's, kept
    /// under its name, then removed. For a shell with one process per store at a time (native),
    /// called at start, so its counters go on across restarts instead of counting again.
    /// Says how many instances it took over; failures are logged and leave their counts where
    /// they are (still summed).
    pub async fn adopt_metrics(self, prefix: &str) -> usize {
        let kv = &self.app.platform.kv;
        let mine = keys::metrics(&self.app.instance);
        let stored = match kv.list(keys::METRICS, MAX_INSTANCES).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "stored metrics not listed");
                return 0;
            }
        };
        let mut adopted = Vec::new();
        let mut theirs = Snapshot::default();
        for key in stored.iter().filter(|k| **k != mine) {
            let ours = key
                .strip_prefix(keys::METRICS)
                .is_some_and(|instance| instance.starts_with(prefix));
            if !ours {
                continue;
            }
            match kv.get_json::<Snapshot>(key).await {
                Ok(Some(s)) => {
                    theirs.merge(&s);
                    adopted.push(key.clone());
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(key, error = %e, "stored metrics unreadable"),
            }
        }
        if adopted.is_empty() {
            return 0;
        }
        // Kept under this name before the old ones go: a crash between the two counts them
        // twice (too high), never loses them; a failed write leaves everything as it was.
        let mut combined = self.app.events.metrics.snapshot();
        combined.merge(&theirs);
        if let Err(e) = kv.put_json(&mine, &combined, Some(KEPT)).await {
            tracing::warn!(error = %e, "adopted metrics not kept: left where they are");
            return 0;
        }
        self.app.events.metrics.adopt(&theirs);
        for key in &adopted {
            if let Err(e) = kv.delete(key).await {
                tracing::warn!(key, error = %e, "adopted metrics not removed");
            }
        }
        tracing::info!(
            instances = adopted.len(),
            "took over the counts of earlier processes"
        );
        adopted.len()
    }

    async fn keep_metrics(self) {
        let now = self.app.events.metrics.snapshot();
        let kv = &*self.app.platform.kv;
        keep_counts(kv, &self.app.instance, now, &self.app.metrics_kept).await;
    }
}

/// Keeps `now` as `instance`'s counts in the Kv (three days) unless `kept`, what was kept
/// last, is the same; `kept` then holds `now`. A failure is logged: the next call tries again.
/// The app's instances and the front ([`crate::front`]) keep theirs through it.
pub(crate) async fn keep_counts(
    kv: &dyn Kv,
    instance: &str,
    now: Snapshot,
    kept: &Mutex<Option<Snapshot>>,
) {
    if kept.lock().unwrap_or_else(|e| e.into_inner()).as_ref() == Some(&now) {
        return;
    }
    match kv
        .put_json(&keys::metrics(instance), &now, Some(KEPT))
        .await
    {
        Ok(()) => *kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(now),
        Err(e) => tracing::warn!(instance, error = %e, "metrics not kept"),
    }
}

/// What the terminal cockpit shows of the stores: sessions, the inbox per lane, reminders
/// due. Bounded: at most [`OVERVIEW_ROWS`] of each.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Overview {
    /// `(session key, messages, last update ms)`.
    pub sessions: Vec<(String, usize, u64)>,
    pub lanes: Vec<LaneView>,
    /// `(at ms, connector, chat, reminder id)`, soonest first.
    pub due: Vec<(u64, String, i64, u64)>,
}

/// One lane with work waiting.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LaneView {
    pub lane: String,
    pub jobs: usize,
    /// The head job's trace id.
    pub head: String,
    /// The tool the head waits on an approval for.
    pub waiting_for: Option<String>,
    /// The head's failed attempts, and when it is tried again (ms; 0: now).
    pub attempts: u32,
    pub not_before_ms: u64,
    /// The head is a turn cut by a crash or a failure, going on from a kept step.
    pub resuming: bool,
}

/// Rows of each kind in an [`Overview`].
pub const OVERVIEW_ROWS: usize = 20;

impl Admin<'_> {
    /// The stores as the cockpit shows them (see [`Overview`]).
    pub async fn overview(self) -> Result<Overview, clawless_platform::PortError> {
        let kv = &*self.app.platform.kv;
        let mut out = Overview::default();
        for key in kv.list(keys::SESSIONS, OVERVIEW_ROWS).await? {
            let name = key.strip_prefix(keys::SESSIONS).unwrap_or(&key).to_owned();
            let s = crate::session::load(kv, &crate::ids::SessionKey::new(&name)).await?;
            out.sessions.push((name, s.messages.len(), s.updated_ms));
        }
        let jobs = kv.list(keys::INBOX, MAX_BACKLOG).await?;
        let mut lanes: Vec<(String, Vec<&String>)> = Vec::new();
        for key in &jobs {
            let Some((lane, _)) = key
                .strip_prefix(keys::INBOX)
                .and_then(|r| r.rsplit_once('/'))
            else {
                continue;
            };
            match lanes.last_mut() {
                Some((l, keys)) if l == lane => keys.push(key),
                _ => lanes.push((lane.to_owned(), vec![key])),
            }
        }
        for (lane, held) in lanes.into_iter().take(OVERVIEW_ROWS) {
            let mut view = LaneView {
                lane,
                jobs: held.len(),
                ..Default::default()
            };
            if let Some(head) = held.first() {
                if let Some(job) = kv.get_json::<crate::inbox::Job>(head).await? {
                    view.head = crate::turn::trace(&job);
                    view.waiting_for = job.suspended().map(|s| s.call.name.clone());
                    view.attempts = job.attempts;
                    view.not_before_ms = job.not_before_ms;
                    view.resuming = job.running().is_some();
                }
            }
            out.lanes.push(view);
        }
        for key in kv.list(keys::DUE, OVERVIEW_ROWS).await? {
            if let Some((at, connector, chat, id)) = keys::parse_due(&key) {
                out.due.push((at, connector.to_string(), chat, id));
            }
        }
        Ok(out)
    }
}

impl Admin<'_> {
    /// This instance's live counts (the cockpit's summary).
    pub fn counts(self) -> Snapshot {
        self.app.events.metrics.snapshot()
    }

    /// Now, on the app's clock (ms).
    pub fn now_ms(self) -> u64 {
        self.app.platform.clock.now_ms()
    }
}
