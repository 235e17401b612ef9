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

/// A counter's period: a UTC day (`d2026-11-23`) or month (`m2026-11`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Month,
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
        let key = keys::usage(connector, &period, &who.segment());
        let tally = self
            .kv
            .get(&key)
            .await?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Ok((period.trim_start_matches('d').to_owned(), tally))
    }

    /// Every person's counter on UTC day `day` (at most [`MAX_PEOPLE`]).
    pub async fn people_on_day(
        &self,
        connector: &ConnectorId,
        day: i64,
    ) -> Result<Vec<(i64, Tally)>, PortError> {
        let prefix = keys::usage_period(connector, &day_period(day));
        let mut out = Vec::new();
        for key in self.kv.list(&prefix, MAX_PEOPLE * 3).await? {
            let Some(user) = key
                .strip_prefix(&prefix)
                .and_then(|w| w.strip_prefix('u'))
                .and_then(|id| id.parse::<i64>().ok())
            else {
                continue;
            };
            let tally = self
                .kv
                .get(&key)
                .await?
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            out.push((user, tally));
            if out.len() >= MAX_PEOPLE {
                break;
            }
        }
        Ok(out)
    }

    fn period(&self, period: Period) -> String {
        let (y, m, d) = civil_from_days(day_of(self.clock.now_ms()));
        match period {
            Period::Day => format!("d{y:04}-{m:02}-{d:02}"),
            Period::Month => format!("m{y:04}-{m:02}"),
        }
    }

    /// Adds a turn's spend to its person, its chat and everyone, for today and this month.
    pub async fn add(
        &self,
        connector: &ConnectorId,
        user: i64,
        chat: i64,
        spend: Tally,
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
        for _ in 0..CAS_TRIES {
            let old = self.kv.get(&key).await?;
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
        Ok(self
            .kv
            .get(&key)
            .await?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default())
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
mod tests {
    use super::*;
    use crate::llm::Usage;
    use clawless_platform::{FakeClock, MemoryKv};
    use futures::executor::block_on;
    use std::sync::Arc;

    #[test]
    fn spend_adds_up_per_person_chat_and_everyone_and_caps_say_what_is_left() {
        let clock = Arc::new(FakeClock::new(1_700_000_000_000));
        let kv = MemoryKv::new(clock.clone());
        let ledger = Ledger {
            kv: &kv,
            clock: &*clock,
        };
        let main = ConnectorId::new("main");
        let mut t = Tally::default();
        t.add_call(
            Usage {
                input: 1000,
                output: 200,
                cached_input: 0,
            },
            600_000,
        );
        block_on(async {
            ledger.add(&main, 1, -5, t).await.unwrap();
            ledger.add(&main, 2, -5, t).await.unwrap();
            assert_eq!(
                ledger
                    .get(&main, Period::Day, Who::User(1))
                    .await
                    .unwrap()
                    .cost_micros,
                600_000
            );
            assert_eq!(
                ledger
                    .get(&main, Period::Day, Who::Chat(-5))
                    .await
                    .unwrap()
                    .calls,
                2
            );
            assert_eq!(
                ledger
                    .get(&main, Period::Month, Who::Everyone)
                    .await
                    .unwrap()
                    .tokens(),
                2400
            );
            let caps = Caps {
                daily_usd_per_user: Some(1.0),
                daily_usd_total: Some(1.0),
                monthly_usd_total: None,
            };
            let left = ledger.left(&main, 1, &caps).await.unwrap().unwrap();
            assert_eq!((left.micros, left.cap), (0, "today's total"));
            // Tomorrow the daily counters start again.
            clock.advance(std::time::Duration::from_secs(86_400));
            let left = ledger.left(&main, 1, &caps).await.unwrap().unwrap();
            assert_eq!(left.micros, 1_000_000);
        });
        assert_eq!(dollars(12_300), "$0.0123");
        assert_eq!(dollars(2_500_000), "$2.50");
    }

    #[test]
    fn prices_turn_tokens_into_cost() {
        let price = crate::config::Price {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
        };
        let usage = Usage {
            input: 1_000_000,
            output: 100_000,
            cached_input: 1_000_000,
        };
        assert_eq!(usage.cost_micros(&price), 3_000_000 + 1_500_000 + 300_000);
    }
}
