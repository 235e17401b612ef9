//! `message`: sends a message now, while the turn goes on — progress during a long task, or a
//! note to another person the bot serves. To the conversation's own chat (and topic) it is
//! Guarded; to another chat it is Unsafe (it acts outside the conversation), so under the
//! default policy it asks first. Another chat may only be the private chat of a user allowed
//! on the same bot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::ids::ConnectorId;
use crate::llm::ToolSpec;
use crate::telegram::api::Target;
use crate::telegram::render::render_parts;
use crate::telegram::BotApi;
use crate::tools::{Level, Tool, ToolContext, ToolError};

/// The longest text sent in one call.
pub const MAX_TEXT: usize = 4000;

/// A bot the tool can send through, and who it serves.
pub struct Outbound {
    pub bot: Arc<BotApi>,
    pub allowed: BTreeSet<i64>,
}

pub struct MessageTool {
    pub bots: Arc<BTreeMap<ConnectorId, Outbound>>,
}

/// The chat a call names, when it names one other than the conversation's.
fn other_chat(ctx: &ToolContext, input: &Value) -> Option<i64> {
    let chat = input.get("chat_id").and_then(Value::as_i64)?;
    (ctx.origin.as_ref().map(|o| o.chat) != Some(chat)).then_some(chat)
}

#[async_trait]
impl Tool for MessageTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "message".into(),
            description: "Send a message right away (Markdown), before your answer: progress \
                during a long task. Without chat_id it goes to this conversation; with chat_id, \
                to that person's private chat (only people this bot serves; that needs \
                approval)."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "What to send."},
                    "chat_id": {"type": "integer", "description": "Another person's user id (their private chat); leave out for this chat."}
                },
                "required": ["text"]
            }),
        }
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// To another person: unsafe, so it asks, also after untrusted text. To this chat it
    /// does not ask even then: it says nothing the answer could not, where the answer goes.
    fn level_for(&self, ctx: &ToolContext, input: &Value) -> Level {
        match other_chat(ctx, input) {
            Some(_) => Level::Unsafe,
            None => Level::Guarded,
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let Some(origin) = &ctx.origin else {
            return Err(ToolError("message works only in a Telegram chat".into()));
        };
        let text = input
            .get("text")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| ToolError("text is required (a non-empty string)".into()))?;
        if text.chars().count() > MAX_TEXT {
            return Err(ToolError(format!(
                "the text is over {MAX_TEXT} characters: send less, or put it in your answer"
            )));
        }
        let out = self
            .bots
            .get(&origin.connector)
            .ok_or_else(|| ToolError("this bot cannot send messages here".into()))?;
        let target = match other_chat(ctx, &input) {
            None => Target {
                chat_id: origin.chat,
                thread_id: origin.thread,
            },
            Some(chat) if chat > 0 && out.allowed.contains(&chat) => Target {
                chat_id: chat,
                thread_id: None,
            },
            Some(chat) => {
                return Err(ToolError(format!(
                    "chat {chat} is not the private chat of someone this bot serves"
                )))
            }
        };
        for part in render_parts(text) {
            out.bot
                .send_message(target, &part.text, part.html, None)
                .await
                .map_err(|e| ToolError(format!("the message was not sent: {e}")))?;
        }
        Ok(match target.chat_id == origin.chat {
            true => "Sent.".into(),
            false => format!("Sent to chat {}.", target.chat_id),
        })
    }
}
