//! How much may be spent: the caps in `limits:` of `main.yaml` (a model's [`Price`] is in
//! `providers.d`).

pub use crate::llm::Price;

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
