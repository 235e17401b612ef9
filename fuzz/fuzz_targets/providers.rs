//! Provider response parsers: Anthropic's and OpenAI's `parse_response`, the OpenAI-compatible
//! `parse_embeddings`, and error mapping (`LlmError::from_status`, `parse_retry_after`,
//! `for_user`). A parsed answer is replayed into both wire formats' request bodies, as the
//! next turn would.
//!
//! Input: one byte choosing the parser (and for embeddings, the count and dimensions), then
//! the body.

#![no_main]

use clawless_core::llm::{
    anthropic, openai, parse_retry_after, ChatMessage, ChatRequest, ChatResponse, LlmError,
};
use clawless_core::memory::embed::parse_embeddings;
use libfuzzer_sys::fuzz_target;

fn replay(response: ChatResponse) {
    let request = ChatRequest {
        model: "m".into(),
        system: "s".into(),
        messages: vec![ChatMessage::user_text("hi"), response.message],
        tools: Default::default(),
        max_tokens: 16,
        ..Default::default()
    };
    for body in [
        anthropic::request_body(&request),
        openai::request_body(&request),
    ] {
        assert!(body.is_object());
        assert!(!body.to_string().is_empty());
    }
}

fn check_error(e: &LlmError) {
    assert!(!e.for_user(Some("anthropic")).is_empty());
    assert!(!e.for_user(None).is_empty());
}

fuzz_target!(|data: &[u8]| {
    let Some((which, body)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => match anthropic::parse_response(body) {
            Ok(r) => replay(r),
            Err(e) => check_error(&e),
        },
        1 => match openai::parse_response(body) {
            Ok(r) => replay(r),
            Err(e) => check_error(&e),
        },
        2 => {
            let (n, dims) = (usize::from(which >> 2 & 7), usize::from(which >> 5) + 1);
            if let Ok(vectors) = parse_embeddings(body, n, dims) {
                assert_eq!(vectors.len(), n);
                assert!(vectors.iter().all(|v| v.len() == dims));
            }
        }
        _ => {
            let status = u16::from_le_bytes([body.first().copied().unwrap_or(0), which >> 2]);
            let text = String::from_utf8_lossy(body.get(1..).unwrap_or_default());
            let retry_after = text.lines().next();
            let e = LlmError::from_status(status, retry_after, body);
            check_error(&e);
            let _ = parse_retry_after(&text);
        }
    }
});
