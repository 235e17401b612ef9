//! Where a reminder belongs: the chat, topic and person that set it, and the message a
//! firing makes up in that chat.

use serde::{Deserialize, Serialize};

use crate::ids::ConnectorId;
use crate::telegram::{ChatKind, Message};

/// The chat a reminder belongs to and who set it: what a synthetic message in that chat
/// needs (its session, memory scope, topic).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub connector: ConnectorId,
    pub chat: i64,
    /// `private`, `group` or `supergroup`, as Telegram names it.
    pub chat_type: String,
    /// The forum topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<i64>,
    pub user: i64,
    #[serde(default)]
    pub user_name: String,
}

impl Origin {
    /// Where a reminder set in `msg`'s conversation fires: its chat, topic and sender.
    pub fn of(connector: &ConnectorId, msg: &Message) -> Origin {
        let chat_type = match msg.chat.kind {
            ChatKind::Private => "private",
            ChatKind::Group => "group",
            ChatKind::Supergroup => "supergroup",
            ChatKind::Channel => "channel",
            ChatKind::Other => "other",
        };
        let from = msg.from.as_ref();
        Origin {
            connector: connector.clone(),
            chat: msg.chat.id.0,
            chat_type: chat_type.into(),
            thread: msg.topic(),
            user: from.map_or(0, |u| u.id.0),
            user_name: from.map(|u| u.first_name.clone()).unwrap_or_default(),
        }
    }

    /// The update a firing's job carries: a message in this chat (and topic) from the person
    /// who set the reminder, numbered `update_id` (negative), so the turn stage finds the
    /// session, memory scope and topic as for their own message. The bot made it up: it is
    /// only ever built here, never accepted from a webhook.
    pub fn message(&self, update_id: i64, at_ms: u64, text: &str) -> serde_json::Value {
        let mut message = serde_json::json!({
            "message_id": update_id,
            "date": at_ms / 1000,
            "chat": {"id": self.chat, "type": self.chat_type},
            "from": {"id": self.user, "is_bot": false, "first_name": self.user_name},
            "text": text,
        });
        if let Some(t) = self.thread {
            message["message_thread_id"] = t.into();
            message["is_topic_message"] = true.into();
        }
        serde_json::json!({"update_id": update_id, "message": message})
    }
}
