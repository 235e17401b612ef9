//! Google Gemini API adapter (`generateContent`, native function calling).
//!
//! The wire format, as the REST reference spells it: `contents` of role `user` or `model`,
//! each a list of parts (`text`, `inlineData {mimeType, data}`, `functionCall {id?, name,
//! args}`, `functionResponse {id?, name, response}`); the system prompt in
//! `systemInstruction`; the key in the `x-goog-api-key` header, never in the URL.
//!
//! Calls and results. Older models send no call ids, so a call without one gets an id made
//! here (`gcall_<hash of the response>_<n>`, unique within a turn, which approvals rely
//! on) and is sent back without it; a function response is matched to its call by name, which
//! is looked up from the call with the result's id. Thinking models (2.5, 3) attach a
//! `thoughtSignature` to function-call parts that must come back exactly where it was: it is
//! kept in [`Block::ToolUse`]'s `signature`. Gemini 3 refuses a step whose first call has no
//! signature, so a call that has none (history from another provider) gets the documented
//! placeholder that skips the check.

mod stream;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest};
use serde_json::{json, Value};

use super::stream::{receive, Assemble, Wire, WireFormat};
use super::{
    Block, ChatMessage, ChatRequest, ChatResponse, LlmError, OnText, Provider, Role, StopReason,
    Usage,
};
use crate::secret::Secret;

pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// What the docs give for a function call Gemini did not produce itself (thought signatures
/// FAQ): accepted by the Gemini API and by Vertex AI.
pub const FOREIGN_SIGNATURE: &str = "skip_thought_signature_validator";

/// The prefix of call ids made here (the model sent none); such ids are not sent back.
const MADE_ID: &str = "gcall_";

pub struct Gemini {
    pub http: Arc<dyn Http>,
    pub base_url: String,
    pub api_key: Secret,
    pub timeout: Duration,
}

/// The request body for `POST /v1beta/models/{model}:generateContent`.
pub fn request_body(req: &ChatRequest) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    // Tool name by call id, from the calls seen so far: a function response needs the name.
    let mut names: Vec<(&str, &str)> = Vec::new();
    for m in &req.messages {
        let (role, parts) = match m.role {
            Role::Assistant => ("model", model_parts(m, &mut names)),
            Role::User => ("user", user_parts(m, &names)),
        };
        if parts.is_empty() {
            continue;
        }
        // Gemini wants turns to alternate: a message of the same role as the one before (a
        // cancelled round's results, then the next question) joins it.
        match contents.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(prev) = last["parts"].as_array_mut() {
                    prev.extend(parts);
                }
            }
            _ => contents.push(json!({"role": role, "parts": parts})),
        }
    }
    // What changes from one request to the next comes last: the prefix before it is the
    // next request's, which Gemini's implicit cache reads.
    if !req.context.is_empty() {
        let part = json!({"text": req.context});
        match contents.last_mut() {
            Some(last) if last["role"] == "user" => {
                if let Some(parts) = last["parts"].as_array_mut() {
                    parts.push(part);
                }
            }
            _ => contents.push(json!({"role": "user", "parts": [part]})),
        }
    }
    let mut body = json!({
        "contents": contents,
        "generationConfig": {"maxOutputTokens": req.max_tokens},
    });
    if !req.system.is_empty() {
        body["systemInstruction"] = json!({"parts": [{"text": req.system}]});
    }
    if !req.tools.is_empty() {
        let declarations: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": parameters(&t.input_schema)}))
            .collect();
        body["tools"] = json!([{ "functionDeclarations": declarations }]);
    }
    body
}

/// A tool's input schema as `parametersJsonSchema`. That field takes JSON Schema as it is
/// (the reference's own example carries `additionalProperties`), unlike `parameters`, an
/// OpenAPI subset that refuses `additionalProperties`, `$schema` and more: so our schemas go
/// unchanged, with no list of keywords to strip to keep up to date. Only a root `$schema`
/// is dropped, which some Gemini versions have refused.
fn parameters(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(map) = schema.as_object_mut() {
        map.remove("$schema");
    }
    schema
}

