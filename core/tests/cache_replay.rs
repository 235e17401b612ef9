//! The prompt cache over a long conversation, on each provider: an 18-turn chat (2 KB
//! messages each way, a tool round every third turn, memories recalled for every turn, a turn
//! a minute) runs through the real `App` until its history is compacted, against a fake model
//! that answers in the provider's wire format. The request bodies the core sent are then fed
//! to a model of that provider's cache (`prompt_caches`), as they are ("after") and as the
//! release before this one sent them ("before": no `cache_control`, no `prompt_cache_key`,
//! the memories in the system prompt; rebuilt from the same bodies), and priced at the
//! provider file's prices. Checks the bar on Anthropic: from the second request on,
//! at least 70 % of the input read from the cache and at most 40 % of the uncached cost; the
//! first request of a chat with the default agent at most 2,000 tokens.
//!
//! `cargo test -p clawless-core --test cache_replay -- --nocapture` prints the table.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod prompt_caches;
mod support;

use std::sync::{Arc, Mutex};

use clawless_core::llm::Usage;
use clawless_core::Config;
use clawless_platform::{Clock, HttpResponse};
use clawless_testkit::fixtures;
use clawless_testkit::llm::{
    anthropic_text, anthropic_tool_use, gemini_text, openai_text, openai_tool_call,
};
use futures::executor::block_on;
use prompt_caches::{anthropic_blocks, Anthropic, Automatic, Cache, Call};
use serde_json::{json, Value};
use support::{Harness, Wire, LLM};

const TURNS: usize = 18;
/// Turns of the conversation without compaction: well past the 40 messages of the window.
const WINDOW_TURNS: usize = 36;
/// What a user's message asks when the model should call a tool first.
const ASKS_A_TOOL: &str = "Check the clock for me";
const RECALL: &str = "## Relevant memories\n";

#[derive(Clone, Copy, PartialEq)]
enum Provider {
    Anthropic,
    OpenAi,
    Gemini,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Gemini => "gemini",
        }
    }

    /// The provider's id and model in the default config, for its price.
    fn model(self) -> (&'static str, &'static str) {
        match self {
            Provider::Anthropic => ("anthropic", "claude-sonnet-4-5"),
            Provider::OpenAi => ("openai", "gpt-4o-mini"),
            Provider::Gemini => ("gemini", "gemini-2.5-flash"),
        }
    }

    fn cache(self) -> Box<dyn Cache> {
        match self {
            Provider::Anthropic => Box::<Anthropic>::default(),
            Provider::OpenAi => Box::new(Automatic::openai()),
            Provider::Gemini => Box::new(Automatic::gemini()),
        }
    }

    /// A harness on this provider; `compact`: the default compaction, else none (the
    /// window's oldest messages dropped).
    fn harness(self, compact: bool) -> Harness {
        let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
        if !compact {
            config.session.compact_tokens = 0;
        }
        match self {
            Provider::Anthropic => Harness::with_config(Wire::Anthropic, config),
            Provider::OpenAi => Harness::with_config(Wire::OpenAi, config),
            Provider::Gemini => {
                config.agents.get_mut("assistant").unwrap().models =
                    vec!["gemini/gemini-2.5-flash".into()];
                let env = [("GEMINI_API_KEY", "AIza-test"), ("GEMINI_BASE_URL", LLM)];
                Harness::with_env(Wire::Anthropic, config, &env).unwrap()
            }
        }
    }
}

/// About `n` bytes of prose about `topic`, different for each `seed`.
fn prose(topic: &str, seed: usize, n: usize) -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < n {
        text.push_str(&format!(
            "Point {seed}.{i} about {topic}: the details matter, so here they are in full. "
        ));
        i += 1;
    }
    text
}

const TOPICS: [&str; 6] = [
    "the trip to Porto",
    "my sister Ana",
    "the garden",
    "the budget",
    "the new bike",
    "the book club",
];

/// The model's answer to `body`: a tool call where the newest message asks for one and has
/// no result yet, else about 2 KB of text; a short summary to a request without tools (the
/// compaction's).
fn answer(p: Provider, body: &Value, n: usize) -> Value {
    let text = match body.get("tools") {
        None => "- The user talked about their plans; Ana lives in Lisbon.".to_owned(),
        Some(_) => prose("your question", n, 2000),
    };
    let last = match p {
        Provider::Gemini => body["contents"].as_array().unwrap().last().unwrap().clone(),
        _ => body["messages"].as_array().unwrap().last().unwrap().clone(),
    };
    let results = last["role"] == "tool"
        || last.to_string().contains("\"tool_result\"")
        || last.to_string().contains("functionResponse");
    let call = body.get("tools").is_some() && !results && last.to_string().contains(ASKS_A_TOOL);
    match (p, call) {
        (Provider::Anthropic, true) => {
            anthropic_tool_use(&format!("toolu_{n}"), "current_time", json!({}))
        }
        (Provider::Anthropic, false) => anthropic_text(&text),
        (Provider::OpenAi, true) => openai_tool_call(&format!("call_{n}"), "current_time", "{}"),
        (Provider::OpenAi, false) => openai_text(&text),
        (Provider::Gemini, true) => json!({"candidates": [{"content": {"role": "model",
            "parts": [{"functionCall": {"name": "current_time", "args": {}}}]},
            "finishReason": "STOP"}]}),
        (Provider::Gemini, false) => gemini_text(&text),
    }
}

