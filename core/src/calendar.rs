//! Calendar arithmetic on days since the Unix epoch (UTC), with no clock of its own: the
//! caller passes the instant it read from the `Clock` port.

/// Milliseconds in a day.
pub const DAY_MS: u64 = 86_400_000;

/// The day (since 1970-01-01, UTC) of an instant in milliseconds.
pub fn day_of(ms: u64) -> i64 {
    (ms / DAY_MS) as i64
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's algorithm.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_675), (2023, 11, 14));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(day_of(1_700_000_000_000), 19_675);
    }
}