/// The parts of an assistant message: text and function calls, each call with its
/// signature, the first call of the step with one in any case.
fn model_parts<'a>(m: &'a ChatMessage, names: &mut Vec<(&'a str, &'a str)>) -> Vec<Value> {
    let mut parts = Vec::new();
    let mut first_call = true;
    for b in &m.content {
        match b {
            Block::ToolUse {
                id,
                name,
                input,
                signature,
            } => {
                names.push((id.as_str(), name.as_str()));
                let mut call = json!({"name": name, "args": args(input)});
                if !id.starts_with(MADE_ID) {
                    call["id"] = json!(id);
                }
                let mut part = json!({ "functionCall": call });
                match signature {
                    Some(s) => part["thoughtSignature"] = json!(s),
                    None if first_call => part["thoughtSignature"] = json!(FOREIGN_SIGNATURE),
                    None => {}
                }
                first_call = false;
                parts.push(part);
            }
            other => parts.extend(content_part(other)),
        }
    }
    parts
}

/// A call's arguments: a JSON object (`args` is a Struct), whatever the history holds.
fn args(input: &Value) -> Value {
    match input {
        Value::Object(_) => input.clone(),
        Value::Null => json!({}),
        other => json!({ "value": other }),
    }
}

/// The parts of a user message: function responses, text, images and documents.
fn user_parts(m: &ChatMessage, names: &[(&str, &str)]) -> Vec<Value> {
    let mut parts = Vec::new();
    for b in &m.content {
        let Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } = b
        else {
            parts.extend(content_part(b));
            continue;
        };
        // The latest call with this id (made-up ids repeat across turns).
        let name = names
            .iter()
            .rev()
            .find(|(id, _)| id == tool_use_id)
            .map(|(_, name)| *name);
        let Some(name) = name else {
            // A result whose call is not in the request cannot be a function response.
            parts.push(json!({"text": format!("[Result of an earlier tool call] {content}")}));
            continue;
        };
        // The documented keys: "output" for a result, "error" for a failure.
        let key = if *is_error { "error" } else { "output" };
        let mut response = json!({"name": name, "response": { key: content }});
        if !tool_use_id.starts_with(MADE_ID) {
            response["id"] = json!(tool_use_id);
        }
        parts.push(json!({ "functionResponse": response }));
    }
    parts
}

/// Text, an image or a document (PDF, read inline) as parts.
fn content_part(b: &Block) -> Vec<Value> {
    match b {
        Block::Text { text } if text.is_empty() => vec![],
        Block::Text { text } => vec![json!({ "text": text })],
        Block::Image { media_type, data } => {
            vec![json!({"inlineData": {"mimeType": media_type, "data": data}})]
        }
        Block::Document {
            media_type,
            data,
            name,
        } => vec![
            json!({"text": format!("[Document: {name}]")}),
            json!({"inlineData": {"mimeType": media_type, "data": data}}),
        ],
        Block::ToolUse { .. } | Block::ToolResult { .. } => vec![],
    }
}

/// Reads a `generateContent` response body. Never panics: anything unexpected is
/// [`LlmError::Fatal`].
pub fn parse_response(body: &[u8]) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::Fatal(format!("gemini: bad JSON: {e}")))?;
    let Some(candidate) = v.pointer("/candidates/0") else {
        return Err(
            match v
                .pointer("/promptFeedback/blockReason")
                .and_then(Value::as_str)
            {
                Some(reason) => LlmError::Fatal(format!(
                    "gemini: the prompt was blocked ({reason}); nothing was generated"
                )),
                None => LlmError::Fatal("gemini: no candidates".into()),
            },
        );
    };
    let salt = fnv1a(body);
    let mut content: Vec<Block> = Vec::new();
    let mut calls = 0;
    let parts = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array);
    for part in parts.into_iter().flatten() {
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            continue; // a thought summary: not part of the answer
        }
        if let Some(call) = part.get("functionCall") {
            let id = match call.get("id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => id.to_owned(),
                _ => format!("{MADE_ID}{salt:08x}_{calls}"),
            };
            calls += 1;
            content.push(Block::ToolUse {
                id,
                name: str_at(call, "name"),
                input: call.get("args").map_or_else(|| json!({}), args),
                signature: part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        } else if let Some(text) = part.get("text").and_then(Value::as_str) {
            // Adjacent text parts are one answer cut in pieces.
            match content.last_mut() {
                Some(Block::Text { text: prev }) => prev.push_str(text),
                _ if text.is_empty() => {}
                _ => content.push(Block::Text {
                    text: text.to_owned(),
                }),
            }
        }
    }
    let stop = match candidate.get("finishReason").and_then(Value::as_str) {
        _ if calls > 0 => StopReason::ToolUse,
        Some("STOP") => StopReason::EndTurn,
        Some("MAX_TOKENS") => StopReason::MaxTokens,
        _ => StopReason::Other, // SAFETY, RECITATION, MALFORMED_FUNCTION_CALL …
    };
    Ok(ChatResponse {
        message: ChatMessage {
            role: Role::Assistant,
            content,
        },
        stop,
        usage: usage(&v),
        cost_micros: 0,
        model: String::new(),
    })
}

