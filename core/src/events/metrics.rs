//! Metrics from the event bus ([`crate::events`]): counters and histograms, counted as each
//! event is published, and shown in the Prometheus text exposition format (version 0.0.4) at
//! `/metrics`.
//!
//! A process counts what it saw. The serverless shells run many short instances, so each
//! instance also keeps its counts in the Kv (`metrics/<instance>`, written after its drains
//! and scheduled runs, kept three days since its last write); `/metrics` shows the sum over
//! every instance kept, this one's live counts in place of its stored ones. A scrape keeps
//! this instance's counts before it shows them, so no value once shown is undercut after the
//! process dies, even by `kill -9`. A native process, the only one of its store, adopts what
//! its predecessors kept at start ([`crate::app::Admin::adopt_metrics`]): its counters go on
//! across restarts. On the serverless shells an instance gone quiet for three days leaves the
//! sum, which Prometheus reads as a counter reset.
//!
//! Written by hand rather than with `prometheus-client`: the counts must be stored and summed
//! across instances, which its registry cannot do, and the format is a few lines of text. The
//! tests read it back with the `prometheus-parse` crate.
//!
//! Label values are bounded: at most [`MAX_LABEL`] characters, and past
//! [`MAX_SERIES`] series of one metric new label sets count under `other` (a model could
//! otherwise name a new tool on every call).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{Event, SHARDS};

/// The longest label value kept (characters).
pub const MAX_LABEL: usize = 64;
/// The most series of one metric; past it, new label sets count as `other`.
pub const MAX_SERIES: usize = 200;

/// What each metric is: name, type, help.
const METRICS: &[(&str, &str, &str)] = &[
    (
        "clawless_updates_accepted_total",
        "counter",
        "Updates stored in the inbox.",
    ),
    (
        "clawless_updates_dropped_total",
        "counter",
        "Updates not stored, by reason.",
    ),
    (
        "clawless_ack_seconds",
        "histogram",
        "Time from a webhook's body to its acknowledgement.",
    ),
    (
        "clawless_turns_total",
        "counter",
        "Jobs ended, by outcome: answered, failed, waiting, nothing.",
    ),
    (
        "clawless_turn_seconds",
        "histogram",
        "Time from an update's acceptance to its turn's end.",
    ),
    (
        "clawless_model_calls_total",
        "counter",
        "Model calls, by model and outcome.",
    ),
    ("clawless_model_seconds", "histogram", "Model call latency."),
    (
        "clawless_tokens_total",
        "counter",
        "Model tokens, by direction: input (not read from the prompt cache), cached_input (read from it), output.",
    ),
    (
        "clawless_model_input_tokens_total",
        "counter",
        "Model input tokens, by model and whether the prompt cache held them (cache: hit or miss).",
    ),
    (
        "clawless_cost_usd_total",
        "counter",
        "Model spend in US dollars.",
    ),
    (
        "clawless_tool_calls_total",
        "counter",
        "Tool calls, by tool, decision and outcome.",
    ),
    (
        "clawless_approvals_total",
        "counter",
        "Approvals asked and how they were answered.",
    ),
    (
        "clawless_retries_total",
        "counter",
        "Failed turns scheduled for another try.",
    ),
    (
        "clawless_replies_sent_total",
        "counter",
        "Answer parts delivered to Telegram.",
    ),
    (
        "clawless_hooks_received_total",
        "counter",
        "Incoming webhook requests, by hook and result (accepted, duplicate, unauthorized, rate_limited, ...).",
    ),
    (
        "clawless_watch_checks_total",
        "counter",
        "Watch checks, by result (learned, not_modified, unchanged, changed, failed, put_off); only changed runs the model.",
    ),
    (
        "clawless_reminders_fired_total",
        "counter",
        "Reminders and tasks fired.",
    ),
    (
        "clawless_compactions_total",
        "counter",
        "Sessions compacted.",
    ),
    (
        "clawless_lane_drains_total",
        "counter",
        "Drains of a lane, by how they ended.",
    ),
];

const ACK_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];
const TURN_BUCKETS: &[f64] = &[0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// A gauge computed at scrape time: `(metric, help, labels, value)`.
pub type Gauge<'a> = (&'a str, &'a str, Vec<(&'a str, String)>, f64);

/// One histogram series: counts per bucket bound (not cumulative), the count and the sum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

/// Every series: `(metric, labels)` → value. Labels are rendered (`a="x",b="y"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(default)]
    pub counters: BTreeMap<String, BTreeMap<String, f64>>,
    #[serde(default)]
    pub histograms: BTreeMap<String, BTreeMap<String, Histogram>>,
}

