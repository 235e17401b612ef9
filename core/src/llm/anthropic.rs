//! Anthropic Messages API adapter.

mod stream;

pub use stream::Format;
use stream::{stop_reason, usage};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest};
use serde_json::{json, Value};

use super::stream::receive;
use super::{Block, ChatMessage, ChatRequest, ChatResponse, LlmError, OnText, Provider, Role};
use crate::secret::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

pub struct Anthropic {
    pub http: Arc<dyn Http>,
    pub base_url: String,
    pub api_key: Secret,
    pub timeout: Duration,
}

/// The request body for `POST /v1/messages`.
pub fn request_body(req: &ChatRequest) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| {
            let content: Vec<Value> = m
                .content
                .iter()
                .map(|b| match b {
                    Block::Text { text } => json!({"type": "text", "text": text}),
                    Block::ToolUse { id, name, input, .. } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                    Block::ToolResult { tool_use_id, content, is_error } => {
                        json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error})
                    }
                    Block::Image { media_type, data } => json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}),
                    Block::Document { media_type, data, name } => json!({"type": "document", "title": name, "source": {"type": "base64", "media_type": media_type, "data": data}}),
                })
                .collect();
            json!({"role": m.role, "content": content})
        })
        .collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "system": req.system,
        "messages": messages,
    });
    if !req.tools.is_empty() {
        body["tools"] = json!(&*req.tools);
    }
    body
}

/// Reads a `/v1/messages` response body.
pub fn parse_response(body: &[u8]) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::Fatal(format!("anthropic: bad JSON: {e}")))?;
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Fatal("anthropic: no content".into()))?;
    let mut content = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => content.push(Block::Text {
                text: b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            }),
            Some("tool_use") => content.push(Block::ToolUse {
                id: b.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                input: b.get("input").cloned().unwrap_or_else(|| json!({})),
                signature: None,
            }),
            _ => {} // thinking and future block types are not replayed
        }
    }
    Ok(ChatResponse {
        message: ChatMessage {
            role: Role::Assistant,
            content,
        },
        stop: stop_reason(v.get("stop_reason").and_then(Value::as_str)),
        usage: usage(v.get("usage").unwrap_or(&Value::Null)),
        cost_micros: 0,
        model: String::new(),
    })
}

impl Anthropic {
    fn http_request(&self, body: &Value) -> HttpRequest {
        let url = format!("{}/v1/messages", self.base_url.trim_end_matches('/'));
        HttpRequest::post_json(url, body, self.timeout)
            .header("x-api-key", self.api_key.expose())
            .header("anthropic-version", "2023-06-01")
    }
}

#[async_trait]
impl Provider for Anthropic {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let resp = self
            .http
            .send(self.http_request(&request_body(req)))
            .await?;
        if resp.status != 200 {
            return Err(LlmError::from_status(
                resp.status,
                resp.header("retry-after"),
                &resp.body,
            ));
        }
        parse_response(&resp.body)
    }

    /// `"stream": true`: server-sent events, assembled by [`super::stream`].
    async fn chat_stream(
        &self,
        req: &ChatRequest,
        on_text: OnText<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let mut body = request_body(req);
        body["stream"] = json!(true);
        let resp = self.http.send_streaming(self.http_request(&body)).await?;
        receive(resp, &Format, on_text).await
    }

    /// `GET /v1/models?limit=1`.
    async fn check_key(&self) -> Result<(), LlmError> {
        let url = format!("{}/v1/models?limit=1", self.base_url.trim_end_matches('/'));
        let req = HttpRequest::get(url, self.timeout)
            .header("x-api-key", self.api_key.expose())
            .header("anthropic-version", "2023-06-01");
        super::check_key_at(&*self.http, req).await
    }
}
