//! Anthropic Messages API adapter.

mod stream;

pub use stream::Format;
use stream::{stop_reason, usage};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest};
use serde_json::{json, Value};

use super::cache::{self, Refusable, Ttl};
use super::stream::receive;
use super::{Block, ChatMessage, ChatRequest, ChatResponse, LlmError, OnText, Provider, Role};
use crate::secret::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

pub struct Anthropic {
    pub http: Arc<dyn Http>,
    pub base_url: String,
    pub api_key: Secret,
    pub timeout: Duration,
    /// The TTL of the cache breakpoints it is sent; none, no breakpoints.
    pub cache: Refusable<Ttl>,
}

/// The request body for `POST /v1/messages`, without cache breakpoints.
pub fn request_body(req: &ChatRequest) -> Value {
    body(req, None)
}

/// The request body with `cache_control` breakpoints of `ttl` (see [`super::cache`]), at
/// most the four Anthropic allows: the last tool, the system prompt (the tools before it),
/// and, in a conversation, the last block of each of the newest two user messages: the newest
/// turn's, which the next request reads, and the one the request before marked, read even
/// when a round of many tool calls put it past the cache's look-back of 20 blocks. A request
/// outside a conversation (a summary: [`ChatRequest::conversation`] empty) marks no message:
/// no later request would read what a write there costs. [`ChatRequest::context`] comes
/// after every mark.
pub fn cached_request_body(req: &ChatRequest, ttl: Ttl) -> Value {
    body(req, Some(ttl))
}

fn body(req: &ChatRequest, cache: Option<Ttl>) -> Value {
    let mut messages: Vec<Value> = req
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
    let mut system = json!(req.system);
    let mut tools = json!(&*req.tools);
    if let Some(ttl) = cache {
        let mark = cache::control(ttl);
        if !req.system.is_empty() {
            system = json!([{"type": "text", "text": req.system, "cache_control": mark}]);
        }
        if let Some(last) = tools.as_array_mut().and_then(|t| t.last_mut()) {
            last["cache_control"] = mark.clone();
        }
        let users = req.messages.iter().enumerate().rev();
        let newest = users.filter(|(_, m)| m.role == Role::User);
        let newest = newest.take(if req.conversation.is_empty() { 0 } else { 2 });
        for (at, _) in newest {
            let content = messages[at]["content"].as_array_mut();
            if let Some(block) = content.and_then(|c| c.last_mut()) {
                block["cache_control"] = mark.clone();
            }
        }
    }
    push_context(&mut messages, &req.context);
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "system": system,
        "messages": messages,
    });
    if !req.tools.is_empty() {
        body["tools"] = tools;
    }
    body
}

/// `context` as a text block at the very end: in the last message, a user's, or else a user
/// message of its own.
fn push_context(messages: &mut Vec<Value>, context: &str) {
    if context.is_empty() {
        return;
    }
    let block = json!({"type": "text", "text": context});
    match messages.last_mut() {
        Some(last) if last["role"] == "user" => {
            if let Some(content) = last["content"].as_array_mut() {
                content.push(block);
            }
        }
        _ => messages.push(json!({"role": "user", "content": [block]})),
    }
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
    /// `req`'s body, with breakpoints unless `cache` is none or was refused.
    fn body(&self, req: &ChatRequest) -> (Value, bool) {
        match self.cache.get() {
            Some(ttl) => (cached_request_body(req, ttl), true),
            None => (request_body(req), false),
        }
    }

    /// `call` with `req`'s body; once more without breakpoints if they were refused.
    async fn with_fallback<F, Fut>(
        &self,
        req: &ChatRequest,
        call: F,
    ) -> Result<ChatResponse, LlmError>
    where
        F: Fn(Value) -> Fut,
        Fut: std::future::Future<Output = Result<ChatResponse, LlmError>>,
    {
        let (body, marked) = self.body(req);
        match call(body).await {
            Err(e) if marked && self.cache.refused_by(&e, "anthropic", "cache_control") => {
                call(request_body(req)).await
            }
            answer => answer,
        }
    }

    async fn send(&self, body: Value) -> Result<ChatResponse, LlmError> {
        let resp = self.http.send(self.http_request(&body)).await?;
        if resp.status != 200 {
            return Err(LlmError::from_status(
                resp.status,
                resp.header("retry-after"),
                &resp.body,
            ));
        }
        parse_response(&resp.body)
    }

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
        self.with_fallback(req, |body| self.send(body)).await
    }

    /// `"stream": true`: server-sent events, assembled by [`super::stream`].
    async fn chat_stream(
        &self,
        req: &ChatRequest,
        on_text: OnText<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let streamed = |mut body: Value| async move {
            body["stream"] = json!(true);
            let resp = self.http.send_streaming(self.http_request(&body)).await?;
            receive(resp, &Format, on_text).await
        };
        self.with_fallback(req, streamed).await
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
