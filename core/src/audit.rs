//! The audit trail: what the agent did, step by step. Each turn has a trace id (its update);
//! each model call (model, tokens, cost, latency, outcome), tool call (name, arguments with
//! secrets redacted and size capped, level, decision, latency, result size or error),
//! approval answered, command and pairing (someone let in or out) is one [`Entry`], kept
//! `audit.retention_days` through the Kv port, so the trail exists on every shell.
//!
//! Keys are `audit/<connector>/<at ms:015>/<trace>.<seq:05>`: listing a connector's prefix from an
//! instant reads entries in time order.

use clawless_platform::{Kv, PortError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::ConnectorId;
use crate::keys;
use crate::level::Level;

/// Tool arguments and errors are kept to this many characters in an entry.
pub const MAX_DETAIL: usize = 500;
/// At most this many steps of one turn are kept (a turn has at most `max_rounds` model calls
/// and their tool calls).
pub const MAX_STEPS_PER_TURN: usize = 64;

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    Model {
        model: String,
        input: u64,
        output: u64,
        cached_input: u64,
        cost_micros: u64,
        latency_ms: u64,
        /// `ok`, or the error's kind.
        outcome: String,
        /// The sub-agent that did this, `researcher` (`researcher/helper` one level further
        /// down); none for the turn's own agent (see [`crate::spawn`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    Tool {
        name: String,
        args: String,
        level: Level,
        /// `allowed`, `granted`, `approved`, `denied`, `expired`, `superseded`, `refused by
        /// policy`, `repeated`.
        decision: String,
        latency_ms: u64,
        result_bytes: usize,
        error: Option<String>,
        /// The sub-agent that did this, `researcher` (`researcher/helper` one level further
        /// down); none for the turn's own agent (see [`crate::spawn`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    Approval {
        tool: String,
        outcome: String,
        by: Option<String>,
    },
    Command {
        name: String,
    },
    /// A hook's delivery (see [`crate::hooks`]): `mode` is `message` or `turn`.
    Hook {
        name: String,
        mode: String,
    },
    /// The owner let someone in or out (`/pair`, a `/users` button, the command line; the
    /// entry's user is the owner, 0 for the command line).
    Pairing {
        /// `approved` or `removed`.
        action: String,
        /// Whom it concerns, as `Person::label` shows them.
        person: String,
    },
}

impl Step {
    /// Marks a sub-agent's step as done by `agent` (below it, when a deeper one did it). The
    /// name grows by one id per level, and the levels are bounded (`spawn.max_depth`).
    pub fn by_agent(mut self, agent: &str) -> Step {
        if let Step::Model { agent: by, .. } | Step::Tool { agent: by, .. } = &mut self {
            *by = Some(match by.take() {
                Some(below) => format!("{agent}/{below}"),
                None => agent.to_owned(),
            });
        }
        self
    }
}

/// A step with its time and place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub at_ms: u64,
    /// The message that started the turn.
    pub trace: i64,
    /// Numbers the steps of one trace, in order.
    pub seq: u32,
    pub chat: i64,
    pub user: i64,
    #[serde(flatten)]
    pub step: Step,
}

/// Writes `entries` of one connector, each kept for `retention`.
pub async fn write(
    kv: &dyn Kv,
    connector: &ConnectorId,
    entries: &[Entry],
    retention: std::time::Duration,
) -> Result<(), PortError> {
    let writes = entries.iter().map(|e| async move {
        let key = keys::audit(connector, e.at_ms, e.trace, e.seq);
        let bytes = serde_json::to_vec(e).map_err(|err| PortError::invalid(err.to_string()))?;
        kv.put(&key, &bytes, Some(retention)).await
    });
    for r in futures::future::join_all(writes).await {
        r?;
    }
    Ok(())
}

/// The entries of `connector` from `since_ms` on, oldest first, at most `limit`, only of
/// `chat` when given.
pub async fn read(
    kv: &dyn Kv,
    connector: &ConnectorId,
    since_ms: u64,
    chat: Option<i64>,
    limit: usize,
) -> Result<Vec<Entry>, PortError> {
    let prefix = keys::audit_prefix(connector);
    let mut after = keys::audit_from(connector, since_ms);
    let mut out = Vec::new();
    // Reads in pages; entries of other chats are skipped, so bound the pages too.
    for _ in 0..64 {
        let page = kv.list_after(&prefix, &after, 200).await?;
        let Some(last) = page.last().cloned() else {
            break;
        };
        for key in page {
            let Some(bytes) = kv.get(&key).await? else {
                continue;
            };
            let Ok(entry) = serde_json::from_slice::<Entry>(&bytes) else {
                continue;
            };
            if chat.is_none_or(|c| c == entry.chat) {
                out.push(entry);
                if out.len() >= limit {
                    return Ok(out);
                }
            }
        }
        after = last;
    }
    Ok(out)
}

