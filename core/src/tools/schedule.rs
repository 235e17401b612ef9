//! `schedule`: reminders and scheduled tasks in the conversation's chat (create at a time, in
//! some minutes or on a cron expression; list; cancel), on the store of [`crate::schedule`].

use std::sync::Arc;

use async_trait::async_trait;
use clawless_platform::{Clock, Kv};
use serde_json::{json, Value};

use super::{Level, Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;
use crate::schedule::zone::Zone;
use crate::schedule::{self as sched, Reminder, Schedules, What};

pub struct Schedule {
    pub kv: Arc<dyn Kv>,
    pub clock: Arc<dyn Clock>,
    pub wake: Arc<crate::schedule::Wake>,
}

fn storage(e: impl std::fmt::Display) -> ToolError {
    ToolError(format!("reminder storage is unavailable: {e}"))
}

#[async_trait]
impl Tool for Schedule {
    fn stays_inside(&self) -> bool {
        true
    }

    /// A reminder or a scheduled task acts later, on its own (a task runs the model with its
    /// tools; a reminder's text is sent, again and again if recurring); cancelling one
    /// removes what the person set. Listing does neither.
    fn acts_beyond(&self, input: &Value) -> bool {
        matches!(
            input.get("action").and_then(Value::as_str),
            Some("create" | "cancel")
        )
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// A reminder is created once per [`ToolContext::call`]; listing reads; cancelling twice
    /// finds it gone.
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "schedule".into(),
            description: "Reminders and scheduled tasks in this chat. action \"create\" takes exactly one of `at` (an ISO 8601 date-time such as 2026-03-29T09:00, in the chat's time zone unless it carries an offset), `in_minutes`, or `cron` (minute hour day-of-month month day-of-week, in the chat's time zone), and exactly one of `text` (sent as is when due) or `prompt` (a task you carry out when due, with your tools, answering in this chat); `zone` (IANA, e.g. Europe/Berlin) overrides the chat's time zone for this one. A `prompt` with `if_changed` (a watch's id) runs only when that watch saw its page change since its last run. \"list\" shows this chat's reminders and its time zone; \"cancel\" removes one by `id`.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "list", "cancel"]},
                    "at": {"type": "string", "description": "ISO 8601 date-time, e.g. 2026-03-29T09:00"},
                    "in_minutes": {"type": "number", "description": "minutes from now"},
                    "cron": {"type": "string", "description": "5-field cron, e.g. 0 9 * * mon-fri"},
                    "text": {"type": "string", "description": "the reminder's text"},
                    "prompt": {"type": "string", "description": "the task to run when due"},
                    "zone": {"type": "string", "description": "IANA time zone"},
                    "if_changed": {"type": "integer", "description": "a watch's id: the prompt runs only when that watch saw its page change since the last run"},
                    "id": {"type": "integer", "description": "the reminder to cancel"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let Some(origin) = ctx.origin.clone() else {
            return Err(ToolError(
                "reminders exist only in a Telegram chat, not here".into(),
            ));
        };
        let store = Schedules {
            kv: &*self.kv,
            clock: &*self.clock,
            wake: Some(&self.wake),
        };
        let (connector, chat) = (origin.connector.clone(), origin.chat);
        let now = self.clock.now_ms();
        let action = input.get("action").and_then(Value::as_str);
        // A reminder fires as a turn of the chat's own agent, with all its tools: a sub-agent
        // setting one would step out of the tools and policy it was cut to.
        if ctx.depth > 0 && matches!(action, Some("create" | "cancel")) {
            return Err(ToolError(
                "a sub-agent cannot set or cancel reminders; say in your answer what should be scheduled"
                    .into(),
            ));
        }
        match action {
            Some("list") => {
                let zone = store.zone_of(&connector, chat).await.map_err(storage)?;
                let all = store.list(&connector, chat).await.map_err(storage)?;
                let mut out = format!("Time zone of this chat: {}.", zone.name);
                if all.is_empty() {
                    out.push_str(" No reminders.");
                }
                for r in &all {
                    out.push('\n');
                    out.push_str(&describe(r, &zone, now, 200));
                }
                Ok(out)
            }
            Some("cancel") => {
                let id = input
                    .get("id")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| ToolError("cancel needs the reminder's id".into()))?;
                match store.cancel(&connector, chat, id).await.map_err(storage)? {
                    Some(_) => Ok(format!("Cancelled reminder #{id}.")),
                    None => Err(ToolError(format!("this chat has no reminder #{id}"))),
                }
            }
            Some("create") => {
                let what = what(&input)?;
                let zone = match input.get("zone").and_then(Value::as_str) {
                    Some(z) => Zone::find(z).ok_or_else(|| {
                        ToolError(format!(
                            "unknown time zone {z:?}: use an IANA name like Europe/Berlin or an offset like +02:00"
                        ))
                    })?,
                    None => store.zone_of(&connector, chat).await.map_err(storage)?,
                };
                let first = sched::when::first(&input, now, &zone).map_err(ToolError)?;
                let held = store.list(&connector, chat).await.map_err(storage)?;
                if let What::Gated { watch, .. } = &what {
                    let is_watch =
                        |r: &&Reminder| r.id == *watch && crate::watch::parts(&r.what).is_some();
                    if !held.iter().any(|r| is_watch(&r)) {
                        return Err(ToolError(format!(
                            "this chat has no watch #{watch} (see the watch tool)"
                        )));
                    }
                }
                sched::when::task_bounds(&what, &first, &zone, &held, now).map_err(ToolError)?;
                // Keyed by the call: made again after a restart, it is one reminder.
                let gated = match &what {
                    What::Gated { watch, .. } => Some(*watch),
                    _ => None,
                };
                let r = store
                    .create_once(&ctx.call, origin, what, first, &zone)
                    .await
                    .map_err(storage)?
                    .map_err(ToolError)?;
                if let Some(watch) = gated {
                    // Changes from now on open it, not those the watch saw before.
                    let kv = &*self.kv;
                    let seen = crate::watch::State::read(kv, &connector, chat, watch);
                    let changes = seen.await.map_err(storage)?.changes;
                    let gate = crate::watch::Gate { changes, by: 0 };
                    gate.write(kv, &connector, chat, r.id)
                        .await
                        .map_err(storage)?;
                }
                Ok(format!("Scheduled. {}", describe(&r, &zone, now, 200)))
            }
            other => Err(ToolError(format!(
                "action must be create, list or cancel, got {other:?}"
            ))),
        }
    }
}

/// `text` or `prompt`, exactly one, not empty, within the cap.
fn what(input: &Value) -> Result<What, ToolError> {
    let field = |k: &str| input.get(k).and_then(Value::as_str).map(str::trim);
    let (what, body) = match (field("text"), field("prompt")) {
        (Some(t), None) => (What::Text(t.to_owned()), t),
        (None, Some(p)) => match input.get("if_changed").filter(|v| !v.is_null()) {
            None => (What::Prompt(p.to_owned()), p),
            Some(w) => {
                let watch = w.as_u64().ok_or_else(|| {
                    ToolError("if_changed is the id of one of this chat's watches".into())
                })?;
                let prompt = p.to_owned();
                (What::Gated { prompt, watch }, p)
            }
        },
        _ => return Err(ToolError("give exactly one of text or prompt".into())),
    };
    if body.is_empty() {
        return Err(ToolError("the text or prompt is empty".into()));
    }
    let chars = body.chars().count();
    if chars > sched::MAX_TEXT_CHARS {
        return Err(ToolError(format!(
            "the text or prompt has {chars} characters, more than the {} a reminder may hold",
            sched::MAX_TEXT_CHARS
        )));
    }
    Ok(what)
}

/// `#3 next at 2026-03-29 09:00 (Sunday), Europe/Berlin (UTC+02:00) (in 2 h 5 min),
/// repeating "0 9 * * *" in Europe/Berlin: text "stretch"`, the text cut to `max_chars`.
pub fn describe(r: &Reminder, zone: &Zone, now_ms: u64, max_chars: usize) -> String {
    // Seconds only when the time has them (written so for the 1.85 MSRV: no is_multiple_of).
    let whole_minute = r.next_ms / 60_000 * 60_000 == r.next_ms;
    let at = zone.format((r.next_ms / 1000) as i64, !whole_minute);
    let repeats = match &r.cron {
        Some(c) => format!(", repeating {c:?} in {}", r.zone),
        None => String::new(),
    };
    let (kind, body) = match &r.what {
        What::Text(t) => ("text", t),
        What::Prompt(p) => ("task", p),
        What::Gated { prompt, .. } => ("task when its watch saw a change", prompt),
        What::Spawn { task, .. } => ("background task", task),
        What::Done { answer, .. } => ("background answer", answer),
        What::Hook { text, .. } => ("hook delivery", text),
        What::Watch { task, .. } => ("watch", task),
    };
    let body: String = match body.chars().nth(max_chars) {
        Some(_) => body.chars().take(max_chars).chain(['…']).collect(),
        None => body.clone(),
    };
    format!(
        "#{} next at {at} ({}){repeats}: {kind} {body:?}",
        r.id,
        sched::until(now_ms, r.next_ms)
    )
}
