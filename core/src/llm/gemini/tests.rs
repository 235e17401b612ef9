#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use clawless_platform::{FakeHttp, HttpResponse};
use futures::executor::block_on;
use serde_json::json;

use super::*;
use crate::llm::ToolSpec;

fn user(content: Vec<Block>) -> ChatMessage {
    ChatMessage {
        role: Role::User,
        content,
    }
}

fn assistant(content: Vec<Block>) -> ChatMessage {
    ChatMessage {
        role: Role::Assistant,
        content,
    }
}

fn call(id: &str, name: &str, input: Value, signature: Option<&str>) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
        signature: signature.map(str::to_owned),
    }
}

fn result(id: &str, content: &str, is_error: bool) -> Block {
    Block::ToolResult {
        tool_use_id: id.into(),
        content: content.into(),
        is_error,
    }
}

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "gemini-2.5-flash".into(),
        system: "Be brief.".into(),
        messages,
        tools: vec![ToolSpec {
            name: "current_time".into(),
            description: "The time.".into(),
            input_schema: json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"zone": {"type": "string"}},
                "additionalProperties": false
            }),
        }]
        .into(),
        max_tokens: 512,
        ..Default::default()
    }
}

#[test]
fn a_tool_round_trip_and_an_image_in_the_request() {
    let body = request_body(&request(vec![
        user(vec![
            Block::Text {
                text: "What time is it, and what is this?".into(),
            },
            Block::Image {
                media_type: "image/png".into(),
                data: "iVBORw0K".into(),
            },
        ]),
        assistant(vec![
            Block::Text {
                text: "Let me check.".into(),
            },
            call(
                "gcall_0badf00d_0",
                "current_time",
                json!({"zone": "Europe/Paris"}),
                Some("c2lnLTE="),
            ),
            call("fc-7", "current_time", json!({"zone": "UTC"}), None),
        ]),
        user(vec![
            result("gcall_0badf00d_0", "12:00", false),
            result("fc-7", "unknown zone", true),
        ]),
        assistant(vec![Block::Text {
            text: "It is noon in Paris; the image is a cat.".into(),
        }]),
    ]));
    assert_eq!(
        body,
        json!({
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                {"role": "user", "parts": [
                    {"text": "What time is it, and what is this?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}}
                ]},
                {"role": "model", "parts": [
                    {"text": "Let me check."},
                    // A made-up id is not sent; the signature comes back where it was.
                    {"functionCall": {"name": "current_time", "args": {"zone": "Europe/Paris"}},
                     "thoughtSignature": "c2lnLTE="},
                    // A later parallel call has no signature of its own.
                    {"functionCall": {"id": "fc-7", "name": "current_time", "args": {"zone": "UTC"}}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "current_time", "response": {"output": "12:00"}}},
                    {"functionResponse": {"id": "fc-7", "name": "current_time", "response": {"error": "unknown zone"}}}
                ]},
                {"role": "model", "parts": [{"text": "It is noon in Paris; the image is a cat."}]}
            ],
            "tools": [{"functionDeclarations": [{
                "name": "current_time",
                "description": "The time.",
                // JSON Schema as it is (additionalProperties kept), without the root $schema.
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {"zone": {"type": "string"}},
                    "additionalProperties": false
                }
            }]}],
            "generationConfig": {"maxOutputTokens": 512}
        })
    );
}

#[test]
fn calls_from_another_provider_get_the_placeholder_signature() {
    // A turn that fell back from another provider: its first call of a step has no
    // signature, which Gemini 3 refuses unless the documented placeholder stands in.
    let body = request_body(&request(vec![
        user(vec![Block::Text { text: "hi".into() }]),
        assistant(vec![
            call("toolu_01", "current_time", json!({}), None),
            call("toolu_02", "current_time", json!(null), None),
        ]),
        user(vec![result("toolu_01", "12:00", false)]),
    ]));
    let parts = &body["contents"][1]["parts"];
    assert_eq!(parts[0]["thoughtSignature"], FOREIGN_SIGNATURE);
    assert_eq!(parts[0]["functionCall"]["id"], "toolu_01");
    assert!(parts[1].get("thoughtSignature").is_none());
    assert_eq!(parts[1]["functionCall"]["args"], json!({}));
}