impl Snapshot {
    fn add(&mut self, metric: &str, labels: &[(&str, &str)], by: f64, scratch: &mut String) {
        // On the ack path: a known series is found without allocating anything.
        if !self.counters.contains_key(metric) {
            self.counters.insert(metric.to_owned(), BTreeMap::new());
        }
        let Some(series) = self.counters.get_mut(metric) else {
            return;
        };
        render_into(scratch, labels);
        if let Some(v) = series.get_mut(scratch.as_str()) {
            *v += by;
            return;
        }
        *series
            .entry(bounded(series.len(), scratch.clone(), labels))
            .or_default() += by;
    }

    fn observe(
        &mut self,
        metric: &str,
        labels: &[(&str, &str)],
        bounds: &[f64],
        value: f64,
        scratch: &mut String,
    ) {
        if !self.histograms.contains_key(metric) {
            self.histograms.insert(metric.to_owned(), BTreeMap::new());
        }
        let Some(series) = self.histograms.get_mut(metric) else {
            return;
        };
        render_into(scratch, labels);
        let h = match series.contains_key(scratch.as_str()) {
            true => series.get_mut(scratch.as_str()),
            false => {
                let key = bounded(series.len(), scratch.clone(), labels);
                Some(series.entry(key).or_insert_with(|| Histogram {
                    bounds: bounds.to_vec(),
                    counts: vec![0; bounds.len()],
                    count: 0,
                    sum: 0.0,
                }))
            }
        };
        let Some(h) = h else {
            return;
        };
        if let Some(i) = h.bounds.iter().position(|b| value <= *b) {
            if let Some(c) = h.counts.get_mut(i) {
                *c += 1;
            }
        }
        h.count += 1;
        h.sum += value;
    }

    /// Adds `other`'s counts to these (another instance's).
    pub fn merge(&mut self, other: &Snapshot) {
        for (metric, series) in &other.counters {
            let mine = self.counters.entry(metric.clone()).or_default();
            for (labels, v) in series {
                *mine.entry(labels.clone()).or_default() += v;
            }
        }
        for (metric, series) in &other.histograms {
            let mine = self.histograms.entry(metric.clone()).or_default();
            for (labels, h) in series {
                let m = mine.entry(labels.clone()).or_insert_with(|| Histogram {
                    bounds: h.bounds.clone(),
                    counts: vec![0; h.bounds.len()],
                    count: 0,
                    sum: 0.0,
                });
                if m.bounds == h.bounds {
                    for (a, b) in m.counts.iter_mut().zip(&h.counts) {
                        *a += b;
                    }
                    m.count += h.count;
                    m.sum += h.sum;
                }
            }
        }
    }

    /// The value of a counter series (tests, the cockpit).
    pub fn counter(&self, metric: &str, labels: &[(&str, &str)]) -> f64 {
        self.counters
            .get(metric)
            .and_then(|s| s.get(&render_labels(labels)))
            .copied()
            .unwrap_or(0.0)
    }

    /// The sum of a counter over all its series.
    pub fn total(&self, metric: &str) -> f64 {
        self.counters.get(metric).map_or(0.0, |s| s.values().sum())
    }

    /// The exposition text, with `gauges` (`(metric, help, labels, value)`) after the rest.
    pub fn render(&self, gauges: &[Gauge<'_>]) -> String {
        let mut out = String::new();
        for (name, kind, help) in METRICS {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            if let Some(series) = self.counters.get(*name) {
                for (labels, v) in series {
                    let _ = writeln!(out, "{name}{} {}", braces(labels), number(*v));
                }
            }
            if let Some(series) = self.histograms.get(*name) {
                for (labels, h) in series {
                    let mut cumulative = 0;
                    for (bound, c) in h.bounds.iter().zip(&h.counts) {
                        cumulative += c;
                        let le = format!("le=\"{}\"", number(*bound));
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {cumulative}",
                            braces(&join(labels, &le))
                        );
                    }
                    let inf = join(labels, "le=\"+Inf\"");
                    let _ = writeln!(out, "{name}_bucket{} {}", braces(&inf), h.count);
                    let _ = writeln!(out, "{name}_sum{} {}", braces(labels), number(h.sum));
                    let _ = writeln!(out, "{name}_count{} {}", braces(labels), h.count);
                }
            }
        }
        let mut helped = std::collections::BTreeSet::new();
        for (name, help, labels, value) in gauges {
            if helped.insert(*name) {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            }
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let _ = writeln!(
                out,
                "{name}{} {}",
                braces(&render_labels(&labels)),
                number(*value)
            );
        }
        out
    }
}

