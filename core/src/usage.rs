//! Token usage and spend: every model call's tokens (as the provider reported them) and cost
//! (at the model's price from `providers.d`) added up per person, per chat and for everyone,
//! per UTC day and calendar month, on each connector; and the caps of `limits:` checked
//! before every model call.
//!
//! Counters live in Kv (`usage/<connector>/<period>/<who>`, see [`crate::keys`]) and are
//! added to with compare-and-swap, so concurrent turns on other lanes never lose an update.
//! A turn's spend is added when it answers or stops to wait for an approval; a crash between
//! a model call and that write leaves the call uncounted.

use clawless_platform::{Clock, Kv, PortError};
use serde::{Deserialize, Serialize};

use crate::calendar::{civil_from_days, day_of};
use crate::config::Caps;
use crate::ids::ConnectorId;
use crate::keys;
pub use crate::llm::{Left, Tally};

/// A turn's bookkeeping, kept in its job until written: its spend and its audit entries.
/// Written beside the delivery of the answer (or the approval message), never before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Books {
    pub spend: Tally,
    pub user: i64,
    pub chat: i64,
    pub audit: Vec<crate::audit::Entry>,
    /// The spend split by agent and model (a job an older version kept has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelSpend>,
}

/// What one agent spent on one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpend {
    pub agent: String,
    pub model: String,
    pub spend: Tally,
}

/// Distinct agent and model pairs a turn's books split its spend into, at most; the rest
/// joins the last.
const MAX_MODELS_PER_TURN: usize = 8;
/// Bytes of an agent's or a model's name kept in a counter's key.
const MAX_NAME: usize = 96;
/// What a model is called when the steps that named it were not kept.
pub const UNNAMED: &str = "(not named)";

/// Splits a turn's `spend` by agent and model from its audit `steps`: each successful model
/// call counted under the sub-agent that made it or else `agent`. Spend the steps do not
/// account for (a turn past the audit's step limit) is put under `agent` and [`UNNAMED`], so
/// the split always adds up to `spend`.
pub fn split_by_model(
    agent: &str,
    spend: Tally,
    steps: &[(u64, crate::audit::Step)],
) -> Vec<ModelSpend> {
    let mut out: Vec<ModelSpend> = Vec::new();
    let mut counted = Tally::default();
    let put = |out: &mut Vec<ModelSpend>, by: &str, model: &str, t: Tally| {
        let (by, model) = (key_safe(by), key_safe(model));
        if let Some(m) = out.iter_mut().find(|m| m.agent == by && m.model == model) {
            m.spend.add(t);
        } else if out.len() < MAX_MODELS_PER_TURN {
            out.push(ModelSpend {
                agent: by,
                model,
                spend: t,
            });
        } else if let Some(last) = out.last_mut() {
            last.spend.add(t);
        }
    };
    for (_, step) in steps {
        if let crate::audit::Step::Model {
            model,
            input,
            output,
            cached_input,
            cost_micros,
            outcome,
            agent: by,
            ..
        } = step
        {
            if outcome != "ok" {
                continue;
            }
            let mut t = Tally::default();
            let usage = crate::llm::Usage {
                input: *input,
                output: *output,
                cached_input: *cached_input,
                // Writes are in `input`; the step's cost priced them.
                cache_write: 0,
            };
            t.add_call(usage, *cost_micros);
            counted.add(t);
            put(&mut out, by.as_deref().unwrap_or(agent), model, t);
        }
    }
    let rest = spend.since(&counted);
    if !rest.is_empty() {
        put(&mut out, agent, UNNAMED, rest);
    }
    out
}

/// A name as a counter's key holds it: control characters and `|` (the key's separator)
/// dropped, at most [`MAX_NAME`] bytes. Model names come from the provider's answer.
fn key_safe(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().filter(|c| !c.is_control() && *c != '|') {
        if out.len() + c.len_utf8() > MAX_NAME {
            break;
        }
        out.push(c);
    }
    out
}

/// Whose spend a counter holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    User(i64),
    Chat(i64),
    Everyone,
}

impl Who {
    fn segment(self) -> String {
        match self {
            Who::User(id) => format!("u{id}"),
            Who::Chat(id) => format!("c{id}"),
            Who::Everyone => "all".to_owned(),
        }
    }
}

/// The key segment of an agent's spend on a model: `m<agent>|<model>`.
fn model_segment(agent: &str, model: &str) -> String {
    format!("m{agent}|{model}")
}

/// A counter's period: a UTC day (`d2026-11-23`) or month (`m2026-11`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Month,
}

