//! Clock port: wall-clock time and sleeping. `Instant::now()` panics on wasm32, so the core
//! asks this port instead.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;

#[async_trait]
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    ///
    /// # Behavior
    /// Never goes backwards between two calls on the same clock.
    fn now_ms(&self) -> u64;

    /// Waits for `duration`.
    ///
    /// # Behavior
    /// After it returns, `now_ms()` is at least the value before plus `duration`.
    async fn sleep(&self, duration: Duration);
}

/// A virtual clock for tests: `sleep` advances time at once instead of waiting.
#[derive(Debug)]
pub struct FakeClock {
    now: AtomicU64,
}

impl FakeClock {
    pub fn new(start_ms: u64) -> Self {
        Self {
            now: AtomicU64::new(start_ms),
        }
    }
    pub fn advance(&self, duration: Duration) {
        self.now
            .fetch_add(duration.as_millis() as u64, Ordering::SeqCst);
    }
}

#[async_trait]
impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
    async fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// Conformance suite for [`Clock`] adapters.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod conformance {
    use super::*;

    pub async fn run(clock: &dyn Clock) {
        let a = clock.now_ms();
        assert!(
            a > 1_600_000_000_000,
            "now_ms must be Unix epoch milliseconds, got {a}"
        );
        clock.sleep(Duration::from_millis(20)).await;
        let b = clock.now_ms();
        assert!(b >= a + 20, "sleep(20ms) must let 20ms pass: {a} -> {b}");
        assert!(clock.now_ms() >= b, "clock went backwards");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fake_clock_conforms() {
        futures::executor::block_on(super::conformance::run(&super::FakeClock::new(
            1_700_000_000_000,
        )));
    }
}
