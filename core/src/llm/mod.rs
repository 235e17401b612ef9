//! Language models: one message model for every provider, the `Provider` trait, and the
//! retrying fallback chain an agent calls.
//!
//! - [`anthropic`]: Anthropic Messages (native `tool_use`).
//! - [`openai`]: OpenAI Chat Completions (`tools` / `tool_calls`), for any compatible endpoint.
//! - [`gemini`]: Google Gemini `generateContent` (native function calling, thought signatures).
//! - [`chain`]: retries with backoff honouring `retry-after`, then falls back model by model.
//! - [`sse`]: server-sent events parsed incrementally; [`stream`]: a streamed answer of each
//!   wire format (Anthropic, OpenAI, Gemini) assembled into the same [`ChatResponse`].

pub mod anthropic;
pub mod cache;
pub mod chain;
mod cost;
pub mod gemini;
pub mod openai;
mod refusal;
pub mod sse;
pub mod stream;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use chain::ModelChain;
pub use cost::{Left, Price, Tally, Usage};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
        /// An opaque token the provider asked to get back with this call, exactly as it was
        /// sent (Gemini's `thoughtSignature`); `None` from every other provider.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
    /// An image the user sent, for a model with vision: `media_type` (`image/jpeg`,
    /// `image/png`, `image/webp`, `image/gif`) and the bytes in standard base64. Kept only for
    /// the turn it arrived in: history and a waiting turn's state keep [`Block::placeholder`].
    Image {
        media_type: String,
        data: String,
    },
    /// A document the provider reads itself (PDF): its type, the bytes in standard base64 and
    /// the file's name. Kept only for its turn, like an image.
    Document {
        media_type: String,
        data: String,
        name: String,
    },
}

impl Block {
    /// What a media block leaves behind once its turn is over (history, a waiting turn): a
    /// line saying it was there. Other blocks are kept as they are.
    pub fn placeholder(&self) -> Block {
        match self {
            Block::Image { .. } => Block::Text {
                text: "[An image was attached here.]".into(),
            },
            Block::Document { name, .. } => Block::Text {
                text: format!("[The document {name:?} was attached here.]"),
            },
            other => other.clone(),
        }
    }

    /// Whether this is an image or a document.
    pub fn is_media(&self) -> bool {
        matches!(self, Block::Image { .. } | Block::Document { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: Vec<Block>,
}

impl ChatMessage {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![Block::Text { text: text.into() }],
        }
    }
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![Block::Text { text: text.into() }],
        }
    }
    /// The text blocks joined.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse {
                id, name, input, ..
            } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }
    /// This message with its media replaced by [`Block::placeholder`].
    pub fn without_media(&self) -> ChatMessage {
        ChatMessage {
            role: self.role,
            content: self.content.iter().map(Block::placeholder).collect(),
        }
    }
    pub fn has_tool_results(&self) -> bool {
        self.content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. }))
    }
}

/// A tool as the model sees it: a name, what it does, and a JSON Schema for its input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    /// The instructions, the same for each request of an agent in a conversation: with the
    /// tools, the prefix the provider's prompt cache keeps (see [`cache`]).
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// Shared: an agent builds its tools' specs once and every request refers to them.
    pub tools: std::sync::Arc<[ToolSpec]>,
    pub max_tokens: u32,
    /// What changes from one request to the next (the memories recalled for the turn): sent
    /// last, after the newest message and every cache breakpoint; empty: nothing.
    pub context: String,
    /// The conversation the request belongs to (its memory scope): a provider that keeps a
    /// conversation's requests on one cache gets a keyed hash of it
    /// ([`cache::conversation_key`]); empty: none.
    pub conversation: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Other,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub message: ChatMessage,
    pub stop: StopReason,
    pub usage: Usage,
    /// Millionths of a US dollar, at the answering model's price (0 without one); set by
    /// [`ModelChain`].
    pub cost_micros: u64,
    /// `provider/model` of the link that answered; set by [`ModelChain`].
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// 429 or 529: slow down; wait `retry_after_ms` when the provider said how long.
    #[error("rate limited")]
    RateLimited { retry_after_ms: Option<u64> },
    /// 5xx, timeouts, connection failures.
    #[error("transient: {0}")]
    Transient(String),
    /// 4xx other than 429, or a response we cannot read: retrying the same call won't help.
    #[error("failed: {0}")]
    Fatal(String),
    /// The provider refused the API key: 401, 403, or its own way of saying so (Gemini's 400
    /// `API_KEY_INVALID`, see `refusal.rs`). Only the status is kept, never the body. The
    /// owner must set a valid key; retrying won't help.
    #[error("the API key was refused (HTTP {status})")]
    KeyRefused { status: u16 },
    /// No model of the chain has a key configured.
    #[error("no provider configured: {0}")]
    NotConfigured(String),
}