/// Runs a conversation of `turns` on `p`: every model request's body and when it was sent.
fn converse(p: Provider, turns: usize, compact: bool) -> Vec<(Value, u64)> {
    let h = p.harness(compact);
    let sent: Arc<Mutex<Vec<(Value, u64)>>> = Default::default();
    let (log, clock) = (sent.clone(), h.clock.clone());
    h.http.route(LLM, move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let mut log = log.lock().unwrap();
        let reply = answer(p, &body, log.len());
        log.push((body, clock.now_ms()));
        Ok(HttpResponse::json(200, &reply))
    });
    block_on(async {
        let scope = "assistant/main/u111111111".into();
        for (i, topic) in TOPICS.iter().enumerate() {
            let note = format!("- About {topic}: fact {i} the user told me earlier.");
            let file = format!("notes/{i}.md");
            h.app
                .memory_store()
                .append(&scope, &file, &note)
                .await
                .unwrap();
        }
        for turn in 0..turns {
            let topic = TOPICS[turn % TOPICS.len()];
            let mut text = prose(topic, turn, 2000);
            if turn % 3 == 2 {
                text.push_str(ASKS_A_TOOL);
            }
            let mut update = fixtures::update("private_text", turn as i64 + 1);
            update["message"]["text"] = json!(text);
            h.deliver_raw(&update).await;
            h.clock.advance(std::time::Duration::from_secs(60));
        }
    });
    let sent = sent.lock().unwrap().clone();
    sent
}

/// How many times the history was compacted: each a run of requests without tools (the facts,
/// then the summary in pieces).
fn compactions(bodies: &[(Value, u64)]) -> usize {
    let tools: Vec<bool> = bodies
        .iter()
        .map(|(b, _)| b.get("tools").is_some())
        .collect();
    tools.windows(2).filter(|w| w[0] && !w[1]).count()
}

/// `body` as the release before this one would have sent it: no cache marks or key, the
/// memories recalled at the end of the system prompt.
fn before(p: Provider, body: &Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("cache_control");
                o.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut b = body.clone();
    strip(&mut b);
    let recall_at = |text: &str| text.rfind(RECALL);
    match p {
        Provider::Anthropic => {
            let system = support::system_text(&b);
            let mut system = json!(system);
            let last = b["messages"].as_array_mut().unwrap().last_mut().unwrap();
            let content = last["content"].as_array_mut().unwrap();
            let recalled = content
                .last()
                .and_then(|c| c["text"].as_str())
                .map(str::to_owned);
            if let Some(text) = recalled.filter(|t| t.starts_with(RECALL)) {
                content.pop();
                system = json!(format!("{}\n\n{text}", system.as_str().unwrap()));
            }
            b["system"] = system;
        }
        Provider::OpenAi => {
            b.as_object_mut().unwrap().remove("prompt_cache_key");
            let messages = b["messages"].as_array_mut().unwrap();
            let last = messages.last_mut().unwrap();
            let text = last["content"].as_str().unwrap_or("").to_owned();
            if let Some(at) = recall_at(&text) {
                last["content"] = json!(text[..at].trim_end());
                let system = messages[0]["content"].as_str().unwrap().to_owned();
                messages[0]["content"] = json!(format!("{system}\n\n{}", &text[at..]));
            }
        }
        Provider::Gemini => {
            let contents = b["contents"].as_array_mut().unwrap();
            let parts = contents.last_mut().unwrap()["parts"]
                .as_array_mut()
                .unwrap();
            let recalled = parts
                .last()
                .and_then(|p| p["text"].as_str())
                .map(str::to_owned);
            if let Some(text) = recalled.filter(|t| t.starts_with(RECALL)) {
                parts.pop();
                let system = b["systemInstruction"]["parts"][0]["text"].as_str().unwrap();
                let joined = format!("{system}\n\n{text}");
                b["systemInstruction"]["parts"][0]["text"] = json!(joined);
            }
        }
    }
    b
}

/// Calls added up: tokens, and their cost and the uncached cost in millionths of a dollar.
#[derive(Default)]
struct Sum {
    requests: usize,
    call: Call,
    cost: u64,
    uncached_cost: u64,
}

