//! `Provider::chat_stream` of the Anthropic, OpenAI and Gemini adapters and `ModelChain::chat_stream`,
//! over a [`FakeHttp`] whose routes answer recorded streams in small pieces: tool calls, a
//! stream cut midway, a 429, and a failed attempt's text withdrawn before the retry.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawless_platform::{FakeClock, FakeHttp, FakeStream, PortError};
use futures::executor::block_on;
use serde_json::{json, Value};

use crate::llm::anthropic::Anthropic;
use crate::llm::cache::{Refusable, Ttl};
use crate::llm::chain::{Link, ModelChain};
use crate::llm::gemini::Gemini;
use crate::llm::openai::OpenAi;
use crate::llm::{
    Block, ChatMessage, ChatRequest, ChatResponse, LlmError, Provider, StopReason, Usage,
};
use crate::secret::Secret;

const ANTHROPIC_TOOL_USE: &[u8] =
    include_bytes!("../../../../tests/fixtures/streams/anthropic-tool-use.sse");
const OPENAI_TWO_TOOLS: &[u8] =
    include_bytes!("../../../../tests/fixtures/streams/openai-two-tool-calls.sse");
const GEMINI_TEXT: &[u8] = include_bytes!("../../../../tests/fixtures/streams/gemini-text.sse");
const GEMINI_TOOL_CALL: &[u8] =
    include_bytes!("../../../../tests/fixtures/streams/gemini-tool-call.sse");

const ANTHROPIC_URL: &str = "https://anthropic.test";
const OPENAI_URL: &str = "https://openai.test/v1";
const GEMINI_URL: &str = "https://gemini.test";

/// `bytes` in pieces of `n`.
fn pieces(bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    bytes.chunks(n).map(<[u8]>::to_vec).collect()
}

fn anthropic(http: &Arc<FakeHttp>) -> Anthropic {
    Anthropic {
        http: http.clone(),
        base_url: ANTHROPIC_URL.into(),
        api_key: Secret::new("sk-ant-test"),
        timeout: Duration::from_secs(30),
        cache: Refusable::new(Some(Ttl::FiveMinutes)),
    }
}

fn openai(http: &Arc<FakeHttp>) -> OpenAi {
    OpenAi {
        http: http.clone(),
        base_url: OPENAI_URL.into(),
        api_key: Secret::new("sk-test"),
        timeout: Duration::from_secs(30),
        cache_key: Refusable::new(None),
    }
}

fn gemini(http: &Arc<FakeHttp>) -> Gemini {
    Gemini {
        http: http.clone(),
        base_url: GEMINI_URL.into(),
        api_key: Secret::new("gm-test"),
        timeout: Duration::from_secs(30),
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        system: "s".into(),
        messages: vec![ChatMessage::user_text("What's the weather in Paris?")],
        tools: Default::default(),
        max_tokens: 100,
        ..Default::default()
    }
}

/// Calls `chat_stream` and records what `on_text` was given.
fn stream(provider: &dyn Provider) -> (Result<ChatResponse, LlmError>, Vec<String>) {
    let seen = Mutex::new(Vec::new());
    let on_text = |text: &str| seen.lock().unwrap().push(text.to_owned());
    let result = block_on(provider.chat_stream(&request(), &on_text));
    (result, seen.into_inner().unwrap())
}

fn body_of(http: &FakeHttp) -> Value {
    serde_json::from_slice(&http.requests().last().unwrap().body).unwrap()
}

#[test]
fn anthropic_streams_text_and_a_tool_call() {
    let http = Arc::new(FakeHttp::new());
    http.route_stream(format!("{ANTHROPIC_URL}/v1/messages"), |_| {
        Ok(FakeStream::new(200, pieces(ANTHROPIC_TOOL_USE, 7)))
    });
    let (resp, seen) = stream(&anthropic(&http));
    let resp = resp.unwrap();
    let text = "I'll check the current weather in Paris for you.";
    assert_eq!(seen, ["I", text], "the text so far, each time it grew");
    assert_eq!(
        resp.message.content,
        [
            Block::Text { text: text.into() },
            Block::ToolUse {
                id: "toolu_01NRLabsLyVHZPKxbKvkfSMn".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris"}),
                signature: None,
            },
        ]
    );
    assert_eq!(resp.stop, StopReason::ToolUse);
    assert_eq!(resp.usage.output, 65);
    let sent = &http.requests()[0];
    assert_eq!(sent.header_value("x-api-key"), Some("sk-ant-test"));
    assert_eq!(body_of(&http)["stream"], json!(true));
}

