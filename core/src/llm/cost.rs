//! What model calls cost: a model's [`Price`] (with its prompt cache's reads and writes), the
//! tokens one call used ([`Usage`]), and calls added up ([`Tally`]).

use serde::{Deserialize, Serialize};

/// A model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input read from the provider's prompt cache (Anthropic 0.1× input, OpenAI its cached
    /// price, Gemini its context caching price); the input price when not given.
    /// `cached_input` is its former name, still read.
    #[serde(
        default,
        alias = "cached_input",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_read: Option<f64>,
    /// Input written to the prompt cache (Anthropic: 1.25× input with a 5-minute TTL, 2×
    /// with one hour); the input price when not given (OpenAI and Gemini charge no more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    /// Whether every figure is a finite, non-negative number.
    pub fn is_valid(&self) -> bool {
        [
            self.input,
            self.output,
            self.cache_read.unwrap_or(0.0),
            self.cache_write.unwrap_or(0.0),
        ]
        .iter()
        .all(|p| p.is_finite() && *p >= 0.0)
    }
}

/// Which spend cap is nearest, and how much is left under it (see `crate::usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    pub micros: u64,
    /// "your daily", "today's total", "this month's total".
    pub cap: &'static str,
    pub cap_micros: u64,
}

/// Tokens, calls and cost added up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub calls: u64,
    /// Input not read from the prompt cache (what was written to it included).
    pub input: u64,
    pub output: u64,
    /// Input read from the prompt cache.
    pub cached_input: u64,
    /// Millionths of a US dollar.
    pub cost_micros: u64,
}

impl Tally {
    /// One model call's usage and cost.
    pub fn add_call(&mut self, usage: Usage, cost_micros: u64) {
        self.calls += 1;
        self.input = self.input.saturating_add(usage.input);
        self.output = self.output.saturating_add(usage.output);
        self.cached_input = self.cached_input.saturating_add(usage.cached_input);
        self.cost_micros = self.cost_micros.saturating_add(cost_micros);
    }

    /// Adds `other` (another run's spend) to this.
    pub fn add(&mut self, other: Tally) {
        self.calls = self.calls.saturating_add(other.calls);
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cached_input = self.cached_input.saturating_add(other.cached_input);
        self.cost_micros = self.cost_micros.saturating_add(other.cost_micros);
    }

    /// What `self` has beyond `earlier` (a later snapshot of the same turn).
    pub fn since(&self, earlier: &Tally) -> Tally {
        Tally {
            calls: self.calls.saturating_sub(earlier.calls),
            input: self.input.saturating_sub(earlier.input),
            output: self.output.saturating_sub(earlier.output),
            cached_input: self.cached_input.saturating_sub(earlier.cached_input),
            cost_micros: self.cost_micros.saturating_sub(earlier.cost_micros),
        }
    }

    pub fn tokens(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cached_input)
    }

    /// The share of input read from the prompt cache, in whole percent; `None` without input.
    pub fn cache_hit_percent(&self) -> Option<u64> {
        let all = self.input.saturating_add(self.cached_input);
        (all > 0).then(|| (self.cached_input as u128 * 100 / all as u128) as u64)
    }

    pub fn is_empty(&self) -> bool {
        self.calls == 0
    }
}

/// Tokens one model call used, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not read from the prompt cache (those written to it included).
    pub input: u64,
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cached_input: u64,
    /// Of `input`, the tokens written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`), priced at [`Price::cache_write`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// What these tokens cost at `price`, in millionths of a US dollar: input at the input
    /// price, the part of it written to the cache at the write price, cache reads at the
    /// read price, output at the output price.
    pub fn cost_micros(&self, price: &Price) -> u64 {
        let written = self.cache_write.min(self.input);
        let plain = self.input - written;
        let micros = plain as f64 * price.input
            + written as f64 * price.cache_write.unwrap_or(price.input)
            + self.cached_input as f64 * price.cache_read.unwrap_or(price.input)
            + self.output as f64 * price.output;
        // Tokens × dollars per million tokens = millionths of a dollar.
        if micros.is_finite() && micros > 0.0 {
            micros.round().min(u64::MAX as f64) as u64
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests;
