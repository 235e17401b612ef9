//! Sessions: the conversation history of one session key, persisted through Kv and bounded to
//! a window.
//!
//! Session key = connector + chat (+ topic) (+ user in groups).

use clawless_platform::{Kv, KvExt, PortError};
use serde::{Deserialize, Serialize};

use crate::llm::{ChatMessage, Role};
use crate::telegram::Message;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub messages: Vec<ChatMessage>,
    /// The last update whose turn was applied: applying a turn again is a no-op.
    #[serde(default)]
    pub last_update_id: i64,
    #[serde(default)]
    pub updated_ms: u64,
}

/// The session key for a message.
pub fn session_key(connector: &str, msg: &Message) -> String {
    let mut key = format!("{connector}:{}", msg.chat.id.0);
    if let Some(topic) = msg.topic() {
        key.push_str(&format!(":t{topic}"));
    }
    if !msg.is_private() {
        if let Some(from) = &msg.from {
            key.push_str(&format!(":u{}", from.id.0));
        }
    }
    key
}

fn kv_key(session: &str) -> String {
    format!("session/{session}")
}

pub async fn load(kv: &dyn Kv, session: &str) -> Result<Session, PortError> {
    match kv.get_json::<Session>(&kv_key(session)).await {
        Ok(s) => Ok(s.unwrap_or_default()),
        Err(e) if e.kind == clawless_platform::ErrorKind::Invalid => {
            // A corrupt record must not wedge the chat: start over, and say so in the log.
            tracing::warn!(session, error = %e, "session record unreadable; starting fresh");
            Ok(Session::default())
        }
        Err(e) => Err(e),
    }
}

pub async fn save(kv: &dyn Kv, session: &str, s: &Session) -> Result<(), PortError> {
    kv.put_json(&kv_key(session), s, None).await
}

pub async fn clear(kv: &dyn Kv, session: &str) -> Result<(), PortError> {
    kv.delete(&kv_key(session)).await
}

/// Keeps at most `window` messages, dropping from the front until the history starts with a
/// plain user message (never an orphaned tool result or an assistant turn).
pub fn trim(messages: &mut Vec<ChatMessage>, window: usize) {
    if messages.len() > window {
        messages.drain(..messages.len() - window);
    }
    let start = messages
        .iter()
        .position(|m| m.role == Role::User && !m.has_tool_results())
        .unwrap_or(messages.len());
    messages.drain(..start);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Block;

    #[test]
    fn trim_never_starts_with_tool_results() {
        let tool_result = ChatMessage {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "1".into(),
                content: "x".into(),
                is_error: false,
            }],
        };
        let mut m = vec![
            ChatMessage::user_text("a"),
            ChatMessage::assistant_text("b"),
            tool_result,
            ChatMessage::assistant_text("c"),
            ChatMessage::user_text("d"),
            ChatMessage::assistant_text("e"),
        ];
        trim(&mut m, 4);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].text(), "d");
    }
}