#[test]
fn documents_are_inline_data_and_same_role_messages_join() {
    let body = request_body(&request(vec![
        user(vec![result("lost", "an orphan result", false)]),
        user(vec![
            Block::Text {
                text: "Summarise it.".into(),
            },
            Block::Document {
                media_type: "application/pdf".into(),
                data: "JVBERi0=".into(),
                name: "report.pdf".into(),
            },
        ]),
        assistant(vec![Block::Text {
            text: String::new(),
        }]),
    ]));
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [
            {"text": "[Result of an earlier tool call] an orphan result"},
            {"text": "Summarise it."},
            {"text": "[Document: report.pdf]"},
            {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}}
        ]}]),
        "an empty assistant message is left out"
    );
}

#[test]
fn text_thoughts_and_usage() {
    let body = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Thinking about clocks…", "thought": true},
                {"text": "It is "},
                {"text": "noon.", "thoughtSignature": "dGV4dA=="}
            ]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 1200,
            "cachedContentTokenCount": 1000,
            "candidatesTokenCount": 30,
            "thoughtsTokenCount": 70,
            "totalTokenCount": 1300
        },
        "modelVersion": "gemini-2.5-flash"
    });
    let r = parse_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        r.message.content,
        vec![Block::Text {
            text: "It is noon.".into()
        }]
    );
    assert_eq!(r.stop, StopReason::EndTurn);
    assert_eq!(
        r.usage,
        Usage {
            input: 200,
            output: 100,
            cached_input: 1000,
            cache_write: 0,
        }
    );
}

#[test]
fn function_calls_keep_ids_and_signatures_and_come_back_as_sent() {
    let body = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "current_time", "args": {"zone": "Asia/Tokyo"}},
                 "thoughtSignature": "Q2lRQjA="},
                {"functionCall": {"name": "memory_search", "args": {"query": "tea"}}},
                {"functionCall": {"id": "call-abc", "name": "current_time"}}
            ]},
            "finishReason": "STOP"
        }],
        "responseId": "r-1"
    });
    let r = parse_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(r.stop, StopReason::ToolUse);
    let calls: Vec<_> = r.message.tool_uses().collect();
    assert_eq!(calls.len(), 3);
    let (first, second) = (calls[0].0.to_owned(), calls[1].0.to_owned());
    assert!(first.starts_with("gcall_") && second.starts_with("gcall_"));
    assert_ne!(first, second);
    assert_eq!(calls[2].0, "call-abc");
    assert_eq!(calls[2].2, &json!({}), "no args is an empty object");
    let Block::ToolUse { signature, .. } = &r.message.content[1] else {
        panic!("{:?}", r.message.content);
    };
    assert_eq!(signature.as_deref(), Some("Q2lRQjA="));

    // Another response (another responseId) gets other ids: approvals are keyed by id.
    let other = parse_response(body.to_string().replace("r-1", "r-2").as_bytes()).unwrap();
    assert_ne!(other.message.tool_uses().next().unwrap().0, first);

    // Replayed: the same parts, the signature on the same call, results by name.
    let next = request_body(&request(vec![
        user(vec![Block::Text { text: "t?".into() }]),
        r.message.clone(),
        user(vec![
            result(&first, "09:00", false),
            result(&second, "nothing", false),
            result("call-abc", "00:00", false),
        ]),
    ]));
    assert_eq!(
        next["contents"][1]["parts"],
        json!([
            {"text": "Checking."},
            {"functionCall": {"name": "current_time", "args": {"zone": "Asia/Tokyo"}},
             "thoughtSignature": "Q2lRQjA="},
            {"functionCall": {"name": "memory_search", "args": {"query": "tea"}}},
            {"functionCall": {"id": "call-abc", "name": "current_time", "args": {}}}
        ])
    );
    let names: Vec<&Value> = next["contents"][2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["functionResponse"]["name"])
        .collect();
    assert_eq!(
        names,
        [
            &json!("current_time"),
            &json!("memory_search"),
            &json!("current_time")
        ]
    );
}

#[test]
fn finish_reasons() {
    let with = |reason: &str| {
        let body = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]});
        parse_response(body.to_string().as_bytes()).unwrap().stop
    };
    assert_eq!(with("MAX_TOKENS"), StopReason::MaxTokens);
    assert_eq!(with("RECITATION"), StopReason::Other);
    // A candidate stopped for safety may come without any content.
    let body = json!({"candidates": [{"finishReason": "SAFETY", "index": 0}]});
    let r = parse_response(body.to_string().as_bytes()).unwrap();
    assert_eq!((r.stop, r.message.content.len()), (StopReason::Other, 0));
}

#[test]
fn a_blocked_prompt_is_a_clear_failure() {
    let body = json!({
        "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
        "usageMetadata": {"promptTokenCount": 8}
    });
    let err = parse_response(body.to_string().as_bytes()).unwrap_err();
    assert_eq!(
        err,
        LlmError::Fatal("gemini: the prompt was blocked (SAFETY); nothing was generated".into())
    );
}

