//! Anthropic Messages events assembled into an answer: blocks by their `index`, text from
//! `text_delta`, tool input from the `input_json_delta` pieces, the stop reason and usage from
//! `message_start` and `message_delta`, the end at `message_stop`.

use serde_json::{Map, Value};

use super::parse_response;
use crate::llm::sse::Event;
use crate::llm::stream::WireFormat;
use crate::llm::stream::{cut, json, response, room_for_part, text_of, Assemble, Part, Wire};
use crate::llm::{ChatResponse, LlmError, StopReason};

const WIRE: Wire = Wire::Anthropic;

#[derive(Default)]
pub(super) struct Messages {
    parts: Vec<Part>,
    /// A block's `index` → its part; blocks not kept (thinking, server tools) have none.
    blocks: Vec<(u64, usize)>,
    /// The usage fields so far: `message_delta`'s replace `message_start`'s.
    usage: Map<String, Value>,
    stop: Option<String>,
    done: bool,
}

impl Messages {
    fn part(&mut self, event: &Value) -> Option<&mut Part> {
        let index = event.get("index").and_then(Value::as_u64)?;
        let (_, at) = self.blocks.iter().find(|(i, _)| *i == index)?;
        self.parts.get_mut(*at)
    }

    fn start(&mut self, event: &Value, on_delta: &mut dyn FnMut(&str)) -> Result<(), LlmError> {
        let (Some(index), Some(block)) = (
            event.get("index").and_then(Value::as_u64),
            event.get("content_block"),
        ) else {
            return Ok(());
        };
        let str_of = |field: &str| block.get(field).and_then(Value::as_str).unwrap_or("");
        let part = match str_of("type") {
            "text" => {
                let text = str_of("text");
                if !text.is_empty() {
                    on_delta(text);
                }
                Part::Text(text.to_owned())
            }
            "tool_use" => Part::Tool {
                id: str_of("id").to_owned(),
                name: str_of("name").to_owned(),
                // The input arrives in `input_json_delta` pieces; the start holds `{}`.
                args: match block.get("input") {
                    Some(Value::Object(o)) if !o.is_empty() => Value::Object(o.clone()).to_string(),
                    _ => String::new(),
                },
                signature: None,
            },
            _ => return Ok(()), // thinking and server tool blocks are not replayed
        };
        room_for_part(WIRE, self.parts.len())?;
        self.blocks.push((index, self.parts.len()));
        self.parts.push(part);
        Ok(())
    }

    fn delta(&mut self, event: &Value, on_delta: &mut dyn FnMut(&str)) {
        let Some(delta) = event.get("delta") else {
            return;
        };
        let piece = |field: &str| delta.get(field).and_then(Value::as_str).unwrap_or("");
        match (delta.get("type").and_then(Value::as_str), self.part(event)) {
            (Some("text_delta"), Some(Part::Text(text))) => {
                text.push_str(piece("text"));
                on_delta(piece("text"));
            }
            (Some("input_json_delta"), Some(Part::Tool { args, .. })) => {
                args.push_str(piece("partial_json"));
            }
            _ => {} // thinking, signatures, citations
        }
    }

    fn add_usage(&mut self, usage: Option<&Value>) {
        if let Some(Value::Object(fields)) = usage {
            for (k, v) in fields {
                self.usage.insert(k.clone(), v.clone());
            }
        }
    }
}

/// An `error` event as the error its type's HTTP status would be (the statuses Anthropic
/// documents for each type): overloaded and rate limits are `RateLimited`, `api_error` and
/// timeouts `Transient`, the rest `Fatal`.
fn error(event: &Value, data: &str) -> LlmError {
    let status = match event.pointer("/error/type").and_then(Value::as_str) {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("billing_error") => 402,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("timeout_error") => 504,
        Some("overloaded_error") => 529,
        _ => 500,
    };
    LlmError::from_status(status, None, data.as_bytes())
}

impl Assemble for Messages {
    fn event(&mut self, event: &Event, on_delta: &mut dyn FnMut(&str)) -> Result<(), LlmError> {
        let v = json(WIRE, event)?;
        // The data's `type` names the event (recordings may lack the `event:` line).
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        match kind {
            "message_start" => self.add_usage(v.pointer("/message/usage")),
            "content_block_start" => self.start(&v, on_delta)?,
            "content_block_delta" => self.delta(&v, on_delta),
            "message_delta" => {
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(reason.to_owned());
                }
                self.add_usage(v.get("usage"));
            }
            "message_stop" => self.done = true,
            "error" => return Err(error(&v, &event.data)),
            _ => {} // ping, content_block_stop, future events
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn text(&self) -> String {
        text_of(&self.parts)
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError> {
        if !self.done {
            return Err(cut(WIRE, "message_stop"));
        }
        let stop = stop_reason(self.stop.as_deref());
        let usage = usage(&Value::Object(self.usage));
        Ok(response(self.parts, stop, usage))
    }
}

/// A `stop_reason` as a [`StopReason`].
pub(crate) fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") | Some("stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

/// A `usage` object as [`crate::llm::Usage`]. Anthropic counts the three parts of the input
/// apart: `input_tokens` (after the last breakpoint), `cache_creation_input_tokens` (written
/// to the cache) and `cache_read_input_tokens` (read from it).
pub(crate) fn usage(usage: &Value) -> crate::llm::Usage {
    let tokens = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or(0);
    let written = tokens("cache_creation_input_tokens");
    crate::llm::Usage {
        input: tokens("input_tokens").saturating_add(written),
        output: tokens("output_tokens"),
        cached_input: tokens("cache_read_input_tokens"),
        cache_write: written,
    }
}

/// The Anthropic Messages wire format, as the stream reader reads it.
pub struct Format;

impl WireFormat for Format {
    fn wire(&self) -> Wire {
        Wire::Anthropic
    }

    fn assembly(&self) -> Box<dyn Assemble> {
        Box::<Messages>::default()
    }

    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, LlmError> {
        parse_response(body)
    }
}
