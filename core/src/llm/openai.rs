//! OpenAI Chat Completions adapter, for OpenAI and every compatible endpoint (OpenRouter,
//! Groq, DeepSeek, Ollama …).

mod stream;

pub use stream::Format;
use stream::{stop_reason, usage};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest};
use serde_json::{json, Value};

use super::cache::{conversation_key, Refusable};
use super::stream::receive;
use super::{Block, ChatMessage, ChatRequest, ChatResponse, LlmError, OnText, Provider, Role};
use crate::secret::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct OpenAi {
    pub http: Arc<dyn Http>,
    pub base_url: String,
    pub api_key: Secret,
    pub timeout: Duration,
    /// Whether requests carry `prompt_cache_key` (see [`super::cache`]).
    pub cache_key: Refusable<()>,
}

/// The request body for `POST /chat/completions`.
pub fn request_body(req: &ChatRequest) -> Value {
    let mut messages = vec![json!({"role": "system", "content": req.system})];
    for m in &req.messages {
        match m.role {
            Role::Assistant => {
                let calls: Vec<Value> = m
                    .tool_uses()
                    .map(|(id, name, input)| {
                        json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}})
                    })
                    .collect();
                let text = m.text();
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !calls.is_empty() {
                    msg["tool_calls"] = json!(calls);
                }
                messages.push(msg);
            }
            Role::User => {
                for b in &m.content {
                    if let Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } = b
                    {
                        let content = if *is_error {
                            format!("Error: {content}")
                        } else {
                            content.clone()
                        };
                        messages.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                    }
                }
                let text = m.text();
                if m.content.iter().any(Block::is_media) {
                    // Content parts: the text, then each image as a data URL and each
                    // document as a file.
                    let mut parts = Vec::new();
                    if !text.is_empty() {
                        parts.push(json!({"type": "text", "text": text}));
                    }
                    for b in &m.content {
                        match b {
                            Block::Image { media_type, data } => parts.push(json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}})),
                            Block::Document { media_type, data, name } => parts.push(json!({"type": "file", "file": {"filename": name, "file_data": format!("data:{media_type};base64,{data}")}})),
                            _ => {}
                        }
                    }
                    messages.push(json!({"role": "user", "content": parts}));
                } else if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
        }
    }
    push_context(&mut messages, &req.context);
    let mut body = json!({"model": req.model, "max_tokens": req.max_tokens, "messages": messages});
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
        body["tools"] = json!(tools);
    }
    body
}

/// `context` at the very end, so that every request of a conversation begins with the bytes
/// of the one before (the prefix OpenAI caches): joined to the last message's text, a user's
/// or a tool result's (some compatible servers refuse a user message right after tool
/// results), or else a user message of its own.
fn push_context(messages: &mut Vec<Value>, context: &str) {
    if context.is_empty() {
        return;
    }
    let Some(last) = messages.last_mut().filter(|m| m["role"] != "assistant") else {
        messages.push(json!({"role": "user", "content": context}));
        return;
    };
    match &mut last["content"] {
        Value::String(text) => {
            text.push_str("\n\n");
            text.push_str(context);
        }
        Value::Array(parts) => parts.push(json!({"type": "text", "text": context})),
        _ => messages.push(json!({"role": "user", "content": context})),
    }
}

/// Reads a `/chat/completions` response body. Tool arguments that are not valid JSON are
/// passed on as `{"_invalid_arguments": "<text>"}` so the tool reports the error to the model.
pub fn parse_response(body: &[u8]) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::Fatal(format!("openai: bad JSON: {e}")))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| LlmError::Fatal("openai: no choices".into()))?;
    let msg = choice
        .get("message")
        .ok_or_else(|| LlmError::Fatal("openai: no message".into()))?;
    let mut content = Vec::new();
    if let Some(text) = msg
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        content.push(Block::Text {
            text: text.to_owned(),
        });
    }
    for call in msg
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let args = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}");
        let input = super::tool_input(args);
        content.push(Block::ToolUse {
            id: call
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            name: call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            input,
            signature: None,
        });
    }
    let calls = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    let stop = stop_reason(choice.get("finish_reason").and_then(Value::as_str), calls);
    let usage = usage(v.get("usage").unwrap_or(&Value::Null));
    Ok(ChatResponse {
        message: ChatMessage {
            role: Role::Assistant,
            content,
        },
        stop,
        usage,
        cost_micros: 0,
        model: String::new(),
    })
}

impl OpenAi {
    /// `req`'s body, with `prompt_cache_key` when this provider takes it.
    fn body(&self, req: &ChatRequest) -> (Value, bool) {
        let mut body = request_body(req);
        let keyed = self.cache_key.get().is_some() && !req.conversation.is_empty();
        if keyed {
            let key = conversation_key(self.api_key.expose(), &req.conversation);
            body["prompt_cache_key"] = json!(key);
        }
        (body, keyed)
    }

    /// `call` with `req`'s body; once more without `prompt_cache_key` if it was refused.
    async fn with_fallback<F, Fut>(
        &self,
        req: &ChatRequest,
        call: F,
    ) -> Result<ChatResponse, LlmError>
    where
        F: Fn(Value) -> Fut,
        Fut: std::future::Future<Output = Result<ChatResponse, LlmError>>,
    {
        let (body, keyed) = self.body(req);
        match call(body).await {
            Err(e) if keyed && self.cache_key.refused_by(&e, "openai", "prompt_cache_key") => {
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
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        let http_req = HttpRequest::post_json(url, body, self.timeout);
        if self.api_key.is_empty() {
            return http_req;
        }
        http_req.header("authorization", format!("Bearer {}", self.api_key.expose()))
    }
}

#[async_trait]
impl Provider for OpenAi {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.with_fallback(req, |body| self.send(body)).await
    }

    /// `"stream": true` with `stream_options.include_usage`, so the last chunk carries the
    /// usage: server-sent events, assembled by [`super::stream`].
    async fn chat_stream(
        &self,
        req: &ChatRequest,
        on_text: OnText<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let streamed = |mut body: Value| async move {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
            let resp = self.http.send_streaming(self.http_request(&body)).await?;
            receive(resp, &Format, on_text).await
        };
        self.with_fallback(req, streamed).await
    }

    /// `GET /models` (every compatible server has it; Ollama's too).
    async fn check_key(&self) -> Result<(), LlmError> {
        let url = format!("{}/models", self.base_url.trim_end_matches('/'));
        let mut req = HttpRequest::get(url, self.timeout);
        if !self.api_key.is_empty() {
            req = req.header("authorization", format!("Bearer {}", self.api_key.expose()));
        }
        super::check_key_at(&*self.http, req).await
    }
}
