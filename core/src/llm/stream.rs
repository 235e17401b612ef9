//! A model's answer streamed as server-sent events ([`super::sse`]), assembled per wire format
//! into the same [`ChatResponse`] the whole-body parsers give, with the text so far for the UI.
//! Each provider gives its [`WireFormat`]: the assembly of its events (beside the provider, in
//! `anthropic/stream.rs`, `openai/stream.rs`, `gemini/stream.rs`), its whole-body parser and
//! where its refusals say when to retry. This module knows no provider.
//!
//! - Anthropic: Messages events (`message_start`, `content_block_start` / `_delta` /
//!   `_stop`, `message_delta`, `message_stop`, `ping`, `error`).
//! - OpenAI: Chat Completions chunks (`choices[0].delta` content and tool-call pieces,
//!   `finish_reason`, the usage chunk of `stream_options.include_usage`, `[DONE]`).
//! - Gemini: Gemini `streamGenerateContent?alt=sse`, each event a whole
//!   `GenerateContentResponse` (`candidates[0].content.parts`, `finishReason`,
//!   `usageMetadata`).
//!
//! A stream that ends before its format says it is complete (`message_stop`; `[DONE]` or a
//! `finish_reason`; a `finishReason`) was cut: [`LlmError::Transient`], as asking again may
//! succeed. An error event maps as the same error would as an HTTP status.

use clawless_platform::HttpStreamResponse;

use super::sse::{Event, SseParser};
use super::{Block, ChatMessage, ChatResponse, LlmError, Role, StopReason, Usage};

/// The most content blocks (texts and tool calls) one streamed answer may have.
pub const MAX_PARTS: usize = 256;

/// The most bytes of an error answer's body read (to quote in the error).
const ERROR_BODY_MAX: usize = 64 * 1024;
/// A whole answer (JSON) read from a server that did not stream.
const WHOLE_BODY_MAX: usize = 8 * 1024 * 1024;

/// Which wire format a stream is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
    Gemini,
}

impl Wire {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
            Wire::Gemini => "gemini",
        }
    }
}

/// What a provider's wire format gives the stream reader.
pub trait WireFormat: Sync {
    /// Which format it is (named in errors).
    fn wire(&self) -> Wire;
    /// A new assembly of its events.
    fn assembly(&self) -> Box<dyn Assemble>;
    /// The answer of a server that sent it whole, as JSON, to a streamed request.
    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, LlmError>;
    /// When to retry, as a refusal's body says it (Gemini's `RetryInfo`); a `retry-after`
    /// header comes first.
    fn retry_delay(&self, _body: &[u8]) -> Option<String> {
        None
    }
}

/// What each wire format's assembly does with events.
pub trait Assemble: Send {
    /// Takes one event; hands the text it adds to `on_delta`.
    fn event(&mut self, event: &Event, on_delta: &mut dyn FnMut(&str)) -> Result<(), LlmError>;
    /// Whether the format's last event has come (nothing more is read).
    fn is_done(&self) -> bool;
    /// The answer's text so far, as [`ChatMessage::text`] will give it.
    fn text(&self) -> String;
    /// The answer, once the stream has ended.
    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError>;
}

/// Bytes of a streamed answer in, text deltas and at the end the [`ChatResponse`] out.
pub struct StreamReader {
    wire: Wire,
    sse: SseParser,
    assembly: Box<dyn Assemble>,
}

impl StreamReader {
    pub fn new(format: &dyn WireFormat) -> Self {
        Self {
            wire: format.wire(),
            sse: SseParser::new(),
            assembly: format.assembly(),
        }
    }

    /// Takes the next bytes of the stream, in any chunking; hands each piece of text they add
    /// to `on_delta`, in order.
    pub fn feed(&mut self, bytes: &[u8], on_delta: &mut dyn FnMut(&str)) -> Result<(), LlmError> {
        let events = self
            .sse
            .feed(bytes)
            .map_err(|e| LlmError::Fatal(format!("{}: {e}", self.wire.name())))?;
        for event in &events {
            if self.assembly.is_done() {
                break;
            }
            self.assembly.event(event, on_delta)?;
        }
        Ok(())
    }

    /// Whether the stream's last event has come: the rest need not be read.
    pub fn is_done(&self) -> bool {
        self.assembly.is_done()
    }