/// `90s`, `30m`, `2h`, `7d` → milliseconds (the `since` of `clawless audit` and of
/// `/admin/audit`).
pub fn parse_window(s: &str) -> Result<u64, String> {
    // The unit is the last character (split there, not at a byte: `5é` is refused, not a panic).
    let cut = s.char_indices().next_back().map_or(0, |(i, _)| i);
    let (n, unit) = s.split_at(cut);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 30m, 2h or 7d"))?;
    let ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?}: the unit is s, m, h or d")),
    };
    Ok(n.saturating_mul(ms))
}

/// A call's arguments as an approver or the audit trail shows them: fields whose name
/// suggests a secret replaced by `•••`, strings over 200 characters cut, the whole cut at
/// `max` characters.
pub fn shown_args(input: &Value, max: usize) -> String {
    let mut shown = redact(input);
    cut_strings(&mut shown);
    let text = serde_json::to_string_pretty(&shown).unwrap_or_default();
    cut(&text, max)
}

/// `text` cut to `max` characters, saying so.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}\n… (cut)")
}

fn redact(v: &Value) -> Value {
    const SECRET_NAMES: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "api_key",
        "apikey",
        "authorization",
        "cookie",
    ];
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    let secret = SECRET_NAMES.iter().any(|s| lower.contains(s));
                    let shown = if secret {
                        Value::from("•••")
                    } else {
                        redact(v)
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

fn cut_strings(v: &mut Value) {
    match v {
        Value::String(s) if s.chars().count() > 200 => {
            let cut: String = s.chars().take(200).collect();
            *s = format!("{cut}…");
        }
        Value::Object(map) => map.values_mut().for_each(cut_strings),
        Value::Array(items) => items.iter_mut().for_each(cut_strings),
        _ => {}
    }
}

/// One line of `/audit` or `clawless audit`.
pub fn line(e: &Entry) -> String {
    let secs = e.at_ms / 1000;
    let (h, m, s) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let what = match &e.step {
        Step::Model {
            model,
            input,
            output,
            latency_ms,
            outcome,
            ..
        } => format!("model {model}: {input} in / {output} out tokens, {latency_ms} ms, {outcome}"),
        Step::Tool {
            name,
            decision,
            latency_ms,
            error,
            ..
        } => match error {
            Some(err) => format!("tool {name} ({decision}), {latency_ms} ms: {err}"),
            None => format!("tool {name} ({decision}), {latency_ms} ms"),
        },
        Step::Approval { tool, outcome, by } => match by {
            Some(by) => format!("approval of {tool}: {outcome} by {by}"),
            None => format!("approval of {tool}: {outcome}"),
        },
        Step::Command { name } => format!("command /{name}"),
        Step::Pairing { action, person } => format!("pairing of {person}: {action}"),
        Step::Hook { name, mode } => format!("hook {name} delivered ({mode})"),
    };
    let by = match &e.step {
        Step::Model { agent: Some(a), .. } | Step::Tool { agent: Some(a), .. } => format!("[{a}] "),
        _ => String::new(),
    };
    format!("{h:02}:{m:02}:{s:02} UTC  {by}{what}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn windows_parse() {
        assert_eq!(parse_window("90s"), Ok(90_000));
        assert_eq!(parse_window("2h"), Ok(7_200_000));
        assert_eq!(parse_window("7d"), Ok(604_800_000));
        assert!(
            parse_window("2w").is_err()
                && parse_window("h").is_err()
                && parse_window("").is_err()
                && parse_window("5é").is_err()
        );
    }

    #[test]
    fn secrets_are_redacted_and_long_values_cut() {
        let shown = shown_args(
            &json!({
                "url": "https://example.com",
                "headers": {"Authorization": "Bearer abc123", "x": "y"},
                "api_key": "sk-live-123",
                "body": "z".repeat(5000),
            }),
            800,
        );
        assert!(
            !shown.contains("abc123") && !shown.contains("sk-live-123"),
            "{shown}"
        );
        assert!(shown.contains("https://example.com"));
        assert!(shown.chars().count() < 1000, "{}", shown.len());
    }
}