impl LlmError {
    /// The kind, as the audit trail names it.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::RateLimited { .. } => "rate limited",
            LlmError::Transient(_) => "transient",
            LlmError::Fatal(_) => "failed",
            LlmError::KeyRefused { .. } => "key refused",
            LlmError::NotConfigured(_) => "not configured",
        }
    }

    /// What the user is told when this error ends a turn: which provider and what kind of
    /// failure, in a sentence, never the provider's raw error body.
    pub fn for_user(&self, provider: Option<&str>) -> String {
        let who = match provider {
            Some(p) => format!("the model provider ({p})"),
            None => "the model provider".to_owned(),
        };
        let status = match self {
            LlmError::Fatal(m) | LlmError::Transient(m) => http_status(m),
            _ => None,
        };
        match (self, status) {
            (LlmError::RateLimited { .. }, _) => {
                format!("{who} is rate limiting me. Please try again in a minute.")
            }
            (LlmError::Transient(_), Some(s)) => format!(
                "{who} is having trouble (HTTP {s}). Please try again in a while."
            ),
            (LlmError::Transient(_), None) => format!(
                "{who} could not be reached or did not answer in time. Please try again in a while."
            ),
            (LlmError::KeyRefused { .. }, _) => format!(
                "{who} refused my API key. The bot's owner needs to set a valid one."
            ),
            (LlmError::Fatal(_), Some(s)) => {
                format!("{who} refused the request (HTTP {s}).")
            }
            (LlmError::Fatal(_), None) => {
                format!("{who} sent an answer I could not read. Please try again in a while.")
            }
            (LlmError::NotConfigured(_), _) => {
                "no language model is configured for me yet. The bot's owner needs to add an API key.".to_owned()
            }
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, LlmError::RateLimited { .. } | LlmError::Transient(_))
    }

    /// Maps an HTTP status and body to an error (for non-2xx answers): the one place where a
    /// provider's answer becomes a kind, a refused key included (`refusal.rs`).
    pub fn from_status(status: u16, retry_after: Option<&str>, body: &[u8]) -> LlmError {
        if refusal::key_refused(status, body) {
            return LlmError::KeyRefused { status };
        }
        let snippet: String = String::from_utf8_lossy(body).chars().take(300).collect();
        match status {
            429 | 529 => LlmError::RateLimited {
                retry_after_ms: retry_after.and_then(parse_retry_after),
            },
            408 | 500..=599 => LlmError::Transient(format!("HTTP {status}: {snippet}")),
            _ => LlmError::Fatal(format!("HTTP {status}: {snippet}")),
        }
    }
}

impl From<clawless_platform::PortError> for LlmError {
    fn from(e: clawless_platform::PortError) -> Self {
        if e.is_transient() {
            LlmError::Transient(e.to_string())
        } else {
            LlmError::Fatal(e.to_string())
        }
    }
}

/// A call's `arguments` (JSON text, from a whole answer or a stream's pieces) as its input:
/// `{}` when empty, `{"_invalid_arguments": "<text>"}` when not JSON (a call cut by
/// `max_tokens`).
pub(crate) fn tool_input(args: &str) -> Value {
    serde_json::from_str(if args.trim().is_empty() { "{}" } else { args })
        .unwrap_or_else(|_| serde_json::json!({"_invalid_arguments": args}))
}

/// The status of an error made by [`LlmError::from_status`] (`HTTP 401: …`).
fn http_status(message: &str) -> Option<u16> {
    message.strip_prefix("HTTP ")?.get(..3)?.parse().ok()
}

/// `retry-after` in seconds (possibly fractional); HTTP dates are not honoured.
pub fn parse_retry_after(v: &str) -> Option<u64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| (s * 1000.0) as u64)
}

/// What a streamed model call tells its caller as the answer comes: the answer's whole text so
/// far (not the new piece), each time it has grown. `""` withdraws the text shown: the attempt
/// that produced it failed ([`ModelChain::chat_stream`] then tries again or gives up).
pub type OnText<'a> = &'a (dyn Fn(&str) + Send + Sync);

#[async_trait]
pub trait Provider: Send + Sync {
    /// One model call. Never retries: [`ModelChain`] does.
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// One model call whose answer is streamed: `on_text` gets the text so far (see
    /// [`OnText`]) while it comes; the result is what [`Provider::chat`] would return. Never
    /// retries. This default makes the call with `chat` and shows nothing: the finished
    /// message follows at once, and a draft of the whole text would only cost a Bot API call.
    async fn chat_stream(
        &self,
        request: &ChatRequest,
        _on_text: OnText<'_>,
    ) -> Result<ChatResponse, LlmError> {
        self.chat(request).await
    }

    /// Whether the provider takes this key, by its cheapest call (listing models, which
    /// costs no tokens): `Err` as [`Provider::chat`] would fail (a rejected key is
    /// [`LlmError::KeyRefused`]). `clawless doctor` and `init` ask. This
    /// default is for in-process doubles, which have no key.
    async fn check_key(&self) -> Result<(), LlmError> {
        Ok(())
    }
}

/// A provider's key check ([`Provider::check_key`]): `GET url` with `headers`, any 200 passes.
pub(crate) async fn check_key_at(
    http: &dyn clawless_platform::Http,
    mut req: clawless_platform::HttpRequest,
) -> Result<(), LlmError> {
    req.timeout = req.timeout.min(std::time::Duration::from_secs(15));
    let resp = http.send(req).await?;
    if resp.status == 200 {
        return Ok(());
    }
    Err(LlmError::from_status(
        resp.status,
        resp.header("retry-after"),
        &resp.body,
    ))
}
