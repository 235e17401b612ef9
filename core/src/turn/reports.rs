//! The commands that report or change state kept outside the conversation: `/usage` (the
//! spend counters), `/approve` and `/revoke` (this chat's grants), `/memory` (what is kept
//! of this person).

use clawless_platform::PortError;

use crate::app::App;
use crate::connector::{Connector, Routed};
use crate::keys;
use crate::telegram::Message;

/// How many memory files `/memory` lists, and how much of a found line it shows.
const MEMORY_LISTED: usize = 30;
const MEMORY_SHOWN_CHARS: usize = 160;

/// How many models `/usage` lists for the owner.
const MODELS_SHOWN: usize = 8;

/// `, 81 % of the input from the prompt cache` when any input came from it, else nothing.
fn from_cache(t: &crate::usage::Tally) -> String {
    match t.cache_hit_percent() {
        Some(p) if t.cached_input > 0 => format!(", {p} % of the input from the prompt cache"),
        _ => String::new(),
    }
}

/// How far back `/audit` looks, and how many steps it shows.
const AUDIT_WINDOW_MS: u64 = 24 * 3_600_000;
const AUDIT_SHOWN: usize = 15;

/// `/memory [words]`: the files of `scope`'s memory (the person's own, or what config
/// shares), or the passages that match `words`, best first, with their scores. A search
/// that cannot be made (the embedding model failing) is said, not retried.
pub(super) async fn memory_reply(
    app: &App,
    scope: &crate::ids::Scope,
    words: &str,
) -> Result<String, PortError> {
    use crate::memory::store::{root, MemoryError};
    let words: String = words.chars().take(200).collect();
    if words.is_empty() {
        let dir = root(scope);
        let files = app.memory.files.list(&dir).await?;
        if files.is_empty() {
            return Ok("I keep nothing in memory about you yet. Ask me to remember something; search it later with /memory <words>.".to_owned());
        }
        let at = format!("{dir}/");
        let mut lines: Vec<String> = files
            .iter()
            .take(MEMORY_LISTED)
            .map(|f| format!("• {}", f.strip_prefix(&at).unwrap_or(f)))
            .collect();
        if files.len() > MEMORY_LISTED {
            lines.push(format!("… and {} more", files.len() - MEMORY_LISTED));
        }
        return Ok(format!(
            "My notes about you ({} file(s)):\n{}\nSearch them with /memory <words>.",
            files.len(),
            lines.join("\n")
        ));
    }
    let hits = match app.memory.search(scope, &words).await {
        Ok(hits) => hits,
        Err(MemoryError::Port(e)) => return Err(e),
        Err(e) => {
            tracing::warn!(error = %e, "memory search for /memory failed");
            return Ok("I could not search my memory right now; try again in a while.".to_owned());
        }
    };
    if hits.is_empty() {
        return Ok(format!("Nothing in my memory matches \"{words}\"."));
    }
    let lines: Vec<String> = hits
        .iter()
        .map(|h| {
            let text: String = h.text.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut shown: String = text.chars().take(MEMORY_SHOWN_CHARS).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            format!(
                "• {}:{}-{} (score {:.2}): {shown}",
                h.path, h.start_line, h.end_line, h.score
            )
        })
        .collect();
    Ok(format!(
        "In my memory for \"{words}\", best first:\n{}",
        lines.join("\n")
    ))
}

/// `/audit`: the owner sees the last steps of this chat in the past day.
pub(super) async fn audit_reply(
    app: &App,
    conn: &Connector,
    msg: &Message,
) -> Result<String, PortError> {
    let from = msg.from.as_ref().map(|u| u.id.0);
    if from.is_none() || from != conn.owner {
        return Ok("Only the bot's owner can see the audit trail.".to_owned());
    }
    let since = app.platform.clock.now_ms().saturating_sub(AUDIT_WINDOW_MS);
    let entries = crate::audit::read(
        &*app.platform.kv,
        &conn.id,
        since,
        Some(msg.chat.id.0),
        10_000,
    )
    .await?;
    if entries.is_empty() {
        return Ok("Nothing in the audit trail of this chat in the past day.".to_owned());
    }
    let skip = entries.len().saturating_sub(AUDIT_SHOWN);
    let lines: Vec<String> = entries[skip..].iter().map(crate::audit::line).collect();
    Ok(format!("Last steps in this chat:\n{}", lines.join("\n")))
}

