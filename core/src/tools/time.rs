//! `current_time`: the current date and time at a UTC offset.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_platform::Clock;
use serde_json::{json, Value};

use super::{Level, Tool, ToolContext, ToolError};
use crate::calendar::civil_from_days;
use crate::llm::ToolSpec;

pub struct CurrentTime {
    pub clock: Arc<dyn Clock>,
}

#[async_trait]
impl Tool for CurrentTime {
    fn level(&self) -> Level {
        Level::Safe
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "current_time".into(),
            description: "The current date, time and weekday. Give `utc_offset` like \"+02:00\", \"-05:30\" or \"UTC\" for local time there (default UTC).".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"utc_offset": {"type": "string", "description": "UTC offset, e.g. +02:00"}},
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let offset = match input.get("utc_offset") {
            None | Some(Value::Null) => 0,
            Some(Value::String(s)) => parse_offset(s)
                .ok_or_else(|| ToolError(format!("utc_offset {s:?} is not like +02:00 or UTC")))?,
            Some(other) => {
                return Err(ToolError(format!(
                    "utc_offset must be a string, got {other}"
                )))
            }
        };
        Ok(format_time(self.clock.now_ms(), offset))
    }
}

/// Parses "UTC", "Z", "+02:00", "-0530", "+3", "UTC+3" into minutes east of UTC.
pub fn parse_offset(s: &str) -> Option<i64> {
    let s = s.trim();
    let s = s
        .strip_prefix("UTC")
        .or_else(|| s.strip_prefix("GMT"))
        .unwrap_or(s);
    if s.is_empty() || s == "Z" {
        return Some(0);
    }
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let (h, m) = match rest.split_once(':') {
        Some((h, m)) => (h, m),
        None if rest.len() == 4 => (rest.get(..2)?, rest.get(2..)?),
        None => (rest, "0"),
    };
    // One or two digits each, checked before any arithmetic (found by fuzzing:
    // "+0507440737095516150" overflowed `h * 60`, "+a€" was split inside a character, and
    // "+-5" passed as an hour).
    let two_digits = |s: &str| (1..=2).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    if !two_digits(h) || !two_digits(m) {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    (h <= 14 && m < 60).then(|| sign * (h * 60 + m))
}

/// Formats `ms` since the epoch at `offset_min` as `2026-11-22 14:05:09 (Sunday), UTC+02:00`.
pub fn format_time(ms: u64, offset_min: i64) -> String {
    let secs = (ms / 1000) as i64 + offset_min * 60;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    let weekday = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ][days.rem_euclid(7) as usize];
    let sign = if offset_min < 0 { '-' } else { '+' };
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02} ({weekday}), UTC{sign}{:02}:{:02}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        offset_min.abs() / 60,
        offset_min.abs() % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(
            format_time(0, 0),
            "1970-01-01 00:00:00 (Thursday), UTC+00:00"
        );
        // 2024-02-29 23:30:00 UTC is 2024-03-01 05:00 at +05:30.
        assert_eq!(
            format_time(1_709_249_400_000, 330),
            "2024-03-01 05:00:00 (Friday), UTC+05:30"
        );
        assert_eq!(
            format_time(1_709_249_400_000, -480),
            "2024-02-29 15:30:00 (Thursday), UTC-08:00"
        );
    }

    #[test]
    fn parses_offsets() {
        assert_eq!(parse_offset("UTC"), Some(0));
        assert_eq!(parse_offset("+02:00"), Some(120));
        assert_eq!(parse_offset("-0530"), Some(-330));
        assert_eq!(parse_offset("UTC+3"), Some(180));
        assert_eq!(parse_offset("Europe/Paris"), None);
        assert_eq!(parse_offset("+25:00"), None);
    }

    #[test]
    fn refuses_offsets_that_are_not_hours_and_minutes() {
        // Found by fuzzing: these overflowed, panicked on a char boundary, or were accepted.
        for bad in [
            "+0507440737095516150",
            "+a€",
            "+-5",
            "+1:-30",
            "+123:00",
            "-99999999999999999999",
        ] {
            assert_eq!(parse_offset(bad), None, "{bad}");
        }
        assert_eq!(parse_offset("+2:30"), Some(150));
    }
}
