//! Zone rules against known instants: DST changes in Europe/Berlin and America/New_York,
//! a southern and a negative-DST zone, gaps and folds, and every rule of the table.

use super::*;
use crate::calendar::days_from_civil;

/// Seconds since the epoch of a UTC date and time.
fn utc(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
    days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60
}

fn zone(name: &str) -> Zone {
    Zone::find(name).unwrap_or_else(|| panic!("{name}"))
}

#[test]
fn every_rule_of_the_table_parses() {
    let mut n = 0;
    for line in TABLE.lines().filter(|l| !l.starts_with('#')) {
        let (name, rule) = line.split_once('\t').unwrap();
        assert!(parse_rule(rule).is_some(), "{name}: {rule}");
        n += 1;
    }
    assert!(n > 500, "{n} zones");
}

#[test]
fn names_are_found_in_any_case_and_offsets_are_zones() {
    assert_eq!(zone("europe/berlin").name, "Europe/Berlin");
    assert_eq!(zone("UTC").name, "UTC");
    assert_eq!(zone("+02:00").name, "UTC+02:00");
    assert_eq!(zone("UTC-5").offset_at(0), -5 * 3600);
    assert_eq!(zone("Z"), Zone::utc());
    assert!(Zone::find("Mars/Olympus").is_none());
    assert!(Zone::find("").is_none());
    assert!(Zone::find("Europe/Paris\tCET-1").is_none());
}

#[test]
fn berlin_changes_at_one_utc_on_the_last_sundays_of_march_and_october() {
    let z = zone("Europe/Berlin");
    // 2026-03-29 01:00 UTC: 02:00 CET becomes 03:00 CEST.
    assert_eq!(z.offset_at(utc(2026, 3, 29, 0, 59)), 3600);
    assert_eq!(z.offset_at(utc(2026, 3, 29, 1, 0)), 7200);
    // 2026-10-25 01:00 UTC: 03:00 CEST becomes 02:00 CET.
    assert_eq!(z.offset_at(utc(2026, 10, 25, 0, 59)), 7200);
    assert_eq!(z.offset_at(utc(2026, 10, 25, 1, 0)), 3600);
    assert_eq!(z.offset_at(utc(2026, 1, 1, 0, 0)), 3600);
}

#[test]
fn new_york_changes_on_the_second_sunday_of_march_and_first_of_november() {
    let z = zone("America/New_York");
    // 2026-03-08 07:00 UTC (02:00 EST → 03:00 EDT).
    assert_eq!(z.offset_at(utc(2026, 3, 8, 6, 59)), -5 * 3600);
    assert_eq!(z.offset_at(utc(2026, 3, 8, 7, 0)), -4 * 3600);
    // 2026-11-01 06:00 UTC (02:00 EDT → 01:00 EST).
    assert_eq!(z.offset_at(utc(2026, 11, 1, 5, 59)), -4 * 3600);
    assert_eq!(z.offset_at(utc(2026, 11, 1, 6, 0)), -5 * 3600);
}

#[test]
fn southern_and_negative_dst_zones() {
    let sydney = zone("Australia/Sydney");
    assert_eq!(sydney.offset_at(utc(2026, 1, 15, 0, 0)), 11 * 3600);
    assert_eq!(sydney.offset_at(utc(2026, 7, 15, 0, 0)), 10 * 3600);
    // Ireland: IST (+1) is the standard time, GMT the "daylight" one in winter.
    let dublin = zone("Europe/Dublin");
    assert_eq!(dublin.offset_at(utc(2026, 1, 15, 0, 0)), 0);
    assert_eq!(dublin.offset_at(utc(2026, 7, 15, 0, 0)), 3600);
    assert_eq!(zone("Asia/Kolkata").offset_at(0), 19_800);
}

#[test]
fn local_times_in_a_gap_move_forward_and_in_a_fold_name_two_instants() {
    let z = zone("Europe/Berlin");
    let local = |d: u32, mo: u32, h: i64, mi: i64| utc(2026, mo, d, h, mi);
    // 02:30 on 2026-03-29 does not exist: it is 03:30 CEST (01:30 UTC).
    assert_eq!(
        z.instants(local(29, 3, 2, 30)),
        vec![utc(2026, 3, 29, 1, 30)]
    );
    // 02:30 on 2026-10-25 happens twice: 00:30 and 01:30 UTC.
    assert_eq!(
        z.instants(local(25, 10, 2, 30)),
        vec![utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)]
    );
    assert_eq!(z.instant(local(1, 6, 9, 0)), utc(2026, 6, 1, 7, 0));
}

#[test]
fn formats_with_the_zone_and_its_offset() {
    let t = utc(2026, 3, 29, 7, 0);
    assert_eq!(
        zone("Europe/Berlin").format(t, false),
        "2026-03-29 09:00 (Sunday), Europe/Berlin (UTC+02:00)"
    );
    assert_eq!(
        zone("+05:30").format(t, true),
        "2026-03-29 12:30:00 (Sunday), UTC+05:30"
    );
    assert_eq!(
        Zone::utc().format(0, true),
        "1970-01-01 00:00:00 (Thursday), UTC+00:00"
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
