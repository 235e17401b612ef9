//! What each provider is sent for its prompt cache: Anthropic's breakpoints (where, how
//! many, their TTL), OpenAI's `prompt_cache_key` (only where the provider takes it), the
//! turn's context last on every format, and a refused field dropped after one more call.

use std::sync::Arc;
use std::time::Duration;

use clawless_platform::{FakeHttp, HttpResponse};
use futures::executor::block_on;
use serde_json::{json, Value};

use super::{conversation_key, Refusable, Ttl};
use crate::llm::anthropic::{self, Anthropic};
use crate::llm::openai::{self, OpenAi};
use crate::llm::{gemini, Block, ChatMessage, ChatRequest, Provider, Role, ToolSpec};
use crate::secret::Secret;

const RECALL: &str = "## Relevant memories\n[notes.md:1-1] likes tea";

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        input_schema: json!({"type": "object"}),
    }
}

fn results(id: &str) -> ChatMessage {
    ChatMessage {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: id.into(),
            content: "12:00".into(),
            is_error: false,
        }],
    }
}

fn call(id: &str) -> ChatMessage {
    ChatMessage {
        role: Role::Assistant,
        content: vec![Block::ToolUse {
            id: id.into(),
            name: "current_time".into(),
            input: json!({}),
            signature: None,
        }],
    }
}

/// A conversation in its second turn, one tool round in: the history, the question, a call
/// and its result.
fn request() -> ChatRequest {
    ChatRequest {
        model: "claude".into(),
        system: "Be brief.".into(),
        messages: vec![
            ChatMessage::user_text("hello"),
            ChatMessage::assistant_text("Hi!"),
            ChatMessage::user_text("What time is it?"),
            call("t1"),
            results("t1"),
        ],
        tools: vec![tool("current_time"), tool("memory_search")].into(),
        max_tokens: 100,
        context: RECALL.into(),
        conversation: "assistant/main/u42".into(),
    }
}

/// Every `cache_control` of an Anthropic body, by where it is.
fn marks(body: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if let Some(c) = t.get("cache_control") {
            found.push((format!("tools[{i}]"), c.clone()));
        }
    }
    for (i, b) in body["system"].as_array().into_iter().flatten().enumerate() {
        if let Some(c) = b.get("cache_control") {
            found.push((format!("system[{i}]"), c.clone()));
        }
    }
    for (m, msg) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (i, b) in msg["content"].as_array().into_iter().flatten().enumerate() {
            if let Some(c) = b.get("cache_control") {
                found.push((format!("messages[{m}][{i}]"), c.clone()));
            }
        }
    }
    found
}

#[test]
fn anthropic_marks_the_tools_the_system_and_the_newest_two_user_messages() {
    let body = anthropic::cached_request_body(&request(), Ttl::FiveMinutes);
    let five = json!({"type": "ephemeral"});
    let at: Vec<(&str, &Value)> = vec![
        ("tools[1]", &five),
        ("system[0]", &five),
        ("messages[2][0]", &five),
        ("messages[4][0]", &five),
    ];
    let found = marks(&body);
    assert_eq!(
        found
            .iter()
            .map(|(w, c)| (w.as_str(), c))
            .collect::<Vec<_>>(),
        at,
        "{body:#}"
    );
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": five}])
    );
    // The context comes after every mark, last in the last message.
    let last = &body["messages"][4]["content"];
    assert_eq!(last[0]["type"], "tool_result");
    assert_eq!(last[1], json!({"type": "text", "text": RECALL}));
    assert_eq!(last.as_array().map(Vec::len), Some(2));
}

#[test]
fn anthropic_breakpoints_are_four_at_most_and_say_an_hours_ttl() {
    let mut req = request();
    for i in 0..6 {
        req.messages.push(call(&format!("r{i}")));
        req.messages.push(results(&format!("r{i}")));
    }
    let body = anthropic::cached_request_body(&req, Ttl::OneHour);
    let found = marks(&body);
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(found
        .iter()
        .all(|(_, c)| *c == json!({"type": "ephemeral", "ttl": "1h"})));
    let newest = body["messages"].as_array().map_or(0, Vec::len) - 1;
    assert_eq!(found[3].0, format!("messages[{newest}][0]"));
    assert_eq!(found[2].0, format!("messages[{}][0]", newest - 2));
}

#[test]
fn anthropic_without_caching_sends_no_mark_and_the_system_as_text() {
    let body = anthropic::request_body(&request());
    assert!(marks(&body).is_empty());
    assert_eq!(body["system"], "Be brief.");
    let mut first = request();
    first.messages.truncate(1);
    first.system.clear();
    first.tools = Default::default();
    // Nothing to mark but the question; an empty system stays an empty text.
    let body = anthropic::cached_request_body(&first, Ttl::FiveMinutes);
    assert_eq!(body["system"], "");
    assert_eq!(marks(&body).len(), 1);
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "text", "text": RECALL})
    );
}