    /// The answer's text so far (what [`ChatMessage::text`] of the answer would be now).
    pub fn text(&self) -> String {
        self.assembly.text()
    }

    /// The stream has ended: the answer, or [`LlmError::Transient`] if it was cut.
    pub fn finish(mut self) -> Result<ChatResponse, LlmError> {
        self.sse.finish();
        self.assembly.finish()
    }
}

/// Reads a streamed answer to its end: a status other than 200 is the error
/// [`LlmError::from_status`] makes of it (the body read up to 64 KB); otherwise the events are
/// assembled, and `on_text` gets the answer's whole text so far each time a piece of the
/// stream made it grow.
pub async fn receive(
    mut resp: HttpStreamResponse,
    format: &dyn WireFormat,
    on_text: &(dyn Fn(&str) + Send + Sync),
) -> Result<ChatResponse, LlmError> {
    if resp.status != 200 {
        let body = resp.read_to_end(ERROR_BODY_MAX).await.unwrap_or_default();
        let retry_after = match resp.header("retry-after") {
            Some(h) => Some(h.to_owned()),
            None => format.retry_delay(&body),
        };
        return Err(LlmError::from_status(
            resp.status,
            retry_after.as_deref(),
            &body,
        ));
    }
    let json = resp
        .header("content-type")
        .is_some_and(|t| t.trim_start().starts_with("application/json"));
    if json {
        // A server that answers a streamed request with the whole answer at once: nothing
        // to show before the finished message, which follows at once.
        let body = resp.read_to_end(WHOLE_BODY_MAX).await?;
        return format.parse_response(&body);
    }
    let mut reader = StreamReader::new(format);
    while !reader.is_done() {
        let Some(piece) = resp.body.next_chunk().await? else {
            break;
        };
        let mut grew = false;
        reader.feed(&piece, &mut |delta| grew |= !delta.is_empty())?;
        if grew {
            on_text(&reader.text());
            // Lets what shows the text run (it shares this task) when pieces are already
            // buffered and reading them would not wait.
            crate::task::yield_now().await;
        }
    }
    reader.finish()
}

/// A part of an answer being assembled.
#[derive(Debug)]
pub(crate) enum Part {
    Text(String),
    /// A tool call; `args` is its input as JSON text, perhaps still in pieces.
    Tool {
        id: String,
        name: String,
        args: String,
        /// Gemini's `thoughtSignature` on the call, sent back with it.
        signature: Option<String>,
    },
}

/// The text parts joined as [`ChatMessage::text`] joins text blocks.
pub(crate) fn text_of(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            Part::Tool { .. } => None,
        })
        .collect();
    texts.join("\n")
}

/// The finished answer. Tool input that is not JSON is passed on as
/// `{"_invalid_arguments": "<text>"}` (a call cut by `max_tokens`), as the OpenAI parser does.
pub(crate) fn response(parts: Vec<Part>, stop: StopReason, usage: Usage) -> ChatResponse {
    let content = parts
        .into_iter()
        .map(|p| match p {
            Part::Text(text) => Block::Text { text },
            Part::Tool {
                id,
                name,
                args,
                signature,
            } => Block::ToolUse {
                id,
                name,
                input: super::tool_input(&args),
                signature,
            },
        })
        .collect();
    ChatResponse {
        message: ChatMessage {
            role: Role::Assistant,
            content,
        },
        stop,
        usage,
        cost_micros: 0,
        model: String::new(),
    }
}

/// An event's data as JSON.
pub(crate) fn json(wire: Wire, event: &Event) -> Result<serde_json::Value, LlmError> {
    serde_json::from_str(&event.data)
        .map_err(|e| LlmError::Fatal(format!("{}: bad event JSON: {e}", wire.name())))
}

/// Refuses a part past [`MAX_PARTS`].
pub(crate) fn room_for_part(wire: Wire, parts: usize) -> Result<(), LlmError> {
    if parts >= MAX_PARTS {
        return Err(LlmError::Fatal(format!(
            "{}: more than {MAX_PARTS} content blocks",
            wire.name()
        )));
    }
    Ok(())
}

/// A stream that ended before its last event.
pub(crate) fn cut(wire: Wire, last: &str) -> LlmError {
    LlmError::Transient(format!("{}: the stream ended before {last}", wire.name()))
}

#[cfg(test)]
mod provider_tests;
#[cfg(test)]
mod tests;
