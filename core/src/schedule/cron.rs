//! Five-field cron expressions (`minute hour day-of-month month day-of-week`, Vixie cron's
//! syntax: `*`, lists, ranges, steps, month and weekday names, `@daily` and friends) and the
//! next time one fires in a time zone.
//!
//! Wall-clock rules across daylight saving changes (those of ISC cron): a time the clocks jump
//! over fires when it would have been (02:30 on the night of 02:00 → 03:00 fires at 03:30); a
//! time that happens twice fires once, at its first occurrence, unless the hour field is `*`
//! (`*/15 * * * *` keeps firing every 15 minutes through the repeated hour).

use super::zone::Zone;

/// How far ahead a next firing is looked for; an expression with none in it never fires.
const SEARCH_DAYS: i64 = 366 * 8;
/// Wall time can name an instant up to this much earlier than a later wall time (a fold).
const FOLD: i64 = 3 * 3600;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// The day-of-month or day-of-week field starts with `*`: the two are then both required,
    /// else either one is enough (cron's rule).
    days_any: bool,
    weekdays_any: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    /// Parses an expression; the error says which field is wrong and why.
    pub fn parse(expr: &str) -> Result<Cron, String> {
        let expanded = match expr.trim().to_ascii_lowercase().as_str() {
            "@hourly" => "0 * * * *".to_owned(),
            "@daily" | "@midnight" => "0 0 * * *".to_owned(),
            "@weekly" => "0 0 * * 0".to_owned(),
            "@monthly" => "0 0 1 * *".to_owned(),
            "@yearly" | "@annually" => "0 0 1 1 *".to_owned(),
            other if other.starts_with('@') => {
                return Err(format!(
                "unknown cron macro {other:?} (use @hourly, @daily, @weekly, @monthly or @yearly)"
            ))
            }
            other => other.to_owned(),
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "a cron expression has 5 fields (minute hour day-of-month month day-of-week), this one has {}",
                fields.len()
            ));
        }
        let minutes = field(fields[0], "minute", 0, 59, &[])?;
        let hours = field(fields[1], "hour", 0, 23, &[])?;
        let days = field(fields[2], "day-of-month", 1, 31, &[])?;
        let months = field(fields[3], "month", 1, 12, &MONTHS)?;
        // 7 is Sunday too.
        let weekdays = field(fields[4], "day-of-week", 0, 7, &DAYS)?;
        let weekdays = (weekdays | (weekdays >> 7)) & 0x7f;
        Ok(Cron {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            days_any: fields[2].starts_with('*'),
            weekdays_any: fields[4].starts_with('*'),
        })
    }

    /// The first instant (seconds since the epoch) after `after` at which the expression
    /// fires in `zone`; `None` if it never does within eight years.
    pub fn next_after(&self, after: i64, zone: &Zone) -> Option<i64> {
        let every_hour = self.hours == (1 << 24) - 1;
        let start = (zone.to_local(after) - FOLD).div_euclid(60) * 60;
        let first_day = start.div_euclid(86_400);
        // (wall time, instant) of the earliest firing found so far.
        let mut best: Option<(i64, i64)> = None;
        for day in first_day..first_day + SEARCH_DAYS {
            if !self.day_matches(day) {
                continue;
            }
            for h in (0..24).filter(|h| self.hours & (1 << h) != 0) {
                for m in (0..60).filter(|m| self.minutes & (1 << m) != 0) {
                    let wall = day * 86_400 + h * 3600 + m * 60;
                    if wall < start {
                        continue;
                    }
                    if let Some((w, _)) = best {
                        if wall > w + FOLD {
                            return best.map(|(_, at)| at);
                        }
                    }
                    let instants = zone.instants(wall);
                    let take = if every_hour { instants.len() } else { 1 };
                    for &at in instants.iter().take(take) {
                        if at > after && best.is_none_or(|(_, b)| at < b) {
                            best = Some((wall, at));
                        }
                    }
                }
            }
        }
        best.map(|(_, at)| at)
    }

    fn day_matches(&self, day: i64) -> bool {
        let (_, month, dom) = crate::calendar::civil_from_days(day);
        if self.months & (1 << month) == 0 {
            return false;
        }
        let by_date = self.days & (1 << dom) != 0;
        let by_weekday = self.weekdays & (1 << crate::calendar::weekday(day)) != 0;
        match self.days_any || self.weekdays_any {
            true => by_date && by_weekday,
            false => by_date || by_weekday,
        }
    }
}

/// One field: a comma-separated list of `*`, `n`, `a-b`, each optionally `/step`, as bits.
fn field(text: &str, name: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| format!("{name}: step {s:?} is not a number"))?;
                if step == 0 || step > hi {
                    return Err(format!("{name}: step {step} is out of range 1-{hi}"));
                }
                (r, step)
            }
            None => (item, 1),
        };
        let (a, b) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (
                    value(a, name, lo, hi, names)?,
                    value(b, name, lo, hi, names)?,
                ),
                // `a/step` runs to the end of the range.
                None if step > 1 => (value(r, name, lo, hi, names)?, hi),
                None => {
                    let v = value(r, name, lo, hi, names)?;
                    (v, v)
                }
            },
        };
        if a > b {
            return Err(format!("{name}: range {range:?} runs backwards"));
        }
        for v in (a..=b).step_by(step as usize) {
            bits |= 1 << v;
        }
    }
    Ok(bits)
}

fn value(text: &str, name: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u32, String> {
    if let Some(i) = names.iter().position(|n| *n == text) {
        // Month names count from 1, weekday names from 0 (Sunday): both from `lo`.
        return Ok(i as u32 + lo);
    }
    let v: u32 = text.parse().map_err(|_| match names.is_empty() {
        true => format!("{name}: {text:?} is not a number"),
        false => format!(
            "{name}: {text:?} is neither a number nor one of {}",
            names.join(", ")
        ),
    })?;
    if v < lo || v > hi {
        return Err(format!("{name}: {v} is out of range {lo}-{hi}"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests;
