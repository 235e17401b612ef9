//! The retrying fallback chain: each model in turn, retrying transient failures with
//! exponential backoff (or the provider's `retry-after`), then the next model. Streamed or
//! not: a streamed attempt that fails after showing text withdraws it (`on_text("")`) before
//! the next attempt starts over.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clawless_platform::Clock;

use super::{ChatRequest, ChatResponse, LlmError, OnText, Provider};

/// One link: a provider and the model name to ask it for.
#[derive(Clone)]
pub struct Link {
    /// `provider/model`, for logs.
    pub label: String,
    pub provider: Arc<dyn Provider>,
    pub model: String,
    /// Tries on this link before moving on (1 = no retry).
    pub attempts: u32,
    /// The model's price (`prices:` of its provider), for usage and caps.
    pub price: Option<super::Price>,
    /// Whether the model sees images (`vision` / `no_vision` of its provider).
    pub vision: bool,
    /// Whether the provider reads PDFs given in a message.
    pub reads_pdf: bool,
}

#[derive(Clone)]
pub struct ModelChain {
    pub links: Vec<Link>,
    pub clock: Arc<dyn Clock>,
    /// First backoff; doubles each retry.
    pub base_backoff: Duration,
    /// A `retry-after` longer than this moves on to the next link instead of waiting.
    pub max_wait: Duration,
}

impl ModelChain {
    /// This chain with the link labelled `label` (`provider/model`) tried first, the others
    /// after it in their order; unchanged when no link has that label.
    pub fn preferring(&self, label: Option<&str>) -> ModelChain {
        let mut chain = self.clone();
        if let Some(at) = label.and_then(|l| chain.links.iter().position(|k| k.label == l)) {
            let link = chain.links.remove(at);
            chain.links.insert(0, link);
        }
        chain
    }

    /// Whether the first model of the chain, the one normally asked, sees images (false for
    /// an empty chain).
    pub fn sees_images(&self) -> bool {
        self.links.first().is_some_and(|l| l.vision)
    }

    /// Calls the chain. `request.model` is replaced by each link's model.
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.call(request, None).await
    }

    /// [`ModelChain::chat`] with each attempt streamed: `on_text` gets the text so far of the
    /// attempt under way. When an attempt that showed text fails, `on_text("")` withdraws it
    /// before the chain retries, falls back or gives up, so the caller never keeps the text of
    /// a failed attempt (each attempt starts over from nothing).
    pub async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_text: OnText<'_>,
    ) -> Result<ChatResponse, LlmError> {
        self.call(request, Some(on_text)).await
    }

    async fn call(
        &self,
        request: &ChatRequest,
        on_text: Option<OnText<'_>>,
    ) -> Result<ChatResponse, LlmError> {
        // Whether the attempt under way has shown text.
        let shown = AtomicBool::new(false);
        let relay = |text: &str| {
            shown.store(!text.is_empty(), Ordering::Relaxed);
            if let Some(on_text) = on_text {
                on_text(text);
            }
        };
        let mut last = LlmError::NotConfigured("the agent's model chain is empty".into());
        for link in &self.links {
            let mut req = request.clone();
            req.model = link.model.clone();
            for attempt in 0..link.attempts.max(1) {
                let answer = match on_text {
                    Some(_) => link.provider.chat_stream(&req, &relay).await,
                    None => link.provider.chat(&req).await,
                };
                if answer.is_err() && shown.swap(false, Ordering::Relaxed) {
                    relay("");
                }
                match answer {
                    Ok(mut resp) => {
                        resp.cost_micros =
                            link.price.as_ref().map_or(0, |p| resp.usage.cost_micros(p));
                        resp.model = link.label.clone();
                        return Ok(resp);
                    }
                    Err(err) => {
                        tracing::warn!(model = %link.label, attempt, error = %err, "model call failed");
                        let wait = match &err {
                            LlmError::RateLimited {
                                retry_after_ms: Some(ms),
                            } => Duration::from_millis(*ms),
                            _ => self.base_backoff * 2u32.saturating_pow(attempt),
                        };
                        let retry = err.is_retryable()
                            && attempt + 1 < link.attempts
                            && wait <= self.max_wait;
                        last = err;
                        if !retry {
                            break;
                        }
                        self.clock.sleep(wait).await;
                    }
                }
            }
        }
        Err(last)
    }
}
