#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::agent::Agent;
use crate::config::AgentConfig;
use crate::llm::chain::Link;
use crate::llm::{
    Block, ChatMessage, ChatRequest, ChatResponse, LlmError, ModelChain, Provider, Role, StopReason,
};
use crate::memory::embed::{EmbedError, EmbeddingProvider, LocalEmbedder};
use crate::memory::store::SearchConfig;
use crate::tools::{ToolDeps, ToolRegistry};
use clawless_platform::{FakeClock, Platform};
use futures::executor::block_on;
use std::sync::Mutex;

#[test]
fn only_memory_files_are_reachable() {
    assert!(checked_path("MEMORY.md").is_ok());
    assert!(checked_path("memory/2026-11-22.md").is_ok());
    for bad in [
        "../secrets.md",
        "memory/../../x.md",
        "memory/2026-1-2.md",
        "notes.md",
        "/etc/passwd",
    ] {
        assert!(checked_path(bad).is_err(), "{bad}");
    }
}

/// An embedder that never answers: indexing with it never ends.
struct Never;

#[async_trait]
impl EmbeddingProvider for Never {
    fn dims(&self) -> usize {
        384
    }
    fn id(&self) -> String {
        "never".into()
    }
    async fn embed(&self, _texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        futures::future::pending::<()>().await;
        Ok(Vec::new())
    }
}

fn memory(p: &Platform, embedder: Arc<dyn EmbeddingProvider>, config: SearchConfig) -> MemoryStore {
    MemoryStore {
        files: p.files.clone(),
        kv: p.kv.clone(),
        vectors: p.vectors.clone(),
        text: p.text.clone(),
        embedder,
        config,
    }
}

fn ctx() -> ToolContext {
    ToolContext {
        scope: "assistant/main".into(),
        granted: Default::default(),
        origin: None,
        depth: 0,
        budget: None,
        call: String::new(),
        tainted: None,
        allowance: None,
    }
}

/// A model that asks for one `memory_write`, then answers "done".
struct WritesOnce(Mutex<u32>);

#[async_trait]
impl Provider for WritesOnce {
    async fn chat(&self, _req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut n = self.0.lock().unwrap();
        *n += 1;
        if *n > 1 {
            return Ok(ChatResponse {
                message: ChatMessage::assistant_text("done"),
                stop: StopReason::EndTurn,
                usage: Default::default(),
                cost_micros: 0,
                model: String::new(),
            });
        }
        Ok(ChatResponse {
            message: ChatMessage {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "w".into(),
                    name: "memory_write".into(),
                    input: json!({"content": "The spare key is under the blue pot.", "target": "long_term"}),
                    signature: None,
                }],
            },
            stop: StopReason::ToolUse,
            usage: Default::default(),
            cost_micros: 0,
            model: String::new(),
        })
    }
}

#[test]
fn a_write_whose_indexing_outlasts_the_budget_is_reported_saved() {
    let (p, _, _) = Platform::in_memory();
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(1_700_000_000_000));
    let config = AgentConfig {
        policy: Default::default(),
        id: "assistant".into(),
        name: None,
        emoji: None,
        models: vec!["p/m".into()],
        tools: vec!["memory_write".into()],
        max_rounds: 3,
        max_tokens: 100,
        tool_timeout_secs: 5,
        skills: None,
        mcp: vec![],
        spawn: Default::default(),
        agent_tools: Vec::new(),
        sandbox: Default::default(),
        system_prompt: "sys".into(),
    };
    let deps = ToolDeps {
        wake: Default::default(),
        clock: clock.clone(),
        memory: Arc::new(memory(&p, Arc::new(Never), SearchConfig::default())),
        http: p.http.clone(),
        web: Default::default(),
        search: None,
        exec: None,
        bots: Default::default(),
        painter: None,
        watches: Default::default(),
        files: p.files.clone(),
        kv: p.kv.clone(),
    };
    let agent = Agent {
        tools: ToolRegistry::for_agent(
            &config.tools,
            config.tool_timeout_secs,
            config.sandbox,
            &deps,
        )
        .unwrap(),
        config,
        chain: ModelChain {
            links: vec![Link {
                label: "p/m".into(),
                provider: Arc::new(WritesOnce(Mutex::new(0))),
                model: "m".into(),
                attempts: 1,
                price: None,
                vision: true,
                reads_pdf: false,
            }],
            clock: clock.clone(),
            base_backoff: Duration::from_millis(1),
            max_wait: Duration::from_secs(1),
        },
        clock,
        skills: None,
        mcp: vec![],
        secrets: Default::default(),
    };
    let out = block_on(agent.run_turn(
        &[],
        ChatMessage::user_text("remember"),
        &ctx(),
        "",
        Default::default(),
    ))
    .unwrap();
    let (content, is_error) = out
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            Block::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(!is_error, "{content}");
    assert!(!content.contains("timed out"), "{content}");
    assert!(content.starts_with("Saved to MEMORY.md."), "{content}");
    assert!(content.contains("searchable after the next"), "{content}");
    let file = block_on(p.files.read("memory/assistant/main/MEMORY.md")).unwrap();
    assert_eq!(file, b"- The spare key is under the blue pot.\n");
}

fn write_tool(p: &Platform, max_file_kb: usize) -> MemoryWrite {
    let config = SearchConfig {
        max_file_kb,
        ..SearchConfig::default()
    };
    MemoryWrite {
        memory: Arc::new(memory(p, Arc::new(LocalEmbedder::default()), config)),
        clock: p.clock.clone(),
        index_budget: Duration::from_secs(10),
    }
}

#[test]
fn a_write_past_the_cap_is_refused_with_what_to_do() {
    let (p, _, _) = Platform::in_memory();
    let tool = write_tool(&p, 2);
    let path = "memory/assistant/main/MEMORY.md";
    let big = "- an old fact\n".repeat(145); // 2030 bytes
    block_on(p.files.write(path, big.as_bytes())).unwrap();

    let err = block_on(tool.call(
        &ctx(),
        json!({"content": "one more fact to keep, a longer one than the room left", "target": "long_term"}),
    ))
    .unwrap_err();
    let msg = err.0;
    assert!(msg.starts_with("Not saved: MEMORY.md is 2 KB"), "{msg}");
    assert!(msg.contains("limit of 2 KB (memory.max_file_kb)"), "{msg}");
    assert!(msg.contains("mode \"replace\""), "{msg}");
    assert_eq!(
        block_on(p.files.read(path)).unwrap(),
        big.as_bytes(),
        "nothing written"
    );

    // Consolidating with replace makes room, and a short write then fits.
    let out = block_on(tool.call(
        &ctx(),
        json!({"content": "- an old fact", "target": "long_term", "mode": "replace"}),
    ))
    .unwrap();
    assert_eq!(out, "Saved to MEMORY.md.");
    let err = block_on(tool.call(
        &ctx(),
        json!({"content": "x".repeat(3000), "target": "long_term", "mode": "replace"}),
    ))
    .unwrap_err();
    assert!(
        err.0
            .starts_with("Not saved: the new MEMORY.md would be 3 KB"),
        "{}",
        err.0
    );

    let daily = "memory/assistant/main/memory/2023-11-14.md";
    block_on(p.files.write(daily, big.as_bytes())).unwrap();
    let err = block_on(tool.call(&ctx(), json!({"content": "y".repeat(200)}))).unwrap_err();
    assert!(
        err.0
            .starts_with("Not saved: today's note memory/2023-11-14.md is 2 KB"),
        "{}",
        err.0
    );
    assert!(err.0.contains("target \"long_term\""), "{}", err.0);
}