impl Sum {
    fn add(&mut self, c: Call, price: &clawless_core::config::Price) {
        self.requests += 1;
        self.call.read += c.read;
        self.call.written += c.written;
        self.call.uncached += c.uncached;
        let usage = Usage {
            input: c.uncached + c.written,
            output: 0,
            cached_input: c.read,
            cache_write: c.written,
        };
        let full = Usage {
            input: c.input(),
            ..Default::default()
        };
        self.cost += usage.cost_micros(price);
        self.uncached_cost += full.cost_micros(price);
    }

    fn read_percent(&self) -> f64 {
        100.0 * self.call.read as f64 / self.call.input().max(1) as f64
    }

    fn cost_percent(&self) -> f64 {
        100.0 * self.cost as f64 / self.uncached_cost.max(1) as f64
    }

    fn row(&self, provider: &str, shape: &str) -> String {
        let c = &self.call;
        format!(
            "{provider:<10} {shape:<22} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6.1} % {:>6.1} %",
            self.requests,
            c.input(),
            c.read,
            c.written,
            c.uncached,
            self.read_percent(),
            self.cost_percent()
        )
    }
}

/// The conversation's requests through `p`'s cache: all of them, and from the second on.
fn replay(p: Provider, bodies: &[(Value, u64)], price: &clawless_core::config::Price) -> [Sum; 2] {
    let mut cache = p.cache();
    let (mut all, mut later) = (Sum::default(), Sum::default());
    for (i, (body, at)) in bodies.iter().enumerate() {
        let call = cache.take(body, *at);
        all.add(call, price);
        if i > 0 {
            later.add(call, price);
        }
    }
    [all, later]
}

#[test]
fn a_long_conversation_reads_most_of_its_input_from_the_cache() {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let mut rows = Vec::new();
    let mut anthropic_after: Option<Sum> = None;
    for p in [Provider::Anthropic, Provider::OpenAi, Provider::Gemini] {
        let (id, model) = p.model();
        let price = config.providers[id].prices[model];
        let bodies = converse(p, TURNS, true);
        let compacted = compactions(&bodies);
        assert!(compacted >= 1, "{}: the history was compacted", p.name());
        let old: Vec<(Value, u64)> = bodies.iter().map(|(b, at)| (before(p, b), *at)).collect();
        let [was, was_later] = replay(p, &old, &price);
        let [now, now_later] = replay(p, &bodies, &price);
        rows.push(was.row(p.name(), "before"));
        rows.push(was_later.row(p.name(), "before, 2nd request on"));
        rows.push(now.row(p.name(), "after"));
        rows.push(now_later.row(p.name(), "after, 2nd request on"));
        rows.push(format!(
            "{:<10} {TURNS} turns, {} requests, {compacted} compaction(s)",
            "",
            bodies.len()
        ));
        if p == Provider::Anthropic {
            anthropic_after = Some(now_later);
            // Without compaction the window slides: its cut moves in steps.
            let long = converse(p, WINDOW_TURNS, false);
            assert_eq!(compactions(&long), 0);
            let [all, _] = replay(p, &long, &price);
            rows.push(all.row(p.name(), "after, no compaction"));
            rows.push(format!(
                "{:<10} {WINDOW_TURNS} turns, {} requests, history_window 40",
                "",
                long.len()
            ));
        }
    }
    println!(
        "\nPrompt cache over a {TURNS}-turn conversation (tokens: JSON bytes / 4)\n\
         {:<10} {:<22} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n{}",
        "provider",
        "shape",
        "calls",
        "input",
        "read",
        "written",
        "uncached",
        "read",
        "cost",
        rows.join("\n")
    );
    let after = anthropic_after.unwrap();
    assert!(after.read_percent() >= 70.0, "{}", after.read_percent());
    assert!(after.cost_percent() <= 40.0, "{}", after.cost_percent());
}

#[test]
fn a_chats_first_request_stays_small_with_the_default_agent() {
    let h = Harness::new(Wire::Anthropic);
    block_on(async {
        h.script(200, anthropic_text("Hello!"));
        h.deliver("private_text", 1).await;
    });
    let first = &h.llm_requests()[0];
    let blocks = anthropic_blocks(first);
    let total: u64 = blocks.iter().map(|b| b.1).sum();
    let tools: u64 = blocks[..first["tools"].as_array().unwrap().len()]
        .iter()
        .map(|b| b.1)
        .sum();
    println!("first request: {total} tokens, of which tools {tools}");
    assert!(total <= 2000, "{total}");
    // The prefix the cache keeps is long enough to be kept (1,024 tokens on Sonnet).
    let marked: Vec<u64> = blocks
        .iter()
        .scan(0, |sum, b| {
            *sum += b.1;
            Some((*sum, b.2))
        })
        .filter_map(|(sum, mark)| mark.map(|_| sum))
        .collect();
    assert!(marked.iter().any(|&through| through >= 1024), "{marked:?}");
}
