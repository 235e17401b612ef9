//! Cron parsing (ranges, steps, lists, names, macros, clear errors) and next firings, across
//! the daylight saving changes of Europe/Berlin and America/New_York.

use super::*;
use crate::calendar::days_from_civil;

fn utc(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
    days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60
}

fn zone(name: &str) -> Zone {
    Zone::find(name).unwrap()
}

fn cron(s: &str) -> Cron {
    Cron::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// The next `n` firings after `from`, as UTC (y, mo, d, h, mi).
fn next_n(c: &str, z: &str, from: i64, n: usize) -> Vec<i64> {
    let (c, z) = (cron(c), zone(z));
    let mut at = from;
    (0..n)
        .map(|_| {
            at = c.next_after(at, &z).unwrap();
            at
        })
        .collect()
}

#[test]
fn fields_parse_ranges_steps_lists_and_names() {
    let c = cron("*/15 9-17 * * mon-fri");
    assert_eq!(c.minutes, 1 | 1 << 15 | 1 << 30 | 1 << 45);
    assert_eq!(c.hours, (9..=17).map(|h| 1 << h).sum::<u32>());
    assert_eq!(c.weekdays, 0b011_1110);
    assert!(c.weekdays_any.eq(&false) && c.days_any);
    let c = cron("0,30 8 1,15 jan,JUL 0");
    assert_eq!(c.minutes, 1 | 1 << 30);
    assert_eq!(c.months, 1 << 1 | 1 << 7);
    assert_eq!(c.days, 1 << 1 | 1 << 15);
    assert_eq!(cron("0 0 * * 7").weekdays, 1, "7 is Sunday");
    assert_eq!(cron("0 0 * * SUN").weekdays, 1);
    assert_eq!(cron("5/20 * * * *").minutes, 1 << 5 | 1 << 25 | 1 << 45);
    assert_eq!(cron("0-10/5 * * * *").minutes, 1 | 1 << 5 | 1 << 10);
    assert_eq!(cron("@daily"), cron("0 0 * * *"));
    assert_eq!(cron("@hourly"), cron("0 * * * *"));
}

#[test]
fn invalid_expressions_say_what_is_wrong() {
    for (expr, says) in [
        ("* * * *", "has 5 fields"),
        ("0 * * * * *", "this one has 6"),
        ("60 * * * *", "minute: 60 is out of range 0-59"),
        ("0 24 * * *", "hour: 24 is out of range 0-23"),
        ("0 0 0 * *", "day-of-month: 0 is out of range 1-31"),
        ("0 0 * 13 *", "month: 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week: 8 is out of range 0-7"),
        ("*/0 * * * *", "minute: step 0 is out of range"),
        ("0 17-9 * * *", "hour: range \"17-9\" runs backwards"),
        (
            "0 0 * * mun",
            "day-of-week: \"mun\" is neither a number nor one of sun",
        ),
        ("x * * * *", "minute: \"x\" is not a number"),
        ("@often", "unknown cron macro"),
    ] {
        let err = Cron::parse(expr).unwrap_err();
        assert!(err.contains(says), "{expr}: {err}");
    }
}

#[test]
fn next_firings_in_utc() {
    let from = utc(2026, 1, 1, 10, 7);
    assert_eq!(
        next_n("*/15 * * * *", "UTC", from, 3),
        [
            utc(2026, 1, 1, 10, 15),
            utc(2026, 1, 1, 10, 30),
            utc(2026, 1, 1, 10, 45)
        ]
    );
    // 2026-01-01 is a Thursday: the next weekday 9:00 after 10:07 is Friday.
    assert_eq!(
        next_n("0 9 * * 1-5", "UTC", from, 2),
        [utc(2026, 1, 2, 9, 0), utc(2026, 1, 5, 9, 0)]
    );
    // Day of month and weekday both restricted: either matches (the 13th, or a Friday).
    assert_eq!(
        next_n("0 0 13 * 5", "UTC", from, 3),
        [
            utc(2026, 1, 2, 0, 0),
            utc(2026, 1, 9, 0, 0),
            utc(2026, 1, 13, 0, 0)
        ]
    );
    assert_eq!(
        next_n("0 0 29 2 *", "UTC", from, 1),
        [utc(2028, 2, 29, 0, 0)]
    );
    assert_eq!(
        cron("0 0 31 2 *").next_after(from, &Zone::utc()),
        None,
        "never"
    );
}

#[test]
fn berlin_spring_forward_moves_the_skipped_time_and_fall_back_fires_once() {
    // 2026-03-29: 02:00 CET → 03:00 CEST. 02:30 does not exist: it fires at 03:30 CEST.
    let from = utc(2026, 3, 28, 12, 0);
    assert_eq!(
        next_n("30 2 * * *", "Europe/Berlin", from, 3),
        [
            utc(2026, 3, 28, 1, 30) + 86_400,
            utc(2026, 3, 30, 0, 30),
            utc(2026, 3, 31, 0, 30)
        ]
    );
    // 2026-10-25: 03:00 CEST → 02:00 CET. 02:30 happens twice: fired once, the first time.
    let from = utc(2026, 10, 24, 12, 0);
    assert_eq!(
        next_n("30 2 * * *", "Europe/Berlin", from, 2),
        [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
    );
    // Daily 09:00 local keeps its wall time across the change.
    assert_eq!(
        next_n("0 9 * * *", "Europe/Berlin", utc(2026, 10, 24, 0, 0), 2),
        [utc(2026, 10, 24, 7, 0), utc(2026, 10, 25, 8, 0)]
    );
}

#[test]
fn a_wildcard_hour_keeps_firing_through_the_repeated_hour() {
    // Berlin, 2026-10-25, from 02:30 CEST (00:30 UTC): every 30 minutes by the real clock.
    let from = utc(2026, 10, 25, 0, 0);
    assert_eq!(
        next_n("*/30 * * * *", "Europe/Berlin", from, 4),
        [
            utc(2026, 10, 25, 0, 30),
            utc(2026, 10, 25, 1, 0),
            utc(2026, 10, 25, 1, 30),
            utc(2026, 10, 25, 2, 0)
        ]
    );
}

#[test]
fn new_york_across_both_changes() {
    // 2026-03-08 02:00 EST → 03:00 EDT: 02:15 fires at 03:15 EDT (07:15 UTC).
    assert_eq!(
        next_n("15 2 * * *", "America/New_York", utc(2026, 3, 7, 12, 0), 2),
        [utc(2026, 3, 8, 7, 15), utc(2026, 3, 9, 6, 15)]
    );
    // 2026-11-01 02:00 EDT → 01:00 EST: 01:30 happens twice, fires once (05:30 UTC).
    assert_eq!(
        next_n(
            "30 1 * * *",
            "America/New_York",
            utc(2026, 10, 31, 12, 0),
            2
        ),
        [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
    );
    // 8:00 every weekday stays 8:00 local: 12:00 UTC before, 13:00 UTC after.
    assert_eq!(
        next_n(
            "0 8 * * mon-fri",
            "America/New_York",
            utc(2026, 10, 30, 0, 0),
            2
        ),
        [utc(2026, 10, 30, 12, 0), utc(2026, 11, 2, 13, 0)]
    );
}
