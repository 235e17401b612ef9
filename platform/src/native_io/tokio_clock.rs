//! The Clock port over the system clock and tokio timers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{async_trait, Clock};

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await
    }
}
