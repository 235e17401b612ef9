//! Sessions: the conversation history of one session key, persisted through Kv and bounded to
//! a window.
//!
//! Session key = connector + chat (+ topic) (+ user in groups).

use clawless_platform::{Kv, KvExt, PortError};
use serde::{Deserialize, Serialize};

use crate::ids::{ConnectorId, SessionKey};
use crate::llm::{ChatMessage, Role};
use crate::telegram::Message;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub messages: Vec<ChatMessage>,
    /// The last update whose turn was applied (names the session in summary markers).
    #[serde(default)]
    pub last_update_id: i64,
    /// The updates whose turns were applied, newest last, at most [`APPLIED_KEPT`]: applying
    /// a turn again is a no-op. Update ids are not assumed to grow (Telegram starts them again
    /// at random after a week without updates).
    #[serde(default)]
    pub applied: Vec<i64>,
    #[serde(default)]
    pub updated_ms: u64,
    /// The older turns, summarised when the session was compacted (`turn/compact.rs`); the
    /// model reads it before the messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The untrusted text the conversation read since the person last wrote (`the page
    /// https://…`, `a forwarded message`): still in the history, so a turn they did not start
    /// (a scheduled task firing) begins tainted with it (see
    /// [`crate::agent::RunState::carry`]). Each applied turn sets it anew: a turn begun by the
    /// person's own message clears it unless it read such text itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tainted: Option<String>,
}

/// The history's cut moves by a quarter of its window at a time (see [`trim`]).
pub const TRIM_STEP: usize = 4;

/// How many applied update ids a session remembers: more than a lane can have in flight.
pub const APPLIED_KEPT: usize = 64;

impl Session {
    /// Whether the turn of `update_id` was already applied.
    pub fn has_applied(&self, update_id: i64) -> bool {
        self.applied.contains(&update_id)
            || (self.applied.is_empty() && self.last_update_id == update_id)
    }

    /// Records the turn of `update_id` as applied.
    pub fn mark_applied(&mut self, update_id: i64) {
        self.applied.push(update_id);
        if self.applied.len() > APPLIED_KEPT {
            self.applied.drain(..self.applied.len() - APPLIED_KEPT);
        }
        self.last_update_id = update_id;
    }
}

/// About how many tokens `messages` take: 4 bytes of their JSON a token (tool calls and
/// results count as the model reads them).
pub fn estimate_tokens(messages: &[ChatMessage]) -> u64 {
    serde_json::to_vec(messages).map_or(0, |b| b.len() as u64 / 4)
}

/// What the model is given of a session: at most `window` messages, the summary of the
/// compacted turns first (in the first user message, so roles still alternate).
pub fn for_model(s: Session, window: usize) -> Vec<ChatMessage> {
    let mut messages = s.messages;
    trim(&mut messages, window);
    let Some(summary) = s.summary.filter(|t| !t.trim().is_empty()) else {
        return messages;
    };
    let text = format!(
        "[Summary of the earlier part of this conversation (older turns were compacted)]\n{summary}\n[End of summary]"
    );
    match messages.first_mut() {
        Some(first) if first.role == Role::User => {
            first.content.insert(0, crate::llm::Block::Text { text });
        }
        _ => {
            messages.insert(0, ChatMessage::assistant_text("Noted."));
            messages.insert(0, ChatMessage::user_text(text));
        }
    }
    messages
}

/// The session key for a message.
pub fn session_key(connector: &ConnectorId, msg: &Message) -> SessionKey {
    let mut key = format!("{connector}:{}", msg.chat.id.0);
    if let Some(topic) = msg.topic() {
        key.push_str(&format!(":t{topic}"));
    }
    if !msg.is_private() {
        if let Some(from) = &msg.from {
            key.push_str(&format!(":u{}", from.id.0));
        }
    }
    SessionKey::new(key)
}

pub async fn load(kv: &dyn Kv, session: &SessionKey) -> Result<Session, PortError> {
    match kv.get_json::<Session>(&crate::keys::session(session)).await {
        Ok(s) => Ok(s.unwrap_or_default()),
        Err(e) if e.kind == clawless_platform::ErrorKind::Invalid => {
            // A corrupt record must not wedge the chat: start over, and say so in the log.
            tracing::warn!(%session, error = %e, "session record unreadable; starting fresh");
            Ok(Session::default())
        }
        Err(e) => Err(e),
    }
}

/// The session, or a fresh one when it has been idle past `idle_ms` (`0`: never), with the
/// idle session it replaces, for the caller to end (summarise into memory). Only the applied
/// marks carry over, so no turn is applied twice.
pub async fn load_current(
    kv: &dyn Kv,
    session: &SessionKey,
    idle_ms: u64,
    now_ms: u64,
) -> Result<(Session, Option<Session>), PortError> {
    let s = load(kv, session).await?;
    if idle_ms > 0 && s.updated_ms > 0 && now_ms.saturating_sub(s.updated_ms) > idle_ms {
        let fresh = Session {
            last_update_id: s.last_update_id,
            applied: s.applied.clone(),
            ..Default::default()
        };
        return Ok((fresh, Some(s)));
    }
    Ok((s, None))
}

