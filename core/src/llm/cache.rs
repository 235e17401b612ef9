//! Prompt caching: what a provider is told so that the prefix its requests share is read from
//! its cache instead of paid again in full.
//!
//! A conversation's requests begin alike: the tools (in name order, MCP tools among them),
//! the system prompt (with the skills offered), the history. Nothing that changes from one
//! request to the next stands in that prefix: what does ([`super::ChatRequest::context`], the
//! memories recalled for the turn) comes last, after the newest message, so the bytes before it
//! are the bytes the next request starts with.
//!
//! - Anthropic caches only where a request marks it (`cache_control`): the end of the system
//!   prompt (with the tools before it) and the newest two user messages, at most four marks
//!   (see `anthropic.rs`). A hit reads at a tenth of the input price, a write costs 1.25× it
//!   (2× with the one-hour [`Ttl`]).
//! - OpenAI caches every prefix of 1,024 tokens and more by itself; `prompt_cache_key` (a
//!   keyed hash of the conversation, never its ids: [`conversation_key`]) keeps a
//!   conversation's requests on the same cache. Only OpenAI takes it: a provider file says so.
//! - Gemini caches prefixes by itself (implicit caching).
//!
//! A model or gateway that refuses a field answers 400 naming it: the call is made again
//! without it, the log says so once, and the provider is not sent it again ([`Refusable`]).

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::LlmError;

/// How long Anthropic keeps a cached prefix after its last use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ttl {
    /// Five minutes: writes cost 1.25× input.
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// An hour, for conversations whose turns come rarely (scheduled tasks): writes cost 2×.
    #[serde(rename = "1h")]
    OneHour,
}

/// A provider file's `cache:` (see `providers.d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromptCache {
    /// Anthropic: mark the stable prefix and the newest turn with `cache_control`; `false`
    /// for a model or gateway that refuses it.
    pub breakpoints: bool,
    /// Anthropic: how long a cached prefix is kept.
    pub ttl: Ttl,
    /// OpenAI-compatible: send `prompt_cache_key` (OpenAI takes it; servers that refuse
    /// fields they do not know would fail every call).
    pub key: bool,
}

impl Default for PromptCache {
    fn default() -> Self {
        Self {
            breakpoints: true,
            ttl: Ttl::FiveMinutes,
            key: false,
        }
    }
}

/// Anthropic's `cache_control` for `ttl`: the default TTL is not spelled out.
pub fn control(ttl: Ttl) -> serde_json::Value {
    match ttl {
        Ttl::FiveMinutes => serde_json::json!({"type": "ephemeral"}),
        Ttl::OneHour => serde_json::json!({"type": "ephemeral", "ttl": "1h"}),
    }
}

/// `prompt_cache_key` of `conversation`: 32 hex digits of an HMAC under the provider's key,
/// stable for the conversation, and no chat or person id anyone without the key could find
/// back by trying them.
pub fn conversation_key(secret: &str, conversation: &str) -> String {
    let mac = crate::signing::mac(
        secret.as_bytes(),
        &[b"prompt_cache_key", conversation.as_bytes()],
    );
    crate::signing::hex(&mac[..16])
}

/// A cache setting a provider gets until it refuses it (an HTTP 400 or 422 whose body names
/// the field): then never again in this process.
#[derive(Debug, Default)]
pub struct Refusable<T> {
    setting: Option<T>,
    refused: AtomicBool,
}

impl<T: Copy> Refusable<T> {
    pub fn new(setting: Option<T>) -> Self {
        Self {
            setting,
            refused: AtomicBool::new(false),
        }
    }

    /// The setting, unless it was refused.
    pub fn get(&self) -> Option<T> {
        self.setting
            .filter(|_| !self.refused.load(Ordering::Relaxed))
    }

    /// Whether `error` is `provider` refusing `field`: then it is given up (and the log says
    /// so, the first time), and the caller asks again without it.
    pub fn refused_by(&self, error: &LlmError, provider: &str, field: &str) -> bool {
        let LlmError::Fatal(message) = error else {
            return false;
        };
        let refusal = (message.starts_with("HTTP 400") || message.starts_with("HTTP 422"))
            && message.contains(field);
        if refusal && !self.refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                provider,
                field,
                "the provider refused {field}: asking again without it, and not sending it again (set cache: in its providers.d file to stop trying)"
            );
        }
        refusal
    }
}

#[cfg(test)]
mod tests;