/// The process's counts, updated as events are published: a thread counts into its own shard
/// ([`super::shard`]), under a lock no other thread takes but a snapshot; a snapshot sums them.
#[derive(Default)]
pub struct Metrics([Shard; SHARDS]);

/// One shard's counts and the buffer its label sets are rendered into, on a cache line (two
/// lines) of its own.
#[derive(Default)]
#[repr(align(128))]
struct Shard(Mutex<(Snapshot, String)>);

impl Metrics {
    pub fn snapshot(&self) -> Snapshot {
        let mut sum = Snapshot::default();
        for shard in &self.0 {
            sum.merge(&shard.0.lock().unwrap_or_else(|e| e.into_inner()).0);
        }
        sum
    }

    /// Adds `counts` (an earlier process's) to this one's, as if counted here.
    pub fn adopt(&self, counts: &Snapshot) {
        self.0[0]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .merge(counts);
    }

    /// This thread's shard.
    fn lock(&self) -> std::sync::MutexGuard<'_, (Snapshot, String)> {
        let shard = &self.0[super::shard() % SHARDS];
        shard.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `event`.
    pub fn observe(&self, event: &Event) {
        let mut guard = self.lock();
        let (s, scratch) = &mut *guard;
        match event {
            Event::Accepted { .. } | Event::Dropped { .. } => s.count_ack(event, scratch),
            Event::Drained { outcome, .. } => s.add(
                "clawless_lane_drains_total",
                &[("outcome", outcome)],
                1.0,
                scratch,
            ),
            Event::Model {
                model,
                input,
                output,
                cached_input,
                cost_micros,
                latency_ms,
                outcome,
            } => {
                s.add(
                    "clawless_model_calls_total",
                    &[("model", model), ("outcome", outcome)],
                    1.0,
                    scratch,
                );
                s.observe(
                    "clawless_model_seconds",
                    &[],
                    TURN_BUCKETS,
                    *latency_ms as f64 / 1000.0,
                    scratch,
                );
                s.add(
                    "clawless_tokens_total",
                    &[("direction", "input")],
                    *input as f64,
                    scratch,
                );
                s.add(
                    "clawless_tokens_total",
                    &[("direction", "cached_input")],
                    *cached_input as f64,
                    scratch,
                );
                s.add(
                    "clawless_tokens_total",
                    &[("direction", "output")],
                    *output as f64,
                    scratch,
                );
                for (cache, tokens) in [("hit", *cached_input), ("miss", *input)] {
                    s.add(
                        "clawless_model_input_tokens_total",
                        &[("model", model), ("cache", cache)],
                        tokens as f64,
                        scratch,
                    );
                }
                s.add(
                    "clawless_cost_usd_total",
                    &[],
                    *cost_micros as f64 / 1e6,
                    scratch,
                );
            }
            Event::Tool {
                tool,
                decision,
                error,
                ..
            } => s.add(
                "clawless_tool_calls_total",
                &[
                    ("tool", tool),
                    ("decision", decision),
                    ("outcome", if *error { "error" } else { "ok" }),
                ],
                1.0,
                scratch,
            ),
            Event::ApprovalAsked { .. } => s.add(
                "clawless_approvals_total",
                &[("outcome", "asked")],
                1.0,
                scratch,
            ),
            Event::ApprovalAnswered { outcome, .. } => s.add(
                "clawless_approvals_total",
                &[("outcome", outcome)],
                1.0,
                scratch,
            ),
            Event::ReplySent { .. } => s.add("clawless_replies_sent_total", &[], 1.0, scratch),
            Event::RetryScheduled { .. } => s.add("clawless_retries_total", &[], 1.0, scratch),
            Event::TurnEnded {
                outcome,
                latency_ms,
            } => {
                s.add(
                    "clawless_turns_total",
                    &[("outcome", outcome)],
                    1.0,
                    scratch,
                );
                s.observe(
                    "clawless_turn_seconds",
                    &[],
                    TURN_BUCKETS,
                    *latency_ms as f64 / 1000.0,
                    scratch,
                );
            }
            Event::HookReceived { hook, result } => s.add(
                "clawless_hooks_received_total",
                &[("hook", hook), ("result", result)],
                1.0,
                scratch,
            ),
            Event::WatchChecked { result } => s.add(
                "clawless_watch_checks_total",
                &[("result", result)],
                1.0,
                scratch,
            ),
            Event::ReminderFired { .. } => {
                s.add("clawless_reminders_fired_total", &[], 1.0, scratch)
            }
            Event::Compacted { .. } => s.add("clawless_compactions_total", &[], 1.0, scratch),
        }
    }
}

mod ack;
mod text;

use text::{bounded, braces, join, number, render_into, render_labels};

#[cfg(test)]
mod tests;