/// The name of the `period` around instant `now_ms` (UTC): `d2026-11-23` or `m2026-11`.
pub fn period_at(now_ms: u64, period: Period) -> String {
    let day = day_of(now_ms);
    match period {
        Period::Day => day_period(day),
        Period::Month => {
            let (y, m, _) = civil_from_days(day);
            format!("m{y:04}-{m:02}")
        }
    }
}

/// How long a counter is kept after its period: long enough for `/usage` and the panel's
/// chart of the last [`CHART_DAYS`] days to read it.
const KEEP_DAY: std::time::Duration = std::time::Duration::from_secs(35 * 86_400);
/// Days the panel's usage chart shows, at most.
pub const CHART_DAYS: i64 = 31;
/// People listed per day, at most.
const MAX_PEOPLE: usize = 200;
const KEEP_MONTH: std::time::Duration = std::time::Duration::from_secs(62 * 86_400);
/// Compare-and-swap rounds before an addition gives up (and is logged).
const CAS_TRIES: usize = 16;

/// The counters over the Kv and Clock ports.
pub struct Ledger<'a> {
    pub kv: &'a dyn Kv,
    pub clock: &'a dyn Clock,
    /// What this process last wrote to each counter (see [`Written`]).
    pub written: &'a Written,
}

/// Counters this process wrote last, by key: an addition first tries its compare-and-swap
/// against that value, which saves the read when nobody else wrote the counter since (one
/// process per chat, mostly). A stale value only fails that swap, then the counter is read.
/// Bounded: past [`WRITTEN_MAX`] keys it starts afresh.
#[derive(Default)]
pub struct Written(std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>);

/// Counters [`Written`] remembers at most (a turn adds to 6 and one per model).
const WRITTEN_MAX: usize = 256;

impl Written {
    fn take(&self, key: &str) -> Option<Vec<u8>> {
        self.0.lock().ok()?.remove(key)
    }

    fn keep(&self, key: String, value: Vec<u8>) {
        if let Ok(mut map) = self.0.lock() {
            if map.len() >= WRITTEN_MAX {
                map.clear();
            }
            map.insert(key, value);
        }
    }
}

/// The period name of UTC day `day` (days since the epoch): `d2026-11-23`.
fn day_period(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("d{y:04}-{m:02}-{d:02}")
}