fn str_at(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// `usageMetadata`: the prompt count includes the cached tokens; thinking is billed as
/// output.
fn usage(v: &Value) -> Usage {
    let tokens = |field: &str| {
        v.pointer(&format!("/usageMetadata/{field}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let cached = tokens("cachedContentTokenCount");
    Usage {
        input: tokens("promptTokenCount").saturating_sub(cached),
        output: tokens("candidatesTokenCount").saturating_add(tokens("thoughtsTokenCount")),
        cached_input: cached,
        cache_write: 0,
    }
}

/// The `RetryInfo` of an error body (`{"error": {"details": [{"@type":
/// "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}]}}`) in seconds, as
/// `retry-after` would say it.
pub fn retry_delay(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let details = v.pointer("/error/details")?.as_array()?;
    details
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| d.get("retryDelay")?.as_str()?.strip_suffix('s'))
        .map(str::to_owned)
}

/// FNV-1a, 32 bits: a stable fingerprint of a response for the call ids made here.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

impl Gemini {
    /// `POST {base}/v1beta/models/{model}:{method}` with the request's body, the key in its
    /// header (never in the URL).
    fn http_request(&self, req: &ChatRequest, method: &str) -> HttpRequest {
        let model = req.model.strip_prefix("models/").unwrap_or(&req.model);
        let url = format!(
            "{}/v1beta/models/{model}:{method}",
            self.base_url.trim_end_matches('/')
        );
        HttpRequest::post_json(url, &request_body(req), self.timeout)
            .header("x-goog-api-key", self.api_key.expose())
    }
}

#[async_trait]
impl Provider for Gemini {
    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let resp = self
            .http
            .send(self.http_request(req, "generateContent"))
            .await?;
        if resp.status != 200 {
            let retry_after = match resp.header("retry-after") {
                Some(h) => Some(h.to_owned()),
                None => retry_delay(&resp.body),
            };
            return Err(LlmError::from_status(
                resp.status,
                retry_after.as_deref(),
                &resp.body,
            ));
        }
        parse_response(&resp.body)
    }

    /// `streamGenerateContent?alt=sse`: server-sent events, assembled by [`super::stream`]
    /// (thought signatures kept on their calls).
    async fn chat_stream(
        &self,
        req: &ChatRequest,
        on_text: OnText<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let http_req = self.http_request(req, "streamGenerateContent?alt=sse");
        let resp = self.http.send_streaming(http_req).await?;
        receive(resp, &Format, on_text).await
    }

    /// `GET /v1beta/models?pageSize=1`.
    async fn check_key(&self) -> Result<(), LlmError> {
        let url = format!(
            "{}/v1beta/models?pageSize=1",
            self.base_url.trim_end_matches('/')
        );
        let req =
            HttpRequest::get(url, self.timeout).header("x-goog-api-key", self.api_key.expose());
        super::check_key_at(&*self.http, req).await
    }
}

/// The Gemini wire format, as the stream reader reads it.
pub struct Format;

impl WireFormat for Format {
    fn wire(&self) -> Wire {
        Wire::Gemini
    }

    fn assembly(&self) -> Box<dyn Assemble> {
        Box::<stream::Chunks>::default()
    }

    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, LlmError> {
        parse_response(body)
    }
    fn retry_delay(&self, body: &[u8]) -> Option<String> {
        retry_delay(body)
    }
}

#[cfg(test)]
mod tests;