#[test]
fn openai_streams_two_tool_calls_with_usage() {
    let http = Arc::new(FakeHttp::new());
    http.route_stream(format!("{OPENAI_URL}/chat/completions"), |_| {
        Ok(FakeStream::new(200, pieces(OPENAI_TWO_TOOLS, 5)))
    });
    let (resp, seen) = stream(&openai(&http));
    let resp = resp.unwrap();
    assert!(seen.is_empty(), "no text: {seen:?}");
    let calls: Vec<(&str, &str, &Value)> = resp.message.tool_uses().collect();
    assert_eq!(
        calls,
        [
            (
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                &json!({"city": "Edinburgh", "country": "GB", "units": "c"})
            ),
            (
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                &json!({"ticker": "AAPL", "exchange": "NASDAQ"})
            ),
        ]
    );
    assert_eq!(resp.stop, StopReason::ToolUse);
    assert_eq!(
        resp.usage,
        Usage {
            input: 149,
            output: 60,
            cached_input: 0,
            cache_write: 0,
        }
    );
    let body = body_of(&http);
    assert_eq!(
        (&body["stream"], &body["stream_options"]),
        (&json!(true), &json!({"include_usage": true}))
    );
    let sent = &http.requests()[0];
    assert_eq!(sent.header_value("authorization"), Some("Bearer sk-test"));
}

#[test]
fn a_stream_cut_midway_is_transient() {
    let http = Arc::new(FakeHttp::new());
    let half = ANTHROPIC_TOOL_USE.len() / 2;
    http.route_stream(ANTHROPIC_URL, move |_| {
        Ok(FakeStream::new(200, pieces(&ANTHROPIC_TOOL_USE[..half], 9)))
    });
    let (resp, seen) = stream(&anthropic(&http));
    assert!(matches!(resp, Err(LlmError::Transient(_))), "{resp:?}");
    assert!(!seen.is_empty(), "text was shown before the cut");
    // The connection lost instead of closed: Transient too.
    http.route_stream(ANTHROPIC_URL, move |_| {
        Ok(FakeStream::new(200, pieces(&ANTHROPIC_TOOL_USE[..half], 9))
            .then_fail(PortError::unavailable("connection reset")))
    });
    let (resp, _) = stream(&anthropic(&http));
    assert!(matches!(resp, Err(LlmError::Transient(_))), "{resp:?}");
}

