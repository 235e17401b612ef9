#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::llm::chain::Link;
use crate::llm::{ChatResponse, Provider, StopReason};
use crate::tools::ToolRegistry;
use clawless_platform::FakeClock;
use futures::executor::block_on;
use serde_json::json;
use std::sync::Mutex;

/// A model that always asks for the same tool call.
struct Looping {
    calls: Mutex<usize>,
}

#[async_trait]
impl Provider for Looping {
    async fn chat(&self, _req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        *self.calls.lock().unwrap() += 1;
        Ok(ChatResponse {
            message: ChatMessage {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "t".into(),
                    name: "current_time".into(),
                    input: json!({}),
                }],
            },
            stop: StopReason::ToolUse,
        })
    }
}

fn agent(provider: Arc<dyn Provider>, max_rounds: u32) -> Agent {
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(1_700_000_000_000));
    let config = AgentConfig {
        id: "a".into(),
        name: None,
        models: vec!["p/m".into()],
        tools: vec!["current_time".into()],
        max_rounds,
        max_tokens: 100,
        tool_timeout_secs: 5,
        system_prompt: "sys".into(),
    };
    Agent {
        config,
        chain: ModelChain {
            links: vec![Link {
                label: "p/m".into(),
                provider,
                model: "m".into(),
                attempts: 1,
            }],
            clock: clock.clone(),
            base_backoff: Duration::from_millis(1),
            max_wait: Duration::from_secs(1),
        },
        tools: ToolRegistry::builtins(&["current_time".into()], clock.clone()).unwrap(),
        clock,
    }
}

#[test]
fn repeated_identical_calls_are_refused_and_rounds_are_bounded() {
    let model = Arc::new(Looping {
        calls: Mutex::new(0),
    });
    let a = agent(model.clone(), 4);
    let out = block_on(a.run_turn(&[], ChatMessage::user_text("hi"), &NoObserver)).unwrap();
    assert_eq!(
        *model.calls.lock().unwrap(),
        4,
        "max_rounds bounds the model calls"
    );
    assert!(out.reply.contains("stopped after 4 rounds"));
    let results: Vec<_> = out
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult { is_error, .. } => Some(*is_error),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [false, false, true, true],
        "third identical call onwards is refused"
    );
    // Every tool_use has its result, and the turn ends with the assistant's explanation.
    assert_eq!(out.messages.last().unwrap().role, Role::Assistant);
}

#[test]
fn unknown_tool_is_an_error_result() {
    let a = agent(
        Arc::new(Looping {
            calls: Mutex::new(0),
        }),
        1,
    );
    let (content, is_error) = block_on(a.call_tool("rm_rf", json!({})));
    assert!(is_error && content.contains("Unknown tool"), "{content}");
}

#[test]
fn long_results_are_truncated_at_a_char_boundary() {
    let s = "é".repeat(MAX_TOOL_RESULT);
    let t = truncate(s);
    assert!(t.len() < MAX_TOOL_RESULT + 100);
    assert!(t.ends_with("shown]"));
}
