//! Compaction: a session whose history grew past its budget keeps its recent turns word for
//! word and folds the older ones into a summary the model reads first. Before they go, what
//! is worth remembering among them is appended to today's daily note (as a session's summary
//! is when it ends), so durable facts outlive the compaction in searchable memory.

use super::digest;
use super::lifecycle::Lifecycle;
use super::notes::note_of_day;
use crate::ids::{Scope, SessionKey};
use crate::keys;
use crate::llm::{ModelChain, Role};
use crate::session::Session;

/// The longest summary kept (characters); a longer answer is cut at a line.
pub const MAX_SUMMARY_CHARS: usize = 6_000;

/// At most this many summariser calls in one compaction: older turns past what they hold stay
/// in the session for the next one.
pub const MAX_PIECES: usize = 4;

const DAY_MS: u64 = 86_400_000;
const WEEK: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compacted {
    /// Messages folded into the summary (0: nothing to compact).
    pub folded: usize,
    /// Facts were written to memory.
    pub facts: bool,
    /// The summary came from the model (else from the topics alone: the model failed).
    pub by_model: bool,
}

/// Where the recent part of `messages` begins when about `keep` are kept: at a user message
/// that is not tool results (a turn's start), so no tool call loses its result. 0 when nothing
/// older can be folded.
pub fn split_at(messages: &[crate::llm::ChatMessage], keep: usize) -> usize {
    let starts_turn = |i: &usize| {
        let m = &messages[*i];
        m.role == Role::User && !m.has_tool_results()
    };
    let from = messages.len().saturating_sub(keep.max(1));
    (from..messages.len())
        .find(starts_turn)
        .or_else(|| (1..from).rev().find(starts_turn))
        .unwrap_or(0)
}

/// Whether a session of `messages` is due to be compacted: past the window, or past the
/// token budget with enough older text to fold (a quarter of the budget, so a long recent
/// part alone does not cost two model calls after every turn).
/// The budget, window and kept messages are `session:`'s `compact_tokens`, `history_window`
/// and `keep_recent`.
pub fn is_due(
    messages: &[crate::llm::ChatMessage],
    compact_tokens: u64,
    window: usize,
    keep: usize,
) -> bool {
    if compact_tokens == 0 {
        return false;
    }
    if messages.len() > window {
        return true;
    }
    let split = split_at(messages, keep);
    split > 0
        && crate::session::estimate_tokens(messages) > compact_tokens
        && crate::session::estimate_tokens(&messages[..split]) >= compact_tokens / 4
}

impl Lifecycle<'_> {
    /// Folds the messages of `s` before its last `keep` into `s.summary`, first appending what
    /// is worth remembering among them to today's daily note of `scope` (once per compaction
    /// point, `compacted/…`, even when the job around it is retried). Model failures fall
    /// back: no facts, and a summary of the topics; the session always ends up compacted.
    pub async fn compact(
        &self,
        chain: &ModelChain,
        scope: &Scope,
        key: &SessionKey,
        s: &mut Session,
        keep: usize,
    ) -> Compacted {
        let mut split = split_at(&s.messages, keep);
        // The summariser reads the older turns in pieces of its window; only what it read is
        // removed (past MAX_PIECES, the rest waits at the next turn start).
        let mut pieces = digest::pieces(&s.messages[..split], digest::MAX_INPUT_CHARS);
        if pieces.len() > MAX_PIECES {
            pieces.truncate(MAX_PIECES);
            let read = pieces.last().map_or(0, |(end, _)| *end);
            split = split_at(&s.messages[..read], 0).min(split);
            pieces = digest::pieces(&s.messages[..split], digest::MAX_INPUT_CHARS);
        }
        if split == 0 {
            return Compacted::default();
        }
        let older = &s.messages[..split];
        let transcript = digest::transcript(older);
        let mut facts = false;
        let marker = keys::compacted(key, s.last_update_id);
        match self.kv.put_if_absent(&marker, b"1", Some(WEEK)).await {
            Ok(true) => {
                match digest::ask(chain, digest::SUMMARY_PROMPT, transcript.clone()).await {
                    Ok(Some(found)) => {
                        let note = note_of_day((self.clock.now_ms() / DAY_MS) as i64);
                        let text = format!("## Kept from a compacted conversation\n{found}");
                        match self.memory.append(scope, &note, &text).await {
                            Ok(()) => facts = true,
                            Err(e) => {
                                tracing::warn!(%scope, error = %e, "compaction facts not saved")
                            }
                        }
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "compaction facts: the model failed"),
                }
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "compaction facts skipped"),
        }
        // A summary of summaries: each piece folded into the summary so far.
        let mut folded: Result<Option<String>, crate::llm::LlmError> = Ok(s.summary.clone());
        for (_, piece) in &pieces {
            let Ok(so_far) = &folded else { break };
            let earlier = so_far.as_deref().unwrap_or("(none)");
            let input = format!("Summary so far:\n{earlier}\n\nThe turns that followed:\n{piece}");
            folded = match digest::ask(chain, digest::COMPACT_PROMPT, input).await {
                Ok(Some(summary)) => Ok(Some(cut(&summary, MAX_SUMMARY_CHARS).to_owned())),
                Ok(None) => Ok(so_far.clone()),
                Err(e) => Err(e),
            };
        }
        let (summary, by_model) = match folded {
            Ok(Some(summary)) if !pieces.is_empty() => (summary, true),
            other => {
                if let Err(e) = other {
                    tracing::warn!(error = %e, "compaction summary: the model failed; keeping the topics");
                }
                let topics = digest::fallback_summary(older).unwrap_or_default();
                let joined = match s.summary.as_deref() {
                    Some(prev) => format!("{prev}\n{topics}"),
                    None => topics,
                };
                (joined, false)
            }
        };
        s.summary = Some(cut(&summary, MAX_SUMMARY_CHARS).to_owned());
        s.messages.drain(..split);
        Compacted {
            folded: split,
            facts,
            by_model,
        }
    }
}

/// `text` cut to at most `max` bytes at a line end (else a char boundary), the start kept.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind('\n') {
        Some(nl) if nl > 0 => &text[..nl],
        _ => &text[..end],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Block, ChatMessage};

    fn tool_result() -> ChatMessage {
        ChatMessage {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "1".into(),
                content: "x".into(),
                is_error: false,
            }],
        }
    }

    #[test]
    fn the_split_falls_where_a_turn_begins() {
        let m = vec![
            ChatMessage::user_text("a"),
            ChatMessage::assistant_text("b"),
            ChatMessage::user_text("c"),
            ChatMessage::assistant_text("calls a tool"),
            tool_result(),
            ChatMessage::assistant_text("d"),
        ];
        // Keeping 3 would start at the tool result: the turn "c" is kept whole instead.
        assert_eq!(split_at(&m, 3), 2);
        assert_eq!(split_at(&m, 4), 2);
        assert_eq!(split_at(&m, 1), 2);
        // Everything kept: nothing to fold.
        assert_eq!(split_at(&m, 6), 0);
        assert_eq!(split_at(&m[..2], 1), 0);
    }

    #[test]
    fn summaries_are_cut_at_a_line() {
        assert_eq!(cut("- a\n- bb\n- ccc", 9), "- a\n- bb");
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("ééé", 3), "é");
    }
}
