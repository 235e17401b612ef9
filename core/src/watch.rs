//! Watches: a page checked on a period without the model, a turn only when its text changed.
//!
//! A watch is a reminder ([`crate::schedule`]) whose [`What::Watch`] repeats every
//! `every_secs`: its firings go through the inbox as every reminder's do, so a check happens
//! once per period through crashes and overlapping scheduler runs. The check
//! (`turn/watch.rs`) makes a conditional GET through `web_fetch`'s guards (`If-None-Match`,
//! `If-Modified-Since`), then hashes the page's readable text: a 304 or the same hash ends
//! the job with no model call and no message. A different hash keeps the new text and what
//! changed ([`diff`]) in the watch's [`State`] under the firing's update id *before* the turn
//! runs on it, so a crash between the two runs the turn from the kept change rather than
//! fetching again (which would find nothing new and lose it). The first check only learns
//! the page. A failing page is tried less often (the period doubled per failure, at most a
//! day) and the person is told once, at the third failure in a row.
//!
//! The state (`watch/<connector>/<chat>/<id>`, built in [`crate::keys`]) is written only by
//! the chat's lane, one job at a time; it is not exported (an imported watch learns its page
//! again at its first check).

use clawless_platform::{Kv, KvExt, PortError};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::ids::ConnectorId;
use crate::keys;
use crate::schedule::What;

/// `watches:` in `main.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchConfig {
    /// The shortest period a watch may have (seconds).
    pub min_every_secs: u64,
    /// The most watches one chat may have.
    pub max_per_chat: usize,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            min_every_secs: 900,
            max_per_chat: 20,
        }
    }
}

impl WatchConfig {
    /// What is wrong with it, as (field, why).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if !(10..=604_800).contains(&self.min_every_secs) {
            let why = "must be between 10 (seconds) and 604800 (a week)".into();
            return Some(("watches.min_every_secs", why));
        }
        if !(1..=100).contains(&self.max_per_chat) {
            return Some(("watches.max_per_chat", "must be between 1 and 100".into()));
        }
        None
    }
}

/// The most text of a page kept to compare with the next check (bytes).
pub const MAX_KEPT_TEXT: usize = 24 * 1024;
/// The most characters of a change given to the model.
pub const MAX_DIFF_CHARS: usize = 4_000;
/// Failures in a row after which the person is told.
pub const TELL_AFTER_FAILURES: u32 = 3;
/// The longest a failing page waits between tries.
const MAX_BACKOFF_MS: u64 = 86_400_000;
/// How long a watch's state outlives its last write (a cancelled watch's goes with it).
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(90 * 86_400);

/// What a watch knows of its page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// The hash of the text last seen; none before the first check that read the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The text last seen, cut to [`MAX_KEPT_TEXT`].
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub checked_ms: u64,
    #[serde(default)]
    pub changed_ms: u64,
    /// Changes seen so far (a gated task runs when this moved, see [`crate::schedule`]).
    #[serde(default)]
    pub changes: u64,
    #[serde(default)]
    pub failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// A failing page is not tried before this.
    #[serde(default)]
    pub retry_at_ms: u64,
    /// The firing (its update id) whose check saw the last change, and the change: its turn
    /// runs from this after a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<(i64, String)>,
}

impl State {
    /// The state of watch `id` of `chat` (default when none is kept).
    pub async fn read(
        kv: &dyn Kv,
        connector: &ConnectorId,
        chat: i64,
        id: u64,
    ) -> Result<State, PortError> {
        let key = keys::watch_state(connector, chat, id);
        Ok(kv.get_json::<State>(&key).await?.unwrap_or_default())
    }

    pub async fn write(
        &self,
        kv: &dyn Kv,
        connector: &ConnectorId,
        chat: i64,
        id: u64,
    ) -> Result<(), PortError> {
        let key = keys::watch_state(connector, chat, id);
        kv.put_json(&key, self, Some(STATE_TTL)).await
    }

    /// A failed check at `now_ms` of a watch checked every `every_secs`: counted, and the
    /// next try put off (the period doubled per failure in a row, at most a day).
    pub fn failed(&mut self, why: String, now_ms: u64, every_secs: u64) {
        self.failures = self.failures.saturating_add(1);
        self.checked_ms = now_ms;
        self.last_error = Some(why);
        let doubling = 1u64 << self.failures.saturating_sub(1).min(10);
        let wait = every_secs
            .saturating_mul(1000)
            .saturating_mul(doubling)
            .min(MAX_BACKOFF_MS);
        // The first failure waits for the next period as usual.
        self.retry_at_ms = match self.failures {
            1 => 0,
            _ => now_ms.saturating_add(wait),
        };
    }
}

/// What a gated task last ran on: its watch's [`State::changes`] then, and the firing (its
/// update id) that took them, so that firing runs its turn even after a crash.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub changes: u64,
    pub by: i64,
}

impl Gate {
    const TTL: std::time::Duration = std::time::Duration::from_secs(400 * 86_400);

    pub async fn read(
        kv: &dyn Kv,
        connector: &ConnectorId,
        chat: i64,
        task: u64,
    ) -> Result<Option<Gate>, PortError> {
        kv.get_json(&keys::watch_gate(connector, chat, task)).await
    }

    pub async fn write(
        self,
        kv: &dyn Kv,
        connector: &ConnectorId,
        chat: i64,
        task: u64,
    ) -> Result<(), PortError> {
        let key = keys::watch_gate(connector, chat, task);
        kv.put_json(&key, &self, Some(Self::TTL)).await
    }
}

