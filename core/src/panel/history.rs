//! What a person's conversations said, and what they spent day by day (the panel's
//! conversations and the usage chart). A person reaches their private chat's sessions; the
//! owner every session of the bot, with the tools' inputs (redacted) and results (cut).

use clawless_platform::PortError;
use serde_json::{json, Value};

use super::{unavailable, PanelReply, Who};
use crate::app::App;
use crate::ids::SessionKey;
use crate::keys;
use crate::llm::{Block, Role};
use crate::usage::{Who as Payer, CHART_DAYS};

/// Sessions listed, at most.
const MAX_SESSIONS: usize = 200;
/// Characters of a tool's result shown (to the owner).
const RESULT_SHOWN: usize = 1000;

/// Whether `who` may read session `key` (its private chat's, or any for the owner).
fn may_read(who: &Who<'_>, key: &str) -> bool {
    let Some(rest) = key.strip_prefix(&format!("{}:", who.conn.id.as_str())) else {
        return false;
    };
    if who.owner {
        return true;
    }
    let own = who.user.to_string();
    rest == own || rest.strip_prefix(&own).is_some_and(|t| t.starts_with(":t"))
}

/// `GET /api/conversations`: the sessions `who` may read, newest first.
pub(crate) async fn list(app: &App, who: &Who<'_>) -> Result<Value, PortError> {
    let kv = &*app.platform.kv;
    let prefix = if who.owner {
        format!("{}{}:", keys::SESSIONS, who.conn.id.as_str())
    } else {
        format!("{}{}:{}", keys::SESSIONS, who.conn.id.as_str(), who.user)
    };
    let mut out = Vec::new();
    for key in kv.list(&prefix, MAX_SESSIONS).await? {
        let name = key.strip_prefix(keys::SESSIONS).unwrap_or(&key);
        if !may_read(who, name) {
            continue;
        }
        let s = crate::session::load(kv, &SessionKey::new(name)).await?;
        out.push((
            s.updated_ms,
            json!({ "key": name, "messages": s.messages.len(), "updated_ms": s.updated_ms }),
        ));
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    Ok(json!({ "conversations": out.into_iter().map(|(_, v)| v).collect::<Vec<_>>() }))
}

/// `GET /api/conversations/messages?key=K`: the session's messages as text; `None` when
/// `who` may not read it.
pub(crate) async fn messages(
    app: &App,
    who: &Who<'_>,
    key: &str,
) -> Result<Option<Value>, PortError> {
    if key.len() > 256 || !may_read(who, key) {
        return Ok(None);
    }
    let s = crate::session::load(&*app.platform.kv, &SessionKey::new(key)).await?;
    let shown: Vec<Value> = s
        .messages
        .iter()
        .map(|m| {
            let mut parts = Vec::new();
            for b in &m.content {
                match b {
                    Block::Text { text } => parts.push(json!({ "text": text })),
                    Block::ToolUse { name, input, .. } => {
                        let mut v = json!({ "tool": name });
                        if who.owner {
                            v["input"] = json!(crate::audit::shown_args(input, 600));
                        }
                        parts.push(v);
                    }
                    Block::ToolResult {
                        content, is_error, ..
                    } if who.owner => {
                        let cut: String = content.chars().take(RESULT_SHOWN).collect();
                        parts.push(json!({ "result": cut, "error": is_error }));
                    }
                    _ => {}
                }
            }
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({ "role": role, "parts": parts })
        })
        .collect();
    Ok(Some(
        json!({ "key": key, "summary": s.summary, "messages": shown }),
    ))
}

/// The usage chart: `days` UTC days up to today, each with `who`'s tally and, for the owner,
/// everyone's, each person's and each agent's per model.
pub(crate) async fn usage_days(app: &App, who: &Who<'_>, days: i64) -> Result<Value, PortError> {
    let ledger = app.ledger();
    let id = &who.conn.id;
    let today = ledger.today();
    let mut out = Vec::new();
    for day in (today - days.clamp(1, CHART_DAYS) + 1)..=today {
        let (date, mine) = ledger.on_day(id, day, Payer::User(who.user)).await?;
        let mut v = json!({ "day": date, "you": mine });
        if who.owner {
            v["everyone"] = json!(ledger.on_day(id, day, Payer::Everyone).await?.1);
            let people: Vec<Value> = ledger
                .people_on_day(id, day)
                .await?
                .into_iter()
                .map(|(user, t)| json!({ "id": user, "tally": t }))
                .collect();
            v["people"] = json!(people);
            let models: Vec<Value> = ledger
                .models_on_day(id, day)
                .await?
                .into_iter()
                .map(|(agent, model, t)| json!({ "agent": agent, "model": model, "tally": t }))
                .collect();
            v["models"] = json!(models);
        }
        out.push(v);
    }
    Ok(json!({ "days": out }))
}

/// Errors of the health page, at most.
const MAX_ERRORS: usize = 20;

/// The health page: the stores as the cockpit shows them, this instance's counts, and the
/// last things that went wrong on `who`'s bot (failed model or tool calls, retries, failed
/// turns) from the event journal's recent window, newest first.
pub(crate) async fn health(app: &App, who: &Who<'_>) -> Result<Value, PanelReply> {
    use crate::events::Event;
    let admin = app.admin();
    // Only this bot's: another bot of the same deployment may have another owner.
    let mut overview = admin.overview().await.map_err(unavailable)?;
    let ours = format!("{}:", who.conn.id);
    overview.sessions.retain(|s| s.0.starts_with(&ours));
    overview.lanes.retain(|l| l.lane.starts_with(&ours));
    overview.due.retain(|d| d.1 == who.conn.id.as_str());
    let page = admin.event_page(None).await.map_err(unavailable)?;
    let mine = format!("{}/", who.conn.id);
    let errors: Vec<Value> = page
        .events
        .iter()
        .rev()
        .filter(|s| s.trace.starts_with(&mine))
        .filter(|s| match &s.event {
            Event::Model { outcome, .. } => outcome != "ok",
            Event::Tool { error, .. } => *error,
            Event::RetryScheduled { .. } => true,
            Event::TurnEnded { outcome, .. } => outcome == "failed",
            _ => false,
        })
        .take(MAX_ERRORS)
        .map(|s| json!(s))
        .collect();
    Ok(json!({
        "overview": overview,
        "counts": admin.counts(),
        "errors": errors,
    }))
}
