//! The names of the memory files of a scope: `MEMORY.md` (long-term) and one daily note per
//! day, `memory/YYYY-MM-DD.md` (UTC).

use clawless_platform::Clock;

use crate::calendar::{civil_from_days, day_of};

/// Today's daily note, `memory/YYYY-MM-DD.md` (UTC).
pub fn daily_note(clock: &dyn Clock) -> String {
    note_of_day(day_of(clock.now_ms()))
}

/// The daily note of a day counted from the Unix epoch.
pub fn note_of_day(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("memory/{y:04}-{m:02}-{d:02}.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daily_notes_are_named_by_their_utc_day() {
        assert_eq!(note_of_day(19_675), "memory/2023-11-14.md");
    }
}