/// Whether gated task `task`'s firing `firing` runs, its watch `watch` having made
/// `changes` changes: once per change seen, the count kept before the turn.
pub async fn gate_opens(
    kv: &dyn Kv,
    connector: &ConnectorId,
    chat: i64,
    (task, watch, firing): (u64, u64, i64),
) -> Result<bool, PortError> {
    let (gate, state) = futures::future::join(
        Gate::read(kv, connector, chat, task),
        State::read(kv, connector, chat, watch),
    )
    .await;
    let (gate, changes) = (gate?.unwrap_or_default(), state?.changes);
    if gate.by == firing && firing != 0 {
        return Ok(true); // taken before a crash: its turn runs
    }
    if changes == gate.changes {
        return Ok(false);
    }
    Gate {
        changes,
        by: firing,
    }
    .write(kv, connector, chat, task)
    .await?;
    Ok(true)
}

/// The hash of a page's text.
pub fn digest(text: &str) -> String {
    let d = sha2::Sha256::digest(text.as_bytes());
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// `text` cut to at most `max` bytes at a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What changed from `old` to `new`, line by line: the lines only the new text has (`+ `,
/// in its order) and those only the old one had (`- `), at most [`MAX_DIFF_CHARS`]. A set
/// difference rather than an edit script: a person wants what is new and what went, and it
/// costs one pass over each text.
pub fn diff(old: &str, new: &str) -> String {
    use std::collections::HashMap;
    fn count(text: &str) -> HashMap<&str, usize> {
        let mut m: HashMap<&str, usize> = HashMap::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            *m.entry(line).or_default() += 1;
        }
        m
    }
    let (mut in_old, mut in_new) = (count(old), count(new));
    let mut out = String::new();
    let mut push = |mark: &str, line: &str| {
        if out.chars().count() < MAX_DIFF_CHARS {
            out.push_str(mark);
            out.push_str(line);
            out.push('\n');
        }
    };
    for line in new.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match in_old.get_mut(line) {
            Some(n) if *n > 0 => *n -= 1,
            _ => push("+ ", line),
        }
    }
    for line in old.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match in_new.get_mut(line) {
            Some(n) if *n > 0 => *n -= 1,
            _ => push("- ", line),
        }
    }
    if out.is_empty() {
        out.push_str("(the text changed only in spacing or line order)\n");
    }
    let mut out: String = out.chars().take(MAX_DIFF_CHARS).collect();
    if out.chars().count() == MAX_DIFF_CHARS {
        out.push_str("\n[cut: more changed]");
    }
    out
}

/// `(url, every_secs, task)` of a watch reminder.
pub fn parts(what: &What) -> Option<(&str, u64, &str)> {
    match what {
        What::Watch {
            url,
            every_secs,
            task,
        } => Some((url, *every_secs, task)),
        _ => None,
    }
}

/// `7h`, `15m`, `1d`, `90s` or a number of seconds, as seconds; `None` for anything else.
pub fn parse_every(text: &str) -> Option<u64> {
    let t = text.trim();
    let (n, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => (&t[..at], t[at..].trim()),
        None => (t, "s"),
    };
    let n: u64 = n.parse().ok()?;
    let secs = match unit {
        "s" | "sec" | "secs" | "seconds" => 1,
        "m" | "min" | "mins" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        _ => return None,
    };
    n.checked_mul(secs)
}

/// `1 h 30 min`-style, for people.
pub fn shown_every(secs: u64) -> String {
    match secs {
        s if s % 86_400 == 0 => format!("{} d", s / 86_400),
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// `5 min ago`-style, for people.
pub fn ago(now_ms: u64, at_ms: u64) -> String {
    let d = now_ms.saturating_sub(at_ms) / 1000;
    match d {
        0..=59 => format!("{d} s ago"),
        60..=3599 => format!("{} min ago", d / 60),
        3600..=86_399 => format!("{} h {} min ago", d / 3600, d % 3600 / 60),
        _ => format!("{} days ago", d / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_says_what_is_new_and_what_went() {
        let old = "Title\nPrice: 10\nIn stock\n";
        let new = "Title\nPrice: 12\nIn stock\nNew colour: red\n";
        assert_eq!(
            diff(old, new),
            "+ Price: 12\n+ New colour: red\n- Price: 10\n"
        );
        assert!(diff("a\nb", "b\na").contains("only in spacing"));
        let big = (0..5000).map(|i| format!("line {i}\n")).collect::<String>();
        let d = diff("", &big);
        assert!(d.ends_with("[cut: more changed]"), "{}", &d[d.len() - 40..]);
        assert!(d.chars().count() <= MAX_DIFF_CHARS + 30);
    }

    #[test]
    fn periods_read_and_show() {
        assert_eq!(parse_every("15m"), Some(900));
        assert_eq!(parse_every("7h"), Some(25_200));
        assert_eq!(parse_every("1 d"), Some(86_400));
        assert_eq!(parse_every("900"), Some(900));
        assert_eq!(parse_every("soon"), None);
        assert_eq!(parse_every("5w"), None);
        assert_eq!(parse_every("99999999999999999999h"), None);
        assert_eq!(shown_every(900), "15 min");
        assert_eq!(shown_every(7200), "2 h");
        assert_eq!(shown_every(90), "90 s");
    }

    #[test]
    fn failures_put_the_next_try_off_doubling_up_to_a_day() {
        let mut s = State::default();
        s.failed("x".into(), 1_000, 900);
        assert_eq!((s.failures, s.retry_at_ms), (1, 0));
        s.failed("x".into(), 2_000, 900);
        assert_eq!(s.retry_at_ms, 2_000 + 1_800_000);
        for _ in 0..20 {
            s.failed("x".into(), 3_000, 900);
        }
        assert_eq!(s.retry_at_ms, 3_000 + MAX_BACKOFF_MS);
    }
}
