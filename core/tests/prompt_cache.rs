//! The prompt cache's prefix through the real turn: the requests of one chat begin with the
//! same bytes (tools, instructions, history) up to where the one before marked its cache,
//! whatever the turn recalls from memory and whenever it comes; what changes comes last. And
//! which provider files send OpenAI's `prompt_cache_key`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::config::{Config, ProviderKind};
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

/// A request as the cache sees it: each tool, the instructions, then each block of each
/// message (with its message's place and role), `cache_control` left out (a mark is not
/// content); and how many of those items the request marked, through its last mark.
fn items(body: &Value) -> (Vec<String>, usize) {
    let mut all: Vec<Value> = Vec::new();
    all.extend(body["tools"].as_array().into_iter().flatten().cloned());
    match &body["system"] {
        Value::Array(blocks) => all.extend(blocks.iter().cloned()),
        text => all.push(json!({"type": "text", "text": text})),
    }
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for block in m["content"].as_array().into_iter().flatten() {
            all.push(json!({"at": i, "role": m["role"], "block": block}));
        }
    }
    let mut marked = 0;
    let mut out = Vec::new();
    for mut item in all {
        let target = match item.get("block") {
            Some(_) => &mut item["block"],
            None => &mut item,
        };
        if let Some(o) = target.as_object_mut() {
            if o.remove("cache_control").is_some() {
                marked = out.len() + 1;
            }
        }
        out.push(item.to_string());
    }
    (out, marked)
}

/// The text of the last block of the last message.
fn last_block(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let content = messages.last().unwrap()["content"].as_array().unwrap();
    content.last().unwrap()["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn a_chats_requests_share_their_prefix_whatever_is_recalled_and_whenever() {
    let h = Harness::new(Wire::Anthropic);
    block_on(async {
        let scope = "assistant/main/u111111111".into();
        let store = h.app.memory_store();
        store
            .append(&scope, "MEMORY.md", "- The user's cat is called Miso.")
            .await
            .unwrap();
        store
            .append(
                &scope,
                "notes/drinks.md",
                "- The user drinks green tea daily.",
            )
            .await
            .unwrap();
        // Turn 1, with a tool round; turn 2 three minutes later, recalling something else.
        h.script(
            200,
            anthropic_tool_use("toolu_1", "current_time", json!({"zone": "UTC"})),
        );
        h.script(200, anthropic_text("Your cat is Miso."));
        let mut ask = fixtures::update("private_text", 1);
        ask["message"]["text"] = json!("What is my cat called?");
        h.deliver_raw(&ask).await;
        h.clock.advance(std::time::Duration::from_secs(180));
        h.script(200, anthropic_text("Green tea."));
        let mut ask = fixtures::update("private_text", 2);
        ask["message"]["text"] = json!("Which tea do I drink?");
        h.deliver_raw(&ask).await;
    });
    let requests = h.llm_requests();
    assert_eq!(requests.len(), 3);
    // The memories recalled come last, after every mark, and differ from turn to turn.
    let recalled: Vec<String> = requests.iter().map(last_block).collect();
    assert!(recalled[0].starts_with("## Relevant memories") && recalled[0].contains("Miso"));
    assert_eq!(recalled[1], recalled[0], "the same turn, the same recall");
    assert!(recalled[2].contains("green tea"), "{}", recalled[2]);
    assert_ne!(recalled[2], recalled[0]);
    for r in &requests {
        let system = r["system"].to_string();
        assert!(!system.contains("Relevant memories") && !system.contains("Miso"));
    }
    // Each request begins with every item the one before cached, byte for byte.
    for pair in requests.windows(2) {
        let (before, marked) = items(&pair[0]);
        let (after, _) = items(&pair[1]);
        assert!(marked > 0);
        for (i, item) in before[..marked].iter().enumerate() {
            assert_eq!(Some(item), after.get(i), "item {i} changed");
        }
    }
    // The newest turn is marked: the second turn's question, and the first turn's results.
    let (items2, marked2) = items(&requests[2]);
    assert_eq!(marked2, items2.len() - 1, "all but the recall is marked");
}

#[test]
fn only_openais_own_file_sends_a_prompt_cache_key() {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let keyed: Vec<&str> = config
        .providers
        .values()
        .filter(|p| p.kind == ProviderKind::Openai && p.cache.key)
        .map(|p| p.id.as_str())
        .collect();
    assert_eq!(keyed, ["openai"]);
    let anthropic = &config.providers["anthropic"];
    assert!(anthropic.cache.breakpoints);
    assert_eq!(
        serde_json::to_value(anthropic.cache.ttl).unwrap(),
        json!("5m")
    );
}

#[test]
fn the_openai_wire_keys_each_conversation_apart() {
    let h = Harness::new(Wire::OpenAi);
    block_on(async {
        h.script(200, clawless_testkit::llm::openai_text("Hi."));
        h.deliver("private_text", 1).await;
    });
    let body = &h.llm_requests()[0];
    let key = body["prompt_cache_key"].as_str().unwrap();
    assert_eq!(key.len(), 32);
    assert!(!key.contains("111111111"), "no id of the person");
}
