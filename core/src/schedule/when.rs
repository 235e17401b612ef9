//! When a new reminder first fires, from what the model asked: an ISO 8601 date-time (local
//! to the zone, or with its own offset), a number of minutes from now, or a cron expression.
//! Every refusal is a sentence the model can act on.

use serde_json::Value;

use super::cron::Cron;
use super::zone::Zone;
use super::{Reminder, What, MAX_AHEAD_MS, MAX_TASK_RUNS_PER_DAY, MIN_TASK_INTERVAL_S};
use crate::calendar::{days_from_civil, month_days};

/// The first firing of a new reminder, and its cron expression when it recurs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct First {
    /// A whole second, in ms.
    pub next_ms: u64,
    pub cron: Option<String>,
}

/// The firings of `cron` in `zone` after `from_s` and before `to_s`, at most `cap`.
fn firings(cron: &Cron, from_s: i64, to_s: i64, zone: &Zone, cap: usize) -> Vec<i64> {
    let mut out = Vec::new();
    let mut at = from_s;
    while out.len() < cap {
        match cron.next_after(at, zone) {
            Some(next) if next < to_s => {
                out.push(next);
                at = next;
            }
            _ => break,
        }
    }
    out
}

/// Why a new scheduled task (`what` is a prompt) may not be set: it recurs more often than
/// every [`MIN_TASK_INTERVAL_S`] (any two firings in the coming week), or the chat's tasks
/// (`held`, with this one) would run more than [`MAX_TASK_RUNS_PER_DAY`] times in the coming
/// day. An injected page could otherwise set a task that asks the model every minute.
pub fn task_bounds(
    what: &What,
    first: &First,
    zone: &Zone,
    held: &[Reminder],
    now_ms: u64,
) -> Result<(), String> {
    if !matches!(what, What::Prompt(_) | What::Gated { .. }) {
        return Ok(());
    }
    let now_s = (now_ms / 1000) as i64;
    let day = now_s + 86_400;
    let runs = |cron: Option<&str>, next_ms: u64, zone: &Zone| -> usize {
        match cron.map(Cron::parse) {
            Some(Ok(c)) => firings(&c, now_s, day, zone, MAX_TASK_RUNS_PER_DAY + 1).len(),
            _ => usize::from(((next_ms / 1000) as i64) < day),
        }
    };
    if let Some(expr) = &first.cron {
        let cron = Cron::parse(expr)?;
        let week = firings(&cron, now_s, now_s + 7 * 86_400, zone, 2_000);
        let shortest = week.windows(2).map(|w| w[1] - w[0]).min();
        if shortest.is_some_and(|s| s < MIN_TASK_INTERVAL_S) {
            return Err(format!(
                "a scheduled task may recur at most every {} minutes (each run asks the model); {expr:?} runs more often. Use a text reminder for that, or a longer interval",
                MIN_TASK_INTERVAL_S / 60
            ));
        }
    }
    let mut total = runs(first.cron.as_deref(), first.next_ms, zone);
    for r in held
        .iter()
        .filter(|r| matches!(r.what, What::Prompt(_) | What::Gated { .. }))
    {
        let zone = Zone::find(&r.zone).unwrap_or_else(Zone::utc);
        total += runs(r.cron.as_deref(), r.next_ms, &zone);
    }
    if total > MAX_TASK_RUNS_PER_DAY {
        return Err(format!(
            "this chat's scheduled tasks would run {total} times in the coming day, more than the {MAX_TASK_RUNS_PER_DAY} allowed: cancel some or make them less frequent"
        ));
    }
    Ok(())
}

