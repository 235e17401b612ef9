//! The agent's tests of a turn resumed after a crash: a call cut mid-run is not run again, and
//! a round resumed runs only its calls without a result.

use super::*;

/// An unsafe tool that counts its calls.
struct Launch(Mutex<u32>);

#[async_trait]
impl crate::tools::Tool for Launch {
    fn level(&self) -> crate::tools::Level {
        crate::tools::Level::Unsafe
    }
    fn spec(&self) -> crate::llm::ToolSpec {
        crate::llm::ToolSpec {
            name: "launch".into(),
            description: "acts outside".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    async fn call(
        &self,
        _ctx: &ToolContext,
        _input: Value,
    ) -> Result<String, crate::tools::ToolError> {
        *self.0.lock().unwrap() += 1;
        Ok("launched".into())
    }
}

/// A model that asks for `launch` (call `t2`) once, then answers.
struct AsksLaunch(Mutex<u32>);

#[async_trait]
impl Provider for AsksLaunch {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut n = self.0.lock().unwrap();
        *n += 1;
        let message = match *n {
            1 => ChatMessage {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "t2".into(),
                    name: "launch".into(),
                    input: json!({}),
                    signature: None,
                }],
            },
            _ => ChatMessage::assistant_text(format!("{} messages", req.messages.len())),
        };
        Ok(ChatResponse {
            message,
            stop: StopReason::EndTurn,
            usage: Default::default(),
            cost_micros: 0,
            model: String::new(),
        })
    }
}

#[test]
fn a_call_cut_by_a_crash_is_not_run_again_and_its_tool_asks_again_under_a_grant() {
    let mut a = agent(Arc::new(AsksLaunch(Mutex::new(0))), 8);
    let launch = Arc::new(Launch(Mutex::new(0)));
    a.tools.register(launch.clone());
    // The state a crash left: `launch` (t1) began and has no result.
    let mut state = a.begin(ChatMessage::user_text("go"), "", "");
    state.messages.push(ChatMessage {
        role: Role::Assistant,
        content: vec![Block::ToolUse {
            id: "t1".into(),
            name: "launch".into(),
            input: json!({}),
            signature: None,
        }],
    });
    state.round = 1;
    state.running = Some("t1".into());
    let mut granted = ctx();
    granted.granted.insert("launch".into());
    assert_eq!(
        a.rule("launch", Level::Unsafe),
        Rule::Ask,
        "asks by default"
    );
    let step = block_on(a.run(&[], state, &granted, RunOptions::default())).unwrap();
    let Step::Ask { state, call } = step else {
        panic!("the second launch must ask although granted")
    };
    assert_eq!(call.id, "t2");
    assert_eq!(
        *launch.0.lock().unwrap(),
        0,
        "t1 did not run again, t2 not yet"
    );
    let results: Vec<&Block> = state.messages.iter().flat_map(|m| &m.content).collect();
    assert!(results.iter().any(|b| matches!(b,
        Block::ToolResult { tool_use_id, content, is_error: true }
            if tool_use_id == "t1" && content == UNKNOWN_OUTCOME)));
    assert!(state.running.is_none());
}

#[test]
fn a_round_resumed_runs_only_the_calls_without_a_result() {
    let mut a = agent(flaky(0, LlmError::Transient(String::new()), "done"), 8);
    let launch = Arc::new(Launch(Mutex::new(0)));
    a.tools.register(launch.clone());
    a.config.policy.unsafe_ = Rule::Allow;
    let mut state = a.begin(ChatMessage::user_text("go"), "", "");
    let uses = ["t1", "t2", "t3"].map(|id| Block::ToolUse {
        id: id.into(),
        name: "launch".into(),
        input: json!({ "n": id }),
        signature: None,
    });
    state.messages.push(ChatMessage {
        role: Role::Assistant,
        content: uses.to_vec(),
    });
    state.round = 1;
    // t2 finished before the crash, t1 not begun (it waits its turn), t3 not begun.
    state.results.push(Block::ToolResult {
        tool_use_id: "t2".into(),
        content: "kept".into(),
        is_error: false,
    });
    let Step::Done(out) = block_on(a.run(&[], state, &ctx(), RunOptions::default())).unwrap()
    else {
        panic!("answers")
    };
    assert_eq!(*launch.0.lock().unwrap(), 2, "t1 and t3 ran, t2 did not");
    let results: Vec<String> = out.messages[2]
        .content
        .iter()
        .map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                content,
                ..
            } => format!("{tool_use_id}={content}"),
            _ => String::new(),
        })
        .collect();
    assert_eq!(
        results,
        ["t1=launched", "t2=kept", "t3=launched"],
        "in call order"
    );
}
