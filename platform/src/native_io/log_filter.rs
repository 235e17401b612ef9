//! The log filter both OS shells build from `RUST_LOG` (the shell reads the variable).
//!
//! `tracing_subscriber`'s `Targets`, not its `EnvFilter`: a level, or levels per target
//! (`warn,native=debug`), without span or field filters, so the binary carries no regex
//! engine (about 230 KB of the native binary).

use tracing_subscriber::filter::{LevelFilter, Targets};

/// The filter `spec` names; `info` when it is unset or blank. A spec that cannot be read is
/// refused with why, so the shell can say so and fall back to `info`.
pub fn log_filter(spec: Option<&str>) -> Result<Targets, String> {
    match spec.map(str::trim) {
        None | Some("") => Ok(Targets::new().with_default(LevelFilter::INFO)),
        Some(s) => s
            .parse::<Targets>()
            .map_err(|e| format!("RUST_LOG {s:?} is not a level or target=level list ({e})")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn levels_per_target_are_read_and_unset_is_info() {
        let info = log_filter(None).unwrap();
        assert!(info.would_enable("native", &LevelFilter::INFO.into_level().unwrap()));
        assert!(!info.would_enable("native", &LevelFilter::DEBUG.into_level().unwrap()));
        let mixed = log_filter(Some("warn,native=debug")).unwrap();
        assert!(mixed.would_enable("native::poll", &LevelFilter::DEBUG.into_level().unwrap()));
        assert!(!mixed.would_enable("clawless_core", &LevelFilter::INFO.into_level().unwrap()));
        assert!(log_filter(Some("warn"))
            .unwrap()
            .would_enable("x", &LevelFilter::WARN.into_level().unwrap()));
        assert!(log_filter(Some("native=loud")).is_err());
    }
}
