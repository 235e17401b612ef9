//! Gemini `streamGenerateContent?alt=sse` chunks assembled into an answer. Each event is a
//! whole `GenerateContentResponse`: the text parts of `candidates[0].content.parts` are pieces
//! of the text (thought parts are left out, consecutive text joins into one block), a
//! `functionCall` part is a whole call (its `id` when given, else `call_<n>`, the n-th call of
//! the answer), `finishReason` ends the answer (a tool call makes it `ToolUse`: Gemini says
//! `STOP`), `usageMetadata` is the running total (input is the prompt less the cached part;
//! output is candidates and thoughts, both billed as output). A prompt blocked outright
//! (`promptFeedback.blockReason`) is an empty answer with [`StopReason::Other`].

use serde_json::{json, Value};

use crate::llm::sse::Event;
use crate::llm::stream::{cut, json, response, room_for_part, text_of, Assemble, Part, Wire};
use crate::llm::{ChatResponse, LlmError, StopReason, Usage};

const WIRE: Wire = Wire::Gemini;

#[derive(Default)]
pub(super) struct Chunks {
    parts: Vec<Part>,
    calls: usize,
    finish: Option<String>,
    blocked: bool,
    usage: Option<Value>,
}

impl Chunks {
    fn part(&mut self, part: &Value, on_delta: &mut dyn FnMut(&str)) -> Result<(), LlmError> {
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            if text.is_empty() {
                return Ok(()); // a part carrying only a thought signature
            }
            if let Some(Part::Text(last)) = self.parts.last_mut() {
                last.push_str(text);
            } else {
                room_for_part(WIRE, self.parts.len())?;
                self.parts.push(Part::Text(text.to_owned()));
            }
            on_delta(text);
        } else if let Some(call) = part.get("functionCall") {
            room_for_part(WIRE, self.parts.len())?;
            let str_of = |field: &str| call.get(field).and_then(Value::as_str);
            self.parts.push(Part::Tool {
                id: str_of("id").map_or_else(|| format!("call_{}", self.calls), str::to_owned),
                name: str_of("name").unwrap_or("").to_owned(),
                args: call.get("args").unwrap_or(&json!({})).to_string(),
                signature: part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
            self.calls += 1;
        }
        Ok(())
    }
}

/// An `error` chunk as the error its `code` (an HTTP status) would be.
fn error(error: &Value, data: &str) -> LlmError {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..=599).contains(c))
        .unwrap_or(500);
    LlmError::from_status(status, None, data.as_bytes())
}

impl Assemble for Chunks {
    fn event(&mut self, event: &Event, on_delta: &mut dyn FnMut(&str)) -> Result<(), LlmError> {
        let v = json(WIRE, event)?;
        if let Some(e) = v.get("error") {
            return Err(error(e, &event.data));
        }
        if let Some(u) = v.get("usageMetadata").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        if v.pointer("/promptFeedback/blockReason").is_some() {
            self.blocked = true;
        }
        let Some(candidate) = v.pointer("/candidates/0") else {
            return Ok(());
        };
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.part(part, on_delta)?;
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
        }
        Ok(())
    }

    /// Gemini sends no end marker after the `finishReason`: the stream is read to its end.
    fn is_done(&self) -> bool {
        false
    }

    fn text(&self) -> String {
        text_of(&self.parts)
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError> {
        let stop = match self.finish.as_deref() {
            None if self.blocked => StopReason::Other,
            None => return Err(cut(WIRE, "a finishReason")),
            Some(_) if self.calls > 0 => StopReason::ToolUse,
            Some("STOP") => StopReason::EndTurn,
            Some("MAX_TOKENS") => StopReason::MaxTokens,
            Some(_) => StopReason::Other,
        };
        let meta = self.usage.unwrap_or(Value::Null);
        let tokens = |field: &str| meta.get(field).and_then(Value::as_u64).unwrap_or(0);
        let cached = tokens("cachedContentTokenCount");
        let usage = Usage {
            input: tokens("promptTokenCount").saturating_sub(cached),
            output: tokens("candidatesTokenCount").saturating_add(tokens("thoughtsTokenCount")),
            cached_input: cached,
            cache_write: 0,
        };
        Ok(response(self.parts, stop, usage))
    }
}