#[test]
fn malformed_answers_are_failures_or_odd_but_never_panics() {
    for body in [
        "",
        "not json",
        "[]",
        "null",
        "{}",
        r#"{"candidates": []}"#,
        r#"{"candidates": "x"}"#,
        r#"{"candidates": [null]}"#,
        r#"{"candidates": [{"content": {"parts": "x"}}]}"#,
        r#"{"candidates": [{"content": {"parts": [null, 1, {"text": 5}, {"functionCall": 5}]}}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": 1, "args": "s", "id": 2}}]}}]}"#,
        r#"{"candidates": [{}], "usageMetadata": {"promptTokenCount": -1, "cachedContentTokenCount": 99999999999999999999}}"#,
    ] {
        let _ = parse_response(body.as_bytes());
    }
    assert!(matches!(
        parse_response(b"not json"),
        Err(LlmError::Fatal(m)) if m.starts_with("gemini: bad JSON")
    ));
    assert_eq!(
        parse_response(b"{}").unwrap_err(),
        LlmError::Fatal("gemini: no candidates".into())
    );
    let odd = parse_response(
        br#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": 1, "args": "s"}}]}}]}"#,
    )
    .unwrap();
    assert_eq!(
        odd.message.tool_uses().next().unwrap().2,
        &json!({"value": "s"})
    );
}

fn provider(http: Arc<FakeHttp>) -> Gemini {
    Gemini {
        http,
        base_url: "http://gemini.test/".into(),
        api_key: Secret::new("AIza-secret-key"),
        timeout: Duration::from_secs(5),
    }
}

#[test]
fn the_key_goes_in_a_header_and_never_in_the_url() {
    let http = Arc::new(FakeHttp::new());
    http.route("http://gemini.test/", |_| {
        Ok(HttpResponse::json(
            200,
            &json!({"candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}]}),
        ))
    });
    let mut req = request(vec![user(vec![Block::Text { text: "hi".into() }])]);
    req.model = "models/gemini-2.5-flash".into();
    let r = block_on(provider(http.clone()).chat(&req)).unwrap();
    assert_eq!(r.message.text(), "hi");
    let sent = &http.requests()[0];
    assert_eq!(
        sent.url,
        "http://gemini.test/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(sent.header_value("x-goog-api-key"), Some("AIza-secret-key"));
    assert!(!sent.url.contains("key"));
}

#[test]
fn errors_honour_retry_info_and_leave_the_key_out() {
    let http = Arc::new(FakeHttp::new());
    let script = Arc::new(std::sync::Mutex::new(vec![
        (
            403,
            json!({"error": {"code": 403, "message": "Method doesn't allow unregistered callers.", "status": "PERMISSION_DENIED"}}),
            None,
        ),
        (
            429,
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13.5s"}
            ]}}),
            None,
        ),
        (
            429,
            json!({"error": {"code": 429, "details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}
            ]}}),
            Some("2"),
        ),
        (
            503,
            json!({"error": {"code": 503, "status": "UNAVAILABLE"}}),
            None,
        ),
    ]));
    let s = script.clone();
    http.route("http://gemini.test/", move |_| {
        let (status, body, retry_after) = s.lock().unwrap().remove(0);
        let mut resp = HttpResponse::json(status, &body);
        if let Some(r) = retry_after {
            resp = resp.with_header("retry-after", r);
        }
        Ok(resp)
    });
    let gemini = provider(http);
    let req = request(vec![user(vec![Block::Text { text: "hi".into() }])]);
    let forbidden = block_on(gemini.chat(&req)).unwrap_err();
    assert_eq!(forbidden, LlmError::KeyRefused { status: 403 });
    assert!(!format!("{forbidden} {forbidden:?}").contains("AIza"));
    assert_eq!(
        block_on(gemini.chat(&req)).unwrap_err(),
        LlmError::RateLimited {
            retry_after_ms: Some(13_500)
        }
    );
    assert_eq!(
        block_on(gemini.chat(&req)).unwrap_err(),
        LlmError::RateLimited {
            retry_after_ms: Some(2_000)
        },
        "a retry-after header wins over the body"
    );
    assert!(matches!(
        block_on(gemini.chat(&req)).unwrap_err(),
        LlmError::Transient(_)
    ));
    assert_eq!(retry_delay(b"{\"error\": {\"details\": 3}}"), None);
    assert_eq!(retry_delay(b"nope"), None);
}