/// A turn to append to a session: the update it answers, its messages, and the untrusted
/// text the conversation holds after it ([`Session::tainted`]).
pub struct NewTurn<'a> {
    pub update_id: i64,
    pub messages: &'a [ChatMessage],
    pub tainted: Option<&'a str>,
}

/// Appends `turn` to the current session (see [`load_current`]) once, trimmed to `keep`
/// messages, and saves it: the session as saved, or `None` when that turn was applied
/// before.
pub async fn append_turn(
    kv: &dyn Kv,
    session: &SessionKey,
    turn: NewTurn<'_>,
    keep: usize,
    (idle_ms, now_ms): (u64, u64),
) -> Result<Option<Session>, PortError> {
    let NewTurn {
        update_id,
        messages,
        tainted,
    } = turn;
    let (mut s, _) = load_current(kv, session, idle_ms, now_ms).await?;
    if s.has_applied(update_id) {
        return Ok(None);
    }
    s.tainted = tainted.map(str::to_owned);
    s.messages.extend(messages.iter().cloned());
    trim(&mut s.messages, keep);
    s.mark_applied(update_id);
    s.updated_ms = now_ms;
    save(kv, session, &s).await?;
    Ok(Some(s))
}

pub async fn save(kv: &dyn Kv, session: &SessionKey, s: &Session) -> Result<(), PortError> {
    kv.put_json(&crate::keys::session(session), s, None).await
}

pub async fn clear(kv: &dyn Kv, session: &SessionKey) -> Result<(), PortError> {
    kv.delete(&crate::keys::session(session)).await
}

/// Keeps at most `window` messages, dropping from the front until the history starts with a
/// plain user message (never an orphaned tool result or an assistant turn). Past the window
/// the oldest go in steps of [`TRIM_STEP`] of it, counted from the front, not one turn at a
/// time: the history then begins with the same messages for the next several turns, and the
/// provider's prompt cache keeps reading it (a cut moved each turn would make every request
/// pay its whole history again).
pub fn trim(messages: &mut Vec<ChatMessage>, window: usize) {
    if messages.len() > window {
        let step = (window / TRIM_STEP).max(1);
        let over = messages.len() - window;
        let drop = over.div_ceil(step).saturating_mul(step);
        messages.drain(..drop.min(messages.len()));
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

    /// A conversation past its window, a turn at a time (a tool round every third turn): the
    /// history's first message, where the prompt cache's prefix of messages begins, moves
    /// once in several turns, not at each.
    #[test]
    fn the_cut_moves_in_steps_keeping_the_history_start_for_several_turns() {
        let window = 40;
        let mut stored: Vec<ChatMessage> = Vec::new();
        let (mut moves, mut turns, mut shortest) = (0, 0, usize::MAX);
        let mut first: Option<ChatMessage> = None;
        for turn in 0..120 {
            stored.push(ChatMessage::user_text(format!("question {turn}")));
            if turn % 3 == 2 {
                stored.push(ChatMessage::assistant_text(format!("calling {turn}")));
                stored.push(ChatMessage {
                    role: Role::User,
                    content: vec![Block::ToolResult {
                        tool_use_id: format!("t{turn}"),
                        content: "done".into(),
                        is_error: false,
                    }],
                });
            }
            stored.push(ChatMessage::assistant_text(format!("answer {turn}")));
            trim(&mut stored, window);
            assert!(stored.len() <= window);
            assert!(stored[0].role == Role::User && !stored[0].has_tool_results());
            if turn >= 30 {
                turns += 1;
                shortest = shortest.min(stored.len());
                moves += usize::from(first.as_ref() != stored.first());
            }
            first = stored.first().cloned();
        }
        assert!(moves * 3 <= turns, "{moves} moves in {turns} turns");
        assert!(shortest >= window - window / TRIM_STEP - 4, "{shortest}");
        // Read through a wider stored session (compaction on keeps twice the window), the
        // window's cut moves in the same steps.
        let mut wide: Vec<ChatMessage> = (0..60)
            .flat_map(|i| {
                [
                    ChatMessage::user_text(format!("q{i}")),
                    ChatMessage::assistant_text(format!("a{i}")),
                ]
            })
            .collect();
        wide.truncate(80);
        let starts: Vec<String> = (41..=60)
            .map(|len| {
                let mut seen = wide[..len].to_vec();
                trim(&mut seen, window);
                seen[0].text()
            })
            .collect();
        let distinct: std::collections::BTreeSet<&String> = starts.iter().collect();
        assert_eq!(distinct.len(), 2, "{starts:?}");
    }

    #[test]
    fn applied_turns_are_recognised_whatever_the_order_of_ids() {
        let mut s = Session::default();
        s.mark_applied(900_000);
        // Telegram restarted its ids: a lower id is new, not already applied.
        assert!(!s.has_applied(5));
        s.mark_applied(5);
        assert!(s.has_applied(5) && s.has_applied(900_000));
        for id in 10..(10 + APPLIED_KEPT as i64) {
            s.mark_applied(id);
        }
        assert_eq!(s.applied.len(), APPLIED_KEPT);
        assert!(!s.has_applied(900_000), "only the newest are kept");
        // A record from before the list existed still dedupes its last turn.
        let old = Session {
            last_update_id: 7,
            ..Default::default()
        };
        assert!(old.has_applied(7) && !old.has_applied(6));
    }
}
