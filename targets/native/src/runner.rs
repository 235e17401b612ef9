//! The background drainer: lanes named by the ack path are drained on tokio tasks, a lane
//! whose head waits for a retry is drained again at the time the core gave (3, 6, 12 s
//! after failures, not at the next sweep), a timer runs the scheduled job (`App::scheduled`:
//! leftovers, expired Kv rows, memory files edited by hand), another wakes at the next
//! reminder's second (`App::fire_due`), and shutdown waits for work in flight.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clawless_core::{App, Drained, Lane};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// How often pending work is looked for when nothing asked.
pub const SWEEP_EVERY: Duration = Duration::from_secs(15);
/// How this shell's instance names begin (`native-<pid>-<ms>`): the counts a run takes
/// over at start are those of instances so named.
pub const INSTANCE_PREFIX: &str = "native-";

/// How long a local MCP program may take to start when the bot starts (`npx -y` fetching its
/// package took 16 s here).
pub const PROGRAM_START: Duration = Duration::from_secs(120);

#[derive(Clone)]
pub struct Kicker {
    tx: mpsc::UnboundedSender<Lane>,
}

impl Kicker {
    /// Asks for `lane` to be drained soon.
    pub fn kick(&self, lane: Lane) {
        let _ = self.tx.send(lane);
    }
}

pub struct Runner {
    rx: mpsc::UnboundedReceiver<Lane>,
    app: Arc<App>,
}

pub fn new(app: Arc<App>) -> (Kicker, Runner) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Kicker { tx }, Runner { rx, app })
}

/// Lanes waiting for a retry, each with when it is due: drained again then.
#[derive(Default)]
struct Retries(Vec<(tokio::time::Instant, Lane)>);

impl Retries {
    /// Keeps the earliest time asked for a lane.
    fn add(&mut self, lane: Lane, at: tokio::time::Instant) {
        match self.0.iter_mut().find(|(_, l)| *l == lane) {
            Some(entry) => entry.0 = entry.0.min(at),
            None => self.0.push((at, lane)),
        }
    }

    fn next(&self) -> Option<tokio::time::Instant> {
        self.0.iter().map(|(at, _)| *at).min()
    }

    /// The lanes due by now, taken out.
    fn take_due(&mut self) -> Vec<Lane> {
        let now = tokio::time::Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = self.0.drain(..).partition(|(at, _)| *at <= now);
        self.0 = later;
        due.into_iter().map(|(_, lane)| lane).collect()
    }
}

impl Runner {
    /// Runs until `stop` resolves, then waits up to `grace` for drains in flight. Pending work
    /// stays in the inbox for the next start.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>, grace: Duration) {
        let mut tasks = JoinSet::new();
        // One process per data directory: leases left by a killed run are stale. The first
        // sweep below then resumes whatever that run left pending.
        match self.app.admin().clear_leases().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(leases = n, "cleared leases of a previous run"),
            Err(e) => tracing::warn!(error = %e, "could not clear stale leases"),
        }
        // Likewise the counts earlier runs kept are this run's to go on from: `/metrics`
        // continues across restarts instead of counting again (see `Admin::adopt_metrics`).
        self.app.admin().adopt_metrics(INSTANCE_PREFIX).await;
        // Local MCP programs start now, beside everything else, with time to fetch themselves
        // (not a drain: a stop does not wait for it).
        let app = self.app.clone();
        tokio::spawn(async move {
            for line in app.warm_programs(PROGRAM_START).await {
                tracing::info!("{line}");
            }
        });
        let mut next_sweep = tokio::time::Instant::now();
        // When the next reminder is due, as the last drain, sweep or firing saw it: a turn
        // that set one tells us through its drain.
        let (due_tx, mut due_rx) = mpsc::unbounded_channel::<Option<u64>>();
        let mut next_fire: Option<tokio::time::Instant> = None;
        // Lanes whose drain said when to try again.
        let (retry_tx, mut retry_rx) = mpsc::unbounded_channel::<(Lane, u64)>();
        let mut retries = Retries::default();
        let (sweep_tx, mut sweep_rx) = mpsc::unbounded_channel::<u64>();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                Some(lane) = self.rx.recv() => {
                    spawn_drain(&mut tasks, &self.app, lane, &due_tx, &retry_tx);
                }
                Some((lane, at)) = retry_rx.recv() => retries.add(lane, instant_of(at)),
                Some(at) = sweep_rx.recv() => next_sweep = next_sweep.min(instant_of(at)),
                _ = tokio::time::sleep_until(retries.next().unwrap_or(next_sweep)), if retries.next().is_some() => {
                    for lane in retries.take_due() {
                        spawn_drain(&mut tasks, &self.app, lane, &due_tx, &retry_tx);
                    }
                }
                _ = tokio::time::sleep_until(next_sweep) => {
                    let (app, due, sweep) = (self.app.clone(), due_tx.clone(), sweep_tx.clone());
                    tasks.spawn(async move {
                        // The sweep drains lanes too (a kicked lane may have been drained
                        // by it first): the next sweep comes no later than the retry it saw.
                        if let Some(at) = app.scheduled().await {
                            let _ = sweep.send(at);
                        }
                        let _ = due.send(app.next_due().await);
                    });
                    next_sweep = tokio::time::Instant::now() + SWEEP_EVERY;
                }
                Some(at) = due_rx.recv() => {
                    // Reports race each other: keep the earliest (an early wake finds nothing
                    // due and reports again), and never let a stale "none" cancel a wake.
                    if let Some(at) = at.map(instant_of) {
                        next_fire = Some(next_fire.map_or(at, |n| n.min(at)));
                    }
                }
                _ = tokio::time::sleep_until(next_fire.unwrap_or(next_sweep)), if next_fire.is_some() => {
                    next_fire = None;
                    let (app, due) = (self.app.clone(), due_tx.clone());
                    tasks.spawn(async move { let _ = due.send(app.fire_due().await); });
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        tracing::info!(
            in_flight = tasks.len(),
            "stopping: finishing work in flight"
        );
        let _ =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        // The counts and events of the last moments, kept for the next start.
        self.app.admin().keep_observations().await;
    }
}

/// The tokio instant of `at_ms` since the epoch (now, if it has passed).
fn instant_of(at_ms: u64) -> tokio::time::Instant {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    tokio::time::Instant::now() + Duration::from_millis(at_ms.saturating_sub(now_ms))
}

/// Drains `lane` on a task of `tasks`; then reports when the lane waits for a retry (to
/// `retry`) and when the next reminder is due (to `due`).
fn spawn_drain(
    tasks: &mut JoinSet<()>,
    app: &Arc<App>,
    lane: Lane,
    due: &mpsc::UnboundedSender<Option<u64>>,
    retry: &mpsc::UnboundedSender<(Lane, u64)>,
) {
    let (app, due, retry) = (app.clone(), due.clone(), retry.clone());
    tasks.spawn(async move {
        if let Some(at) = drain(&app, &lane).await {
            let _ = retry.send((lane, at));
        }
        // A reminder the turn created (its due time, not a listing of the due index).
        if let Some(at) = app.due_written() {
            let _ = due.send(Some(at));
        }
    });
}

/// Drains `lane`; when its head waits for a retry, when that is (ms since the epoch).
async fn drain(app: &App, lane: &Lane) -> Option<u64> {
    match app.drain(lane).await {
        Ok(Drained::RetryAt(at)) => {
            tracing::info!(%lane, retry_at = at, "lane waits for a retry");
            Some(at)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(%lane, error = %e, "drain failed; the sweep will retry");
            None
        }
    }
}
