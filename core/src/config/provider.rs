//! A provider's file (`providers.d/*.yaml`): its wire format, where it is, which variable
//! holds its key, its prices, and which of its models see images.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Price;
#[cfg(feature = "yaml")]
use super::{err, ConfigError};
use crate::llm::cache::PromptCache;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Anthropic,
    /// OpenAI Chat Completions, and every compatible endpoint (OpenRouter, Groq, Ollama …).
    Openai,
    Gemini,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub id: String,
    pub kind: ProviderKind,
    /// Default base URL; `base_url_env` overrides it when set.
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// Env var holding the key; absent for keyless local servers (Ollama).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Tries per call before falling back to the next model.
    #[serde(default = "default_attempts")]
    pub attempts: u32,
    /// Model name → price, for usage and spend caps.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// `false`: none of this provider's models sees images. Unset: they do, except those
    /// in `no_vision`.
    #[serde(default)]
    pub vision: Option<bool>,
    /// Models of this provider that do not see images.
    #[serde(default)]
    pub no_vision: Vec<String>,
    /// Prompt caching: Anthropic's breakpoints and their TTL, OpenAI's `prompt_cache_key`
    /// (see [`crate::llm::cache`]).
    #[serde(default)]
    pub cache: PromptCache,
}

fn default_timeout() -> u64 {
    120
}
fn default_attempts() -> u32 {
    3
}

impl ProviderConfig {
    /// Whether this provider can be called here: its key is set in `env`, or, for one
    /// without a key (Ollama), the variable of its base URL is (else every chain listing it
    /// would end in a server that is not there).
    pub fn set_up(&self, env: &crate::env::Env) -> bool {
        match (&self.api_key_env, &self.base_url_env) {
            (Some(key), _) => !env.secret(key).is_empty(),
            (None, Some(base)) => env.get(base).is_some_and(|b| !b.trim().is_empty()),
            (None, None) => true,
        }
    }

    /// The variable that sets this provider up: its key's, or (keyless) its base URL's.
    pub fn setting(&self) -> Option<&str> {
        self.api_key_env.as_deref().or(self.base_url_env.as_deref())
    }

    /// Whether `model` of this provider can be sent images.
    pub fn sees_images(&self, model: &str) -> bool {
        self.vision != Some(false) && !self.no_vision.iter().any(|m| m == model)
    }

    /// Checks beyond the file's shape; errors name `path` and the field.
    #[cfg(feature = "yaml")]
    pub(super) fn check(&self, path: &str) -> Result<(), ConfigError> {
        if self.attempts == 0 {
            return Err(err(path, "attempts", "must be at least 1"));
        }
        if let Some((model, _)) = self.prices.iter().find(|(_, price)| !price.is_valid()) {
            return Err(err(
                path,
                format!("prices.{model}"),
                "prices are US dollars per million tokens: numbers of at least 0",
            ));
        }
        if let Some(i) = self.no_vision.iter().position(|m| m.trim().is_empty()) {
            return Err(err(path, format!("no_vision[{i}]"), "model name is empty"));
        }
        if self.vision == Some(false) && !self.no_vision.is_empty() {
            return Err(err(
                path,
                "no_vision",
                "vision is false, so no model of this provider sees images: drop one of the two",
            ));
        }
        Ok(())
    }
}