#[test]
fn a_429_is_rate_limited_with_its_retry_after() {
    let http = Arc::new(FakeHttp::new());
    http.route_stream(OPENAI_URL, |_| {
        let body = r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#;
        Ok(FakeStream::new(429, [body]).with_header("retry-after", "2"))
    });
    let (resp, seen) = stream(&openai(&http));
    assert_eq!(
        resp,
        Err(LlmError::RateLimited {
            retry_after_ms: Some(2000)
        })
    );
    assert!(seen.is_empty());
    // A refused key is said without the body; other statuses quote it, as the whole-body
    // call does.
    http.route_stream(ANTHROPIC_URL, |_| {
        Ok(FakeStream::new(401, [r#"{"error":"bad key"}"#]))
    });
    let (resp, _) = stream(&anthropic(&http));
    assert_eq!(resp, Err(LlmError::KeyRefused { status: 401 }));
    http.route_stream(ANTHROPIC_URL, |_| {
        Ok(FakeStream::new(404, [r#"{"error":"no such model"}"#]))
    });
    let (resp, _) = stream(&anthropic(&http));
    assert!(
        matches!(resp, Err(LlmError::Fatal(ref m)) if m.starts_with("HTTP 404") && m.contains("no such model")),
        "{resp:?}"
    );
}

#[test]
fn the_chain_withdraws_a_failed_attempts_text_and_retries() {
    let http = Arc::new(FakeHttp::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    http.route_stream(ANTHROPIC_URL, move |_| {
        let whole = n.fetch_add(1, Ordering::SeqCst) > 0;
        let upto = if whole {
            ANTHROPIC_TOOL_USE.len()
        } else {
            ANTHROPIC_TOOL_USE.len() / 2
        };
        Ok(FakeStream::new(
            200,
            pieces(&ANTHROPIC_TOOL_USE[..upto], 11),
        ))
    });
    let chain = ModelChain {
        links: vec![Link {
            label: "anthropic/m".into(),
            provider: Arc::new(anthropic(&http)),
            model: "m".into(),
            attempts: 2,
            price: None,
            vision: true,
            reads_pdf: false,
        }],
        clock: Arc::new(FakeClock::new(0)),
        base_backoff: Duration::from_secs(1),
        max_wait: Duration::from_secs(30),
    };
    let seen = Mutex::new(Vec::new());
    let on_text = |text: &str| seen.lock().unwrap().push(text.to_owned());
    let resp = block_on(chain.chat_stream(&request(), &on_text)).unwrap();
    let text = "I'll check the current weather in Paris for you.";
    assert_eq!(resp.message.text(), text);
    assert_eq!(resp.model, "anthropic/m");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        seen.into_inner().unwrap(),
        ["I", text, "", "I", text],
        "the first attempt's text, withdrawn, then the retry's"
    );
}

#[test]
fn the_default_chat_stream_shows_nothing_before_the_answer() {
    struct Whole;
    #[async_trait::async_trait]
    impl Provider for Whole {
        async fn chat(&self, _: &ChatRequest) -> Result<ChatResponse, LlmError> {
            Ok(ChatResponse {
                message: ChatMessage::assistant_text("all at once"),
                stop: StopReason::EndTurn,
                usage: Usage::default(),
                cost_micros: 0,
                model: String::new(),
            })
        }
    }
    let (resp, seen) = stream(&Whole);
    assert_eq!(resp.unwrap().message.text(), "all at once");
    assert!(
        seen.is_empty(),
        "a draft of the whole text would only cost a call: {seen:?}"
    );
}

#[test]
fn gemini_streams_text_and_a_signed_tool_call() {
    let http = Arc::new(FakeHttp::new());
    http.route_stream(GEMINI_URL, |req| {
        assert!(
            req.url
                .ends_with("/v1beta/models/m:streamGenerateContent?alt=sse"),
            "{}",
            req.url
        );
        assert_eq!(req.header_value("x-goog-api-key"), Some("gm-test"));
        Ok(FakeStream::new(200, pieces(GEMINI_TEXT, 17))
            .with_header("content-type", "text/event-stream"))
    });
    let (resp, seen) = stream(&gemini(&http));
    let resp = resp.unwrap();
    let answer = "There are **3** \"r\"s in strawberry.\n\nst**r**awbe**rr**y";
    assert_eq!(resp.message.text(), answer);
    assert!(seen.len() >= 2, "the text came in pieces: {seen:?}");
    assert!(seen.iter().all(|t| answer.starts_with(t.as_str())));
    assert_eq!(seen.last().map(String::as_str), Some(answer));

    http.route_stream(GEMINI_URL, |_| {
        Ok(FakeStream::new(200, pieces(GEMINI_TOOL_CALL, 50))
            .with_header("content-type", "text/event-stream"))
    });
    let (resp, seen) = stream(&gemini(&http));
    let resp = resp.unwrap();
    assert_eq!(resp.stop, StopReason::ToolUse);
    let [Block::ToolUse {
        name, signature, ..
    }] = &resp.message.content[..]
    else {
        panic!("{:?}", resp.message.content);
    };
    assert_eq!(name, "weather");
    assert!(signature.is_some(), "the thought signature is kept");
    assert!(seen.is_empty(), "no text to show");
}

#[test]
fn a_gemini_429_waits_as_its_body_says() {
    let http = Arc::new(FakeHttp::new());
    http.route_stream(GEMINI_URL, |_| {
        let body = r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"13s"}]}}"#;
        Ok(FakeStream::new(429, [body]))
    });
    let (resp, _) = stream(&gemini(&http));
    assert_eq!(
        resp,
        Err(LlmError::RateLimited {
            retry_after_ms: Some(13_000)
        })
    );
}