/// Reads exactly one of `at`, `in_minutes` and `cron` from `input`.
pub fn first(input: &Value, now_ms: u64, zone: &Zone) -> Result<First, String> {
    let given: Vec<&str> = ["at", "in_minutes", "cron"]
        .into_iter()
        .filter(|k| input.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let [which] = given[..] else {
        return Err("give exactly one of at, in_minutes or cron".into());
    };
    let now_s = (now_ms / 1000) as i64;
    let at_s = match which {
        "at" => {
            let text = input["at"].as_str().ok_or("at must be a string")?;
            let (local, offset) = parse_datetime(text)?;
            let at = match offset {
                Some(o) => local - o,
                None => zone.instant(local),
            };
            if at <= now_s {
                return Err(format!(
                    "{text} has already passed: it is now {}",
                    zone.format(now_s, true)
                ));
            }
            at
        }
        "in_minutes" => {
            let m = input["in_minutes"]
                .as_f64()
                .ok_or("in_minutes must be a number")?;
            if !(m > 0.0 && m * 60_000.0 <= MAX_AHEAD_MS as f64) {
                return Err("in_minutes must be more than 0 and at most a year".into());
            }
            // Whole seconds, never sooner than asked.
            now_ms.div_ceil(1000) as i64 + ((m * 60.0).ceil() as i64).max(1)
        }
        _ => {
            let expr = input["cron"].as_str().ok_or("cron must be a string")?;
            if expr.len() > 100 {
                return Err("a cron expression is at most 100 characters".into());
            }
            let cron = Cron::parse(expr)?;
            let at = cron
                .next_after(now_s, zone)
                .ok_or_else(|| format!("the cron expression {expr:?} never fires"))?;
            return Ok(First {
                next_ms: at as u64 * 1000,
                cron: Some(expr.trim().to_owned()),
            });
        }
    };
    let at_ms = at_s as u64 * 1000;
    if at_ms > now_ms + MAX_AHEAD_MS {
        return Err("a one-off reminder can be at most a year ahead".into());
    }
    Ok(First {
        next_ms: at_ms,
        cron: None,
    })
}

/// `2026-03-29T09:00`, `2026-03-29 09:00:30`, `2026-03-29T09:00:00+02:00`, `…Z`: local
/// seconds since the epoch and, when given, the offset (seconds east of UTC).
pub fn parse_datetime(text: &str) -> Result<(i64, Option<i64>), String> {
    let bad = || {
        format!("{text:?} is not a date-time like 2026-03-29T09:00 (optionally with seconds and an offset such as +02:00 or Z)")
    };
    let t = text.trim();
    if t.len() > 40 || !t.is_ascii() {
        return Err(bad());
    }
    let (date, rest) = t.split_at_checked(10).ok_or_else(bad)?;
    let rest = rest.strip_prefix(['T', 't', ' ']).ok_or_else(bad)?;
    let num = |s: &str| -> Result<i64, String> {
        match s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
            true => s.parse().map_err(|_| bad()),
            false => Err(bad()),
        }
    };
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, da] = d[..] else {
        return Err(bad());
    };
    let (y, mo, da) = (num(y)?, num(mo)?, num(da)?);
    // The time: up to the offset (Z, + or -).
    let end = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
    let (time, zone) = rest.split_at(end);
    let time = time.split('.').next().unwrap_or("");
    let hms: Vec<&str> = time.split(':').collect();
    let (h, mi, s) = match hms[..] {
        [h, m] => (num(h)?, num(m)?, 0),
        [h, m, s] => (num(h)?, num(m)?, num(s)?),
        _ => return Err(bad()),
    };
    if !(1..=9999).contains(&y)
        || !(1..=12).contains(&mo)
        || da < 1
        || da > i64::from(month_days(y, mo as u32))
        || h > 23
        || mi > 59
        || s > 59
    {
        return Err(bad());
    }
    let offset = match zone {
        "" => None,
        z => Some(super::zone::parse_offset(z).ok_or_else(bad)? * 60),
    };
    let local = days_from_civil(y, mo as u32, da as u32) * 86_400 + h * 3600 + mi * 60 + s;
    Ok((local, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_785_000_000_000; // 2026-07-25 17:20:00 UTC

    #[test]
    fn at_reads_local_times_in_the_zone_and_offsets_as_given() {
        let berlin = Zone::find("Europe/Berlin").unwrap();
        let f = first(&json!({"at": "2026-07-26T09:00"}), NOW, &berlin).unwrap();
        assert_eq!(f.next_ms, 1_785_049_200_000, "09:00 CEST is 07:00 UTC");
        let f = first(&json!({"at": "2026-07-26 09:00:00Z"}), NOW, &berlin).unwrap();
        assert_eq!(f.next_ms, 1_785_056_400_000);
        let f = first(&json!({"at": "2026-07-26T09:00:00-05:00"}), NOW, &berlin).unwrap();
        assert_eq!(f.next_ms, 1_785_074_400_000);
        assert!(first(&json!({"at": "2026-07-25T10:00Z"}), NOW, &berlin)
            .unwrap_err()
            .contains("already passed"));
        assert!(first(&json!({"at": "2028-01-01T10:00Z"}), NOW, &berlin)
            .unwrap_err()
            .contains("a year ahead"));
        for bad in [
            "tomorrow",
            "2026-02-30T10:00",
            "2026-07-26T25:00",
            "2026-07-26T09:00+99:00",
        ] {
            assert!(
                first(&json!({ "at": bad }), NOW, &berlin)
                    .unwrap_err()
                    .contains("not a date-time"),
                "{bad}"
            );
        }
    }

    #[test]
    fn minutes_and_cron_and_exactly_one_of_them() {
        let utc = Zone::utc();
        let f = first(&json!({"in_minutes": 10}), NOW, &utc).unwrap();
        assert_eq!((f.next_ms, f.cron), (NOW + 600_000, None));
        assert_eq!(
            first(&json!({"in_minutes": 0.05}), NOW + 1, &utc)
                .unwrap()
                .next_ms,
            NOW + 4000,
            "3 s from a time inside a second: whole seconds"
        );
        assert!(first(&json!({"in_minutes": 0}), NOW, &utc).is_err());
        assert!(first(&json!({"in_minutes": 600_000}), NOW, &utc).is_err());
        let f = first(&json!({"cron": "30 9 * * *"}), NOW, &utc).unwrap();
        assert_eq!(f.next_ms, 1_785_058_200_000);
        assert_eq!(f.cron.as_deref(), Some("30 9 * * *"));
        assert!(first(&json!({"cron": "0 0 31 2 *"}), NOW, &utc)
            .unwrap_err()
            .contains("never fires"));
        assert!(first(&json!({}), NOW, &utc)
            .unwrap_err()
            .contains("exactly one"));
        assert!(first(&json!({"in_minutes": 1, "cron": "* * * * *"}), NOW, &utc).is_err());
        let long = format!("0 9 * * {}", "1,".repeat(60));
        assert!(first(&json!({ "cron": long }), NOW, &utc)
            .unwrap_err()
            .contains("at most 100"));
    }
}
