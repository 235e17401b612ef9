//! What model calls cost and how much may be spent: `prices:` per model in `providers.d`, and
//! the caps in `limits:` of `main.yaml`.

use serde::{Deserialize, Serialize};

/// A model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input read from the provider's prompt cache; the input price when not given.
    #[serde(default)]
    pub cached_input: Option<f64>,
}

impl Price {
    /// Whether every figure is a finite, non-negative number.
    pub fn is_valid(&self) -> bool {
        [self.input, self.output, self.cached_input.unwrap_or(0.0)]
            .iter()
            .all(|p| p.is_finite() && *p >= 0.0)
    }
}

/// Spend caps in US dollars, checked before every model call (`None`: no cap); `limits:` in
/// `main.yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Caps {
    /// Per person per UTC day, on each connector.
    pub daily_usd_per_user: Option<f64>,
    /// Everyone together per UTC day, on each connector.
    pub daily_usd_total: Option<f64>,
    /// Everyone together per calendar month (UTC), on each connector.
    pub monthly_usd_total: Option<f64>,
}

impl Caps {
    pub fn any(&self) -> bool {
        self.daily_usd_per_user.is_some()
            || self.daily_usd_total.is_some()
            || self.monthly_usd_total.is_some()
    }

    pub fn is_valid(&self) -> bool {
        [
            self.daily_usd_per_user,
            self.daily_usd_total,
            self.monthly_usd_total,
        ]
        .iter()
        .flatten()
        .all(|c| c.is_finite() && *c >= 0.0)
    }
}
