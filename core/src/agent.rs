//! The agent turn: the model ↔ tools loop with a round limit, repeat detection, per-tool
//! timeouts and truncated results. Tool errors go back to the model, not to the user.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clawless_platform::Clock;
use futures::future::{select, Either};
use serde_json::Value;

use crate::config::AgentConfig;
use crate::llm::{Block, ChatMessage, ChatRequest, LlmError, ModelChain, Role};
use crate::tools::{ToolContext, ToolRegistry};

/// Tool results longer than this are cut (at a character boundary) with a note.
pub const MAX_TOOL_RESULT: usize = 64 * 1024;
/// An identical call (same tool, same input) past this many times in one turn is refused.
pub const MAX_IDENTICAL_CALLS: usize = 2;

pub struct Agent {
    pub config: AgentConfig,
    pub chain: ModelChain,
    pub tools: ToolRegistry,
    pub clock: Arc<dyn Clock>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutput {
    /// The text to send to the user.
    pub reply: String,
    /// The turn's messages to append to the session: the user's, then the model's and tools'.
    pub messages: Vec<ChatMessage>,
}

impl Agent {
    /// Runs one user turn to a final answer. `recall` (memories found for this turn) is
    /// appended to the system prompt when not empty.
    pub async fn run_turn(
        &self,
        history: &[ChatMessage],
        user: ChatMessage,
        ctx: &ToolContext,
        recall: &str,
    ) -> Result<TurnOutput, LlmError> {
        let mut messages: Vec<ChatMessage> = history.to_vec();
        let start = messages.len();
        messages.push(user);
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let tools = self.tools.specs();
        let system = if recall.trim().is_empty() {
            self.config.system_prompt.clone()
        } else {
            format!(
                "{}\n\n## Relevant memories\n{recall}",
                self.config.system_prompt.trim_end()
            )
        };
        for _round in 0..self.config.max_rounds {
            let request = ChatRequest {
                model: String::new(),
                system: system.clone(),
                messages: messages.clone(),
                tools: tools.clone(),
                max_tokens: self.config.max_tokens,
            };
            let response = self.chain.chat(&request).await?;
            let calls: Vec<(String, String, Value)> = response
                .message
                .tool_uses()
                .map(|(id, n, i)| (id.to_owned(), n.to_owned(), i.clone()))
                .collect();
            messages.push(response.message);
            if calls.is_empty() {
                let reply = messages.last().map(ChatMessage::text).unwrap_or_default();
                let reply = if reply.trim().is_empty() {
                    "(The model returned an empty answer.)".to_owned()
                } else {
                    reply
                };
                return Ok(TurnOutput {
                    reply,
                    messages: messages.split_off(start),
                });
            }
            let mut results = Vec::with_capacity(calls.len());
            for (id, name, input) in calls {
                let key = format!("{name}\u{0}{input}");
                let count = seen.entry(key).or_default();
                *count += 1;
                let (content, is_error) = if *count > MAX_IDENTICAL_CALLS {
                    ("This exact call was already made twice in this turn; it was not run again. Use the earlier results.".to_owned(), true)
                } else {
                    self.call_tool(ctx, &name, input).await
                };
                results.push(Block::ToolResult {
                    tool_use_id: id,
                    content,
                    is_error,
                });
            }
            messages.push(ChatMessage {
                role: Role::User,
                content: results,
            });
        }
        // Out of rounds: the history must still pair every tool_use with a result, which the
        // last round did; close the turn with an explanation the user sees.
        let reply = format!(
            "I stopped after {} rounds of tool calls without reaching an answer. Try asking in smaller steps.",
            self.config.max_rounds
        );
        messages.push(ChatMessage::assistant_text(reply.clone()));
        Ok(TurnOutput {
            reply,
            messages: messages.split_off(start),
        })
    }

    /// Runs one tool with the agent's timeout; returns `(content, is_error)`.
    async fn call_tool(&self, ctx: &ToolContext, name: &str, input: Value) -> (String, bool) {
        let Some(tool) = self.tools.get(name) else {
            return (
                format!(
                    "Unknown tool {name:?}. Available: {}",
                    self.tools.names().join(", ")
                ),
                true,
            );
        };
        let timeout = Duration::from_secs(self.config.tool_timeout_secs);
        let call = tool.call(ctx, input);
        let sleep = self.clock.sleep(timeout);
        match select(call, sleep).await {
            Either::Left((Ok(out), _)) => (truncate(out), false),
            Either::Left((Err(e), _)) => (truncate(e.0), true),
            Either::Right(_) => (
                format!(
                    "Tool {name} did not finish within {}s; what it did before that may have taken effect.",
                    timeout.as_secs()
                ),
                true,
            ),
        }
    }
}

/// Cuts `s` to [`MAX_TOOL_RESULT`] bytes at a character boundary, saying so.
pub fn truncate(mut s: String) -> String {
    if s.len() <= MAX_TOOL_RESULT {
        return s;
    }
    let mut end = MAX_TOOL_RESULT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let total = s.len();
    s.truncate(end);
    s.push_str(&format!(
        "\n[truncated: {total} bytes in all, first {end} shown]"
    ));
    s
}

#[cfg(test)]
mod tests;