#[test]
fn openai_and_gemini_send_the_context_last() {
    let body = openai::request_body(&request());
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "tool", "no user message after tool results");
    assert_eq!(last["content"], format!("12:00\n\n{RECALL}"));
    let mut asked = request();
    asked.messages.truncate(3);
    let body = openai::request_body(&asked);
    assert_eq!(
        body["messages"][3],
        json!({"role": "user", "content": format!("What time is it?\n\n{RECALL}")})
    );
    assert!(body.get("prompt_cache_key").is_none());
    let body = gemini::request_body(&request());
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    let parts = &contents[contents.len() - 1]["parts"];
    assert!(parts[0].get("functionResponse").is_some(), "{parts}");
    assert_eq!(parts[1], json!({"text": RECALL}));
}

fn openai_provider(http: &Arc<FakeHttp>, key: bool) -> OpenAi {
    OpenAi {
        http: http.clone(),
        base_url: "https://openai.test/v1".into(),
        api_key: Secret::new("sk-test"),
        timeout: Duration::from_secs(5),
        cache_key: Refusable::new(key.then_some(())),
    }
}

fn answer() -> Value {
    json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})
}

fn bodies(http: &FakeHttp) -> Vec<Value> {
    http.requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or_default())
        .collect()
}

#[test]
fn openai_gets_a_prompt_cache_key_per_conversation_only_where_it_takes_one() {
    let http = Arc::new(FakeHttp::new());
    http.route("https://openai.test/", |_| {
        Ok(HttpResponse::json(200, &answer()))
    });
    let keyed = openai_provider(&http, true);
    block_on(keyed.chat(&request())).unwrap();
    let mut other = request();
    other.conversation = "assistant/main/u43".into();
    block_on(keyed.chat(&other)).unwrap();
    block_on(keyed.chat(&request())).unwrap();
    block_on(openai_provider(&http, false).chat(&request())).unwrap();
    let keys: Vec<Value> = bodies(&http)
        .iter()
        .map(|b| b.get("prompt_cache_key").cloned().unwrap_or(Value::Null))
        .collect();
    let first = conversation_key("sk-test", "assistant/main/u42");
    assert_eq!(keys[0], json!(first));
    assert_eq!(keys[2], keys[0], "stable for the conversation");
    assert_ne!(keys[1], keys[0], "another conversation, another key");
    assert_eq!(keys[3], Value::Null, "a preset without the flag sends none");
    assert_eq!(first.len(), 32);
    assert!(first.bytes().all(|b| b.is_ascii_hexdigit()) && !first.contains("42"));
    // No conversation (a summary asked outside one): no key.
    let mut none = request();
    none.conversation.clear();
    block_on(keyed.chat(&none)).unwrap();
    assert!(bodies(&http)[4].get("prompt_cache_key").is_none());
}

#[test]
fn a_refused_cache_field_is_dropped_after_one_more_call() {
    let http = Arc::new(FakeHttp::new());
    http.route("https://openai.test/", |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        Ok(match body.get("prompt_cache_key") {
            Some(_) => HttpResponse::json(
                400,
                &json!({"error": {"message": "property 'prompt_cache_key' is unsupported"}}),
            ),
            None => HttpResponse::json(200, &answer()),
        })
    });
    let groq = openai_provider(&http, true);
    assert_eq!(
        block_on(groq.chat(&request())).unwrap().message.text(),
        "ok"
    );
    block_on(groq.chat(&request())).unwrap();
    let sent: Vec<bool> = bodies(&http)
        .iter()
        .map(|b| b.get("prompt_cache_key").is_some())
        .collect();
    assert_eq!(sent, [true, false, false]);

    let http = Arc::new(FakeHttp::new());
    http.route("https://anthropic.test/", |req| {
        let text = String::from_utf8_lossy(&req.body).into_owned();
        let refused = json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "system.0.cache_control: Extra inputs are not permitted"}});
        let ok = json!({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"});
        Ok(match text.contains("cache_control") {
            true => HttpResponse::json(400, &refused),
            false => HttpResponse::json(200, &ok),
        })
    });
    let gateway = anthropic_provider(&http);
    block_on(gateway.chat(&request())).unwrap();
    block_on(gateway.chat_stream(&request(), &|_| {})).unwrap();
    let marked: Vec<bool> = http
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).contains("cache_control"))
        .collect();
    assert_eq!(marked, [true, false, false]);
    // Any other 400 is the caller's, not a refusal of the cache.
    let http = Arc::new(FakeHttp::new());
    http.route("https://anthropic.test/", |_| {
        Ok(HttpResponse::json(
            400,
            &json!({"error": {"message": "max_tokens too large"}}),
        ))
    });
    assert!(block_on(anthropic_provider(&http).chat(&request())).is_err());
    assert_eq!(http.requests().len(), 1);
}

fn anthropic_provider(http: &Arc<FakeHttp>) -> Anthropic {
    Anthropic {
        http: http.clone(),
        base_url: "https://anthropic.test".into(),
        api_key: Secret::new("sk-ant"),
        timeout: Duration::from_secs(5),
        cache: Refusable::new(Some(Ttl::FiveMinutes)),
    }
}