impl Ledger<'_> {
    /// Today, as days since the epoch (UTC).
    pub fn today(&self) -> i64 {
        day_of(self.clock.now_ms())
    }

    /// The counter of `who` on UTC day `day` (days since the epoch); `(date, tally)`.
    pub async fn on_day(
        &self,
        connector: &ConnectorId,
        day: i64,
        who: Who,
    ) -> Result<(String, Tally), PortError> {
        let period = day_period(day);
        let tally = self
            .tally_at(&keys::usage(connector, &period, &who.segment()))
            .await?;
        Ok((period.trim_start_matches('d').to_owned(), tally))
    }

    /// Every person's counter on UTC day `day` (at most [`MAX_PEOPLE`]).
    pub async fn people_on_day(
        &self,
        connector: &ConnectorId,
        day: i64,
    ) -> Result<Vec<(i64, Tally)>, PortError> {
        let listed = self.listed(connector, day, "u").await?;
        Ok(listed
            .into_iter()
            .filter_map(|(id, t)| Some((id.parse::<i64>().ok()?, t)))
            .collect())
    }

    /// Every agent's spend per model on UTC day `day`: `(agent, model, tally)` (at most
    /// [`MAX_PEOPLE`] pairs).
    pub async fn models_on_day(
        &self,
        connector: &ConnectorId,
        day: i64,
    ) -> Result<Vec<(String, String, Tally)>, PortError> {
        let listed = self.listed(connector, day, "m").await?;
        Ok(listed
            .into_iter()
            .filter_map(|(pair, t)| {
                let (agent, model) = pair.split_once('|')?;
                Some((agent.to_owned(), model.to_owned(), t))
            })
            .collect())
    }

    /// The day's counters whose segment starts with `kind` (`u` people, `m` models):
    /// `(the rest of the segment, tally)`, at most [`MAX_PEOPLE`].
    async fn listed(
        &self,
        connector: &ConnectorId,
        day: i64,
        kind: &str,
    ) -> Result<Vec<(String, Tally)>, PortError> {
        let prefix = format!("{}{kind}", keys::usage_period(connector, &day_period(day)));
        let keys = self.kv.list(&prefix, MAX_PEOPLE).await?;
        let reads = keys.iter().map(|key| self.tally_at(key));
        let tallies = futures::future::try_join_all(reads).await?;
        Ok(keys
            .iter()
            .zip(tallies)
            .filter_map(|(key, t)| Some((key.strip_prefix(&prefix)?.to_owned(), t)))
            .collect())
    }

    /// The counter at `key`; none is zero.
    async fn tally_at(&self, key: &str) -> Result<Tally, PortError> {
        Ok(self
            .kv
            .get(key)
            .await?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default())
    }

    fn period(&self, period: Period) -> String {
        period_at(self.clock.now_ms(), period)
    }

    /// Adds a turn's spend to its person, its chat and everyone, for today and this month,
    /// and each of `models` (its split by agent and model) to today's counters.
    pub async fn add(
        &self,
        connector: &ConnectorId,
        user: i64,
        chat: i64,
        spend: Tally,
        models: &[ModelSpend],
    ) -> Result<(), PortError> {
        if spend.is_empty() {
            return Ok(());
        }
        let mut adds = Vec::new();
        for (period, keep) in [(Period::Day, KEEP_DAY), (Period::Month, KEEP_MONTH)] {
            let p = self.period(period);
            for who in [Who::User(user), Who::Chat(chat), Who::Everyone] {
                adds.push(self.add_to(keys::usage(connector, &p, &who.segment()), spend, keep));
            }
        }
        let today = self.period(Period::Day);
        for m in models.iter().filter(|m| !m.spend.is_empty()) {
            let key = keys::usage(connector, &today, &model_segment(&m.agent, &m.model));
            adds.push(self.add_to(key, m.spend, KEEP_DAY));
        }
        for r in futures::future::join_all(adds).await {
            r?;
        }
        Ok(())
    }

    async fn add_to(
        &self,
        key: String,
        spend: Tally,
        keep: std::time::Duration,
    ) -> Result<(), PortError> {
        // The value this process wrote last, if any, is tried first without a read.
        let mut last = self.written.take(&key);
        for _ in 0..CAS_TRIES {
            let old = match last.take() {
                Some(v) => Some(v),
                None => self.kv.get(&key).await?,
            };
            let mut tally: Tally = old
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_default();
            tally.add(spend);
            let new = serde_json::to_vec(&tally).map_err(|e| PortError::invalid(e.to_string()))?;
            if self
                .kv
                .compare_and_swap(&key, old.as_deref(), Some(&new), Some(keep))
                .await?
            {
                self.written.keep(key, new);
                return Ok(());
            }
        }
        Err(PortError::new(
            clawless_platform::ErrorKind::Conflict,
            format!("usage counter {key} kept changing; this turn's spend was not added"),
        ))
    }

    /// The counter of `who` for the current `period`.
    pub async fn get(
        &self,
        connector: &ConnectorId,
        period: Period,
        who: Who,
    ) -> Result<Tally, PortError> {
        let key = keys::usage(connector, &self.period(period), &who.segment());
        self.tally_at(&key).await
    }

    /// How much `user` may still spend under the nearest of `caps`; `None` without caps.
    pub async fn left(
        &self,
        connector: &ConnectorId,
        user: i64,
        caps: &Caps,
    ) -> Result<Option<Left>, PortError> {
        let mut nearest: Option<Left> = None;
        let checks = [
            (
                caps.daily_usd_per_user,
                Period::Day,
                Who::User(user),
                "your daily",
            ),
            (
                caps.daily_usd_total,
                Period::Day,
                Who::Everyone,
                "today's total",
            ),
            (
                caps.monthly_usd_total,
                Period::Month,
                Who::Everyone,
                "this month's total",
            ),
        ];
        for (cap, period, who, label) in checks {
            let Some(cap) = cap else {
                continue;
            };
            let cap_micros = usd_to_micros(cap);
            let spent = self.get(connector, period, who).await?.cost_micros;
            let left = Left {
                micros: cap_micros.saturating_sub(spent),
                cap: label,
                cap_micros,
            };
            if nearest.is_none_or(|n| left.micros < n.micros) {
                nearest = Some(left);
            }
        }
        Ok(nearest)
    }
}

fn usd_to_micros(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1e6).round().min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// `$0.0123`: dollars with enough digits to show small amounts.
pub fn dollars(micros: u64) -> String {
    let usd = micros as f64 / 1e6;
    if micros == 0 || usd >= 1.0 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

/// What the user is told when a cap stops the turn.
pub fn cap_reached(left: &Left) -> String {
    format!(
        "I have reached {} spending limit ({}) that my owner set, so I can't ask the model now. It resets with the next period.",
        left.cap,
        dollars(left.cap_micros)
    )
}

#[cfg(test)]
mod tests;
