//! OpenAI Chat Completions chunks assembled into an answer: `choices[0].delta.content` pieces
//! into the text, `delta.tool_calls[]` pieces by their `index` (the id and name in the first,
//! the `arguments` text spread over the rest), `finish_reason`, the usage of the last chunk
//! (`stream_options.include_usage`), the end at `data: [DONE]`. Compatible servers that close
//! after the `finish_reason` without `[DONE]` are complete too.

use serde_json::Value;

use super::parse_response;
use crate::llm::sse::Event;
use crate::llm::stream::WireFormat;
use crate::llm::stream::{cut, json, response, room_for_part, Assemble, Part, Wire};
use crate::llm::{ChatResponse, LlmError, StopReason};

const WIRE: Wire = Wire::OpenAi;

/// A tool call being assembled: its `index` in the chunks, id, name and arguments so far.
struct Call {
    index: u64,
    id: String,
    name: String,
    args: String,
}

#[derive(Default)]
pub(super) struct Chunks {
    text: String,
    calls: Vec<Call>,
    finish: Option<String>,
    usage: Option<Value>,
    done: bool,
}

impl Chunks {
    fn call(&mut self, piece: &Value) -> Result<(), LlmError> {
        let index = piece.get("index").and_then(Value::as_u64).unwrap_or(0);
        let at = match self.calls.iter().position(|c| c.index == index) {
            Some(at) => at,
            None => {
                room_for_part(WIRE, self.calls.len())?;
                self.calls.push(Call {
                    index,
                    id: String::new(),
                    name: String::new(),
                    args: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        let str_of = |pointer: &str| piece.pointer(pointer).and_then(Value::as_str);
        // Some servers repeat the id and name in every piece: the first one counts.
        if let (true, Some(id)) = (call.id.is_empty(), str_of("/id")) {
            call.id = id.to_owned();
        }
        if let (true, Some(name)) = (call.name.is_empty(), str_of("/function/name")) {
            call.name = name.to_owned();
        }
        if let Some(args) = str_of("/function/arguments") {
            call.args.push_str(args);
        }
        Ok(())
    }
}

/// An `error` chunk (sent mid-stream by OpenAI and compatible servers) as the error its status
/// would be: a numeric `code` is taken as the status; otherwise rate limits are 429, server
/// errors 500 and the rest 400.
fn error(error: &Value, data: &str) -> LlmError {
    let code = error.get("code").and_then(Value::as_u64);
    let named = |field: &str| error.get(field).and_then(Value::as_str).unwrap_or("");
    let kind = format!("{} {}", named("type"), named("code"));
    let status = match code {
        Some(code @ 400..=599) => code as u16,
        _ if kind.contains("rate_limit") => 429,
        _ if kind.contains("server_error") || kind.contains("overloaded") => 500,
        _ => 400,
    };
    LlmError::from_status(status, None, data.as_bytes())
}

impl Assemble for Chunks {
    fn event(&mut self, event: &Event, on_delta: &mut dyn FnMut(&str)) -> Result<(), LlmError> {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let v = json(WIRE, event)?;
        if let Some(e) = v.get("error") {
            return Err(error(e, &event.data));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        let choices = v.get("choices").and_then(Value::as_array);
        let Some(choice) = choices.and_then(|c| {
            c.iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        }) else {
            return Ok(());
        };
        if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str) {
            self.text.push_str(text);
            on_delta(text);
        }
        let calls = choice
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array);
        for piece in calls.into_iter().flatten() {
            self.call(piece)?;
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn text(&self) -> String {
        self.text.clone()
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError> {
        if !self.done && self.finish.is_none() {
            return Err(cut(WIRE, "[DONE]"));
        }
        let mut parts = Vec::new();
        if !self.text.is_empty() {
            parts.push(Part::Text(self.text));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|c| c.index);
        let any_call = !calls.is_empty();
        parts.extend(calls.into_iter().map(|c| Part::Tool {
            id: c.id,
            name: c.name,
            args: c.args,
            signature: None,
        }));
        let stop = stop_reason(self.finish.as_deref(), any_call);
        let usage = usage(self.usage.as_ref().unwrap_or(&Value::Null));
        Ok(response(parts, stop, usage))
    }
}

/// A `finish_reason` as a [`StopReason`]; `calls`: the answer has tool calls.
pub(crate) fn stop_reason(reason: Option<&str>, calls: bool) -> StopReason {
    match reason {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        _ if calls => StopReason::ToolUse,
        _ => StopReason::Other,
    }
}

/// A `usage` object as [`crate::llm::Usage`]; `prompt_tokens` includes the cached ones,
/// counted in `prompt_tokens_details.cached_tokens` (DeepSeek: `prompt_cache_hit_tokens`).
/// Caching is automatic: nothing is billed as a write.
pub(crate) fn usage(usage: &Value) -> crate::llm::Usage {
    let tokens = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
    let cached = tokens("/prompt_tokens_details/cached_tokens")
        .or_else(|| tokens("/prompt_cache_hit_tokens"))
        .unwrap_or(0);
    crate::llm::Usage {
        input: tokens("/prompt_tokens").unwrap_or(0).saturating_sub(cached),
        output: tokens("/completion_tokens").unwrap_or(0),
        cached_input: cached,
        cache_write: 0,
    }
}

/// The OpenAI Chat Completions wire format, as the stream reader reads it.
pub struct Format;

impl WireFormat for Format {
    fn wire(&self) -> Wire {
        Wire::OpenAi
    }

    fn assembly(&self) -> Box<dyn Assemble> {
        Box::<Chunks>::default()
    }

    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, LlmError> {
        parse_response(body)
    }
}
