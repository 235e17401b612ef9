//! `watch`: pages checked for changes in the conversation's chat (create, list, cancel), kept
//! as reminders whose firings check the page without the model (see [`crate::watch`]).

use std::sync::Arc;

use async_trait::async_trait;
use clawless_platform::{Clock, Kv};
use serde_json::{json, Value};

use super::{Level, Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;
use crate::schedule::{self as sched, Schedules, What};
use crate::watch;
use crate::watch::WatchConfig;

pub struct Watch {
    pub kv: Arc<dyn Kv>,
    pub clock: Arc<dyn Clock>,
    pub wake: Arc<crate::schedule::Wake>,
    /// What a watched URL must pass (as `web_fetch`'s).
    pub web: super::web::WebConfig,
    pub bounds: WatchConfig,
}

/// The longest period a watch may have: a week.
const MAX_EVERY_SECS: u64 = 7 * 86_400;

fn storage(e: impl std::fmt::Display) -> ToolError {
    ToolError(format!("watch storage is unavailable: {e}"))
}

#[async_trait]
impl Tool for Watch {
    /// A watch runs its task on its own, later, each time the page changes; cancelling one
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

    /// A watch is created once per [`ToolContext::call`]; listing reads; cancelling twice
    /// finds it gone.
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        let min = watch::shown_every(self.bounds.min_every_secs);
        ToolSpec {
            name: "watch".into(),
            description: format!("Watch a web page for changes in this chat: it is fetched every `every` without you, and only when its text changes do you get what changed and the `task` to carry out, answering in this chat (no model cost while nothing changes). action \"create\" takes `url` (http or https), `every` (e.g. 15m, 2h, 1d; at least {min}) and `task` (what to do when it changes, e.g. \"tell me what is new\"). \"list\" shows this chat's watches; \"cancel\" removes one by `id`."),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "list", "cancel"]},
                    "url": {"type": "string", "description": "the page to watch"},
                    "every": {"type": "string", "description": "how often to check, e.g. 15m, 2h, 1d"},
                    "task": {"type": "string", "description": "what to do when the page changes"},
                    "id": {"type": "integer", "description": "the watch to cancel"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let Some(origin) = ctx.origin.clone() else {
            return Err(ToolError(
                "watches exist only in a Telegram chat, not here".into(),
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
        if ctx.depth > 0 && matches!(action, Some("create" | "cancel")) {
            return Err(ToolError(
                "a sub-agent cannot set or cancel watches; say in your answer what should be watched".into(),
            ));
        }
        let field = |k: &str| input.get(k).and_then(Value::as_str).map(str::trim);
        match action {
            Some("list") => {
                let all = store.list(&connector, chat).await.map_err(storage)?;
                let lines: Vec<String> = all
                    .iter()
                    .filter_map(|r| {
                        let (url, every, task) = watch::parts(&r.what)?;
                        let every = watch::shown_every(every);
                        Some(format!("#{} {url} every {every}: {task}", r.id))
                    })
                    .collect();
                Ok(match lines.is_empty() {
                    true => "No watches in this chat.".into(),
                    false => lines.join("\n"),
                })
            }
            Some("cancel") => {
                let id = input
                    .get("id")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| ToolError("cancel needs the watch's id".into()))?;
                let held = store.list(&connector, chat).await.map_err(storage)?;
                if !held
                    .iter()
                    .any(|r| r.id == id && watch::parts(&r.what).is_some())
                {
                    return Err(ToolError(format!("this chat has no watch #{id}")));
                }
                match store.cancel(&connector, chat, id).await.map_err(storage)? {
                    Some(_) => Ok(format!("Cancelled watch #{id}.")),
                    None => Err(ToolError(format!("this chat has no watch #{id}"))),
                }
            }
            Some("create") => {
                let url = field("url").ok_or_else(|| ToolError("create needs a url".into()))?;
                let policy = super::web::fetch::policy_of(&self.web);
                let checked = super::web::guard::check(url, &policy)
                    .map_err(|r| ToolError(format!("this URL cannot be watched: {r}")))?;
                let every = field("every")
                    .ok_or_else(|| ToolError("create needs every (e.g. 15m, 2h, 1d)".into()))?;
                let secs = watch::parse_every(every).ok_or_else(|| {
                    ToolError(format!(
                        "every {every:?} is not a period like 15m, 2h or 1d"
                    ))
                })?;
                let min = self.bounds.min_every_secs;
                if !(min..=MAX_EVERY_SECS).contains(&secs) {
                    return Err(ToolError(format!(
                        "every must be at least {} and at most a week",
                        watch::shown_every(min)
                    )));
                }
                let task = field("task").filter(|t| !t.is_empty()).ok_or_else(|| {
                    ToolError("create needs a task: what to do when the page changes".into())
                })?;
                if task.chars().count() > sched::MAX_TEXT_CHARS {
                    let most = sched::MAX_TEXT_CHARS;
                    return Err(ToolError(format!(
                        "the task may have at most {most} characters"
                    )));
                }
                let held = store.list(&connector, chat).await.map_err(storage)?;
                let watching = held
                    .iter()
                    .filter(|r| watch::parts(&r.what).is_some())
                    .count();
                if watching >= self.bounds.max_per_chat {
                    return Err(ToolError(format!(
                        "this chat already has {watching} watches, the most it may have: cancel some first"
                    )));
                }
                let what = What::Watch {
                    url: checked.url.clone(),
                    every_secs: secs,
                    task: task.to_owned(),
                };
                // The first check learns the page at once; then every period.
                let first = sched::when::First {
                    next_ms: now.div_ceil(1000) * 1000 + 1000,
                    cron: None,
                };
                let zone = store.zone_of(&connector, chat).await.map_err(storage)?;
                let r = store
                    .create_once(&ctx.call, origin, what, first, &zone)
                    .await
                    .map_err(storage)?
                    .map_err(ToolError)?;
                Ok(format!(
                    "Watching {} as #{}: checked every {} without the model; the task runs only when its text changes. The first check, now, learns the page.",
                    checked.url,
                    r.id,
                    watch::shown_every(secs)
                ))
            }
            other => Err(ToolError(format!(
                "action must be create, list or cancel, got {other:?}"
            ))),
        }
    }
}
