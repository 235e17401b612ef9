//! What the assistant writes to memory on its own: a summary of a session that ended without
//! the model saving anything, appended to the daily note; and the daily consolidation that
//! promotes the durable points of past daily notes into `MEMORY.md`. Both ask the agent's own
//! model with a fixed prompt; a model that answers [`NOTHING`] writes nothing.

use crate::llm::{ChatMessage, ChatRequest, ModelChain, Role};

/// The answer that means "nothing worth keeping".
pub const NOTHING: &str = "NOTHING";

pub const SUMMARY_PROMPT: &str = "You keep the memory of a personal assistant. Below is a conversation that just ended. \
Write at most 5 short bullet points (\"- \") with what is worth remembering later: facts about the user, decisions, \
commitments, open tasks. No chit-chat, no greetings, nothing about yourself. \
If nothing is worth remembering, answer exactly NOTHING.";

pub const CONSOLIDATE_PROMPT: &str = "You keep the long-term memory (MEMORY.md) of a personal assistant. Below are the \
current MEMORY.md and a daily note. Write the bullet points (\"- \") of the daily note that are durable facts, \
preferences or decisions and are not already in MEMORY.md, at most 10, each one line. \
If there are none, answer exactly NOTHING.";

pub const COMPACT_PROMPT: &str = "You compact the history of a conversation between a user and their personal \
assistant. Below are the summary of its earliest part (if any) and the turns that followed. Write the new summary \
of all of it: at most 15 short bullet points (\"- \") with what the assistant needs to continue the conversation: \
the user's requests and goals, what was decided or done, facts and numbers given, open questions and tasks. \
Recent turns matter most. No greetings, nothing else.";

/// Longest transcript or note sent to the model, in characters (the tail is kept).
pub const MAX_INPUT_CHARS: usize = 24_000;

/// Whether the model saved anything during the session (a `memory_write` call).
pub fn wrote_memory(messages: &[ChatMessage]) -> bool {
    messages
        .iter()
        .any(|m| m.tool_uses().any(|(_, name, _)| name == "memory_write"))
}

/// The text of a session as `User: …` / `Assistant: …` lines, tool traffic left out; its
/// last [`MAX_INPUT_CHARS`].
pub fn transcript(messages: &[ChatMessage]) -> String {
    let lines: Vec<String> = messages.iter().filter_map(line).collect();
    tail(&lines.join("\n"), MAX_INPUT_CHARS).to_owned()
}

/// A message as a transcript line (`None`: no text).
fn line(m: &ChatMessage) -> Option<String> {
    let text = m.text();
    let text = text.trim();
    (!text.is_empty()).then(|| match m.role {
        Role::User => format!("User: {text}"),
        _ => format!("Assistant: {text}"),
    })
}

/// The transcript of `messages` in pieces of at most `max` characters, each with the index
/// of the message after its last: every message is in one piece (one longer than `max` alone
/// in its piece, its start kept).
pub fn pieces(messages: &[ChatMessage], max: usize) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut piece = String::new();
    for (i, m) in messages.iter().enumerate() {
        let Some(mut line) = line(m) else {
            continue;
        };
        if line.len() > max {
            let mut end = max;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
        }
        if !piece.is_empty() && piece.len() + 1 + line.len() > max {
            out.push((i, std::mem::take(&mut piece)));
        }
        if !piece.is_empty() {
            piece.push('\n');
        }
        piece.push_str(&line);
    }
    if !piece.is_empty() {
        out.push((messages.len(), piece));
    }
    out
}

/// The last `max` characters of `s` (on a char boundary).
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Bullet lines of a model answer: `None` for [`NOTHING`] or an answer without content.
pub fn bullets(answer: &str) -> Option<String> {
    let answer = answer.trim();
    if answer.is_empty() || answer.trim_end_matches('.').eq_ignore_ascii_case(NOTHING) {
        return None;
    }
    let lines: Vec<String> = answer
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.eq_ignore_ascii_case(NOTHING))
        .map(|l| {
            let l = l.trim_start_matches(['-', '*', '•']).trim();
            format!("- {l}")
        })
        .filter(|l| l.len() > 2)
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// When the model cannot be asked: the user's first messages, shortened, so the day's note
/// still says what was discussed.
pub fn fallback_summary(messages: &[ChatMessage]) -> Option<String> {
    let topics: Vec<String> = messages
        .iter()
        .filter(|m| m.role == Role::User && !m.has_tool_results())
        .map(|m| m.text().trim().replace('\n', " "))
        .filter(|t| !t.is_empty() && !t.starts_with('/'))
        .take(3)
        .map(|t| {
            let short: String = t.chars().take(120).collect();
            if short.len() < t.len() {
                format!("{short}…")
            } else {
                short
            }
        })
        .collect();
    (!topics.is_empty()).then(|| format!("- Talked about: {}", topics.join("; ")))
}

/// Asks `chain` with `system` and one user message; `Ok(None)` when it found nothing.
pub async fn ask(
    chain: &ModelChain,
    system: &str,
    input: String,
) -> Result<Option<String>, crate::llm::LlmError> {
    let request = ChatRequest {
        model: String::new(),
        system: system.to_owned(),
        messages: vec![ChatMessage::user_text(input)],
        tools: Default::default(),
        max_tokens: 600,
        ..Default::default()
    };
    let response = chain.chat(&request).await?;
    Ok(bullets(&response.message.text()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Block;
    use serde_json::json;

    #[test]
    fn bullets_are_normalised_and_nothing_is_none() {
        assert_eq!(bullets("NOTHING"), None);
        assert_eq!(bullets("nothing."), None);
        assert_eq!(bullets("  "), None);
        assert_eq!(
            bullets("- Ana lives in Lisbon\n* likes tea\n\nPrefers mornings").as_deref(),
            Some("- Ana lives in Lisbon\n- likes tea\n- Prefers mornings")
        );
    }

    #[test]
    fn memory_writes_are_seen_and_transcripts_skip_tools() {
        let call = ChatMessage {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: "t1".into(),
                name: "memory_write".into(),
                input: json!({"content": "x"}),
                signature: None,
            }],
        };
        let chat = vec![
            ChatMessage::user_text("hello"),
            ChatMessage::assistant_text("hi!"),
        ];
        assert!(!wrote_memory(&chat));
        assert!(wrote_memory(&[chat[0].clone(), call.clone()]));
        assert_eq!(
            transcript(&[chat[0].clone(), call, chat[1].clone()]),
            "User: hello\nAssistant: hi!"
        );
    }

    #[test]
    fn fallback_names_the_first_topics() {
        let chat = vec![
            ChatMessage::user_text("/start"),
            ChatMessage::user_text("plan a trip to Porto"),
            ChatMessage::assistant_text("sure"),
            ChatMessage::user_text("x".repeat(300)),
        ];
        let s = fallback_summary(&chat).unwrap();
        assert!(
            s.starts_with("- Talked about: plan a trip to Porto; xxx"),
            "{s}"
        );
        assert!(s.ends_with('…') && s.chars().count() < 170, "{s}");
        assert_eq!(fallback_summary(&[]), None);
    }

    #[test]
    fn tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(tail("abc", 10), "abc");
    }
}