/// `/usage`: today's and this month's tokens and cost for the person and the chat, with the
/// share of input read from the prompt cache, today's per model for the owner, and what the
/// nearest cap leaves.
pub(super) async fn usage_reply(
    app: &App,
    conn: &Connector,
    msg: &Message,
) -> Result<String, PortError> {
    use crate::usage::{dollars, Period, Who};
    let ledger = app.ledger();
    let user = msg.from.as_ref().map_or(0, |u| u.id.0);
    let chat = msg.chat.id.0;
    let mut lines = Vec::new();
    for (period, name) in [(Period::Day, "Today"), (Period::Month, "This month")] {
        let you = ledger.get(&conn.id, period, Who::User(user)).await?;
        let mut line = format!(
            "{name}: you {} tokens ({})",
            you.tokens(),
            dollars(you.cost_micros)
        );
        let mut total = you;
        if !msg.is_private() {
            let here = ledger.get(&conn.id, period, Who::Chat(chat)).await?;
            line.push_str(&format!(
                ", this chat {} tokens ({})",
                here.tokens(),
                dollars(here.cost_micros)
            ));
            total = here;
        }
        lines.push(line + &from_cache(&total) + ".");
    }
    let from = msg.from.as_ref().map(|u| u.id.0);
    if from.is_some() && from == conn.owner {
        let models = ledger.models_on_day(&conn.id, ledger.today()).await?;
        let mut by_model: Vec<(String, crate::usage::Tally)> = Vec::new();
        for (_, model, t) in models {
            match by_model.iter_mut().find(|(m, _)| *m == model) {
                Some((_, sum)) => sum.add(t),
                None => by_model.push((model, t)),
            }
        }
        for (model, t) in by_model.iter().take(MODELS_SHOWN) {
            lines.push(format!(
                "Today on {model}: {} tokens ({}){}.",
                t.tokens(),
                dollars(t.cost_micros),
                from_cache(t)
            ));
        }
    }
    match ledger
        .left(&conn.id, user, &app.config.limits.caps())
        .await?
    {
        Some(left) => lines.push(format!(
            "Left under {} limit of {}: {}.",
            left.cap,
            dollars(left.cap_micros),
            dollars(left.micros)
        )),
        None => lines.push("No spending limit is set.".to_owned()),
    }
    Ok(lines.join("\n"))
}

/// What the nearest spend cap leaves `user` on `connector`; `None` without caps.
pub(super) async fn budget(
    app: &App,
    connector: &crate::ids::ConnectorId,
    user: i64,
) -> Result<Option<crate::usage::Left>, PortError> {
    let caps = app.config.limits.caps();
    match caps.any() {
        true => app.ledger().left(connector, user, &caps).await,
        false => Ok(None),
    }
}

/// `/approve` and `/revoke`: this chat's grants, listed or ended.
pub(super) async fn grants_reply(
    app: &App,
    conn: &Routed<'_>,
    chat: i64,
    revoke: bool,
) -> Result<String, PortError> {
    let prefix = keys::grants(&conn.id, chat);
    let granted = app.platform.kv.list(&prefix, 100).await?;
    let names: Vec<&str> = granted
        .iter()
        .filter_map(|k| k.strip_prefix(&prefix))
        .collect();
    if revoke {
        for k in &granted {
            app.platform.kv.delete(k).await?;
        }
        return Ok(match names.is_empty() {
            true => "Nothing was allowed for now.".to_owned(),
            false => format!("Ended: {}. They ask again next time.", names.join(", ")),
        });
    }
    // The MCP servers' tools too (their cached lists).
    let toolset = conn.agent.toolset().await;
    let tools = toolset.names();
    let asks: Vec<&str> = tools
        .iter()
        .map(String::as_str)
        .filter(|n| !names.contains(n))
        .filter(|n| {
            let level = toolset.get(n).map(|t| t.level());
            level.is_some_and(|l| conn.agent.rule(n, l) == crate::config::Rule::Ask)
        })
        .collect();
    let mut out = String::new();
    out.push_str(&match names.is_empty() {
        true => "Nothing is allowed without asking right now.".to_owned(),
        false => format!(
            "Allowed without asking for now (up to {} min from when you allowed it): {}. /revoke ends that.",
            app.config.approvals.grant_minutes,
            names.join(", ")
        ),
    });
    if !asks.is_empty() {
        out.push_str(&format!("\nAsks before running: {}.", asks.join(", ")));
    }
    Ok(out)
}

/// The tools `chat` granted for a while (none read when the agent never asks).
pub(super) async fn granted(
    app: &App,
    conn: &crate::connector::Routed<'_>,
    chat: i64,
) -> Result<std::collections::BTreeSet<String>, PortError> {
    if !conn.agent.config.policy.may_ask() {
        return Ok(Default::default());
    }
    let prefix = keys::grants(&conn.id, chat);
    let keys = app.platform.kv.list(&prefix, 100).await?;
    Ok(keys
        .iter()
        .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned))
        .collect())
}
