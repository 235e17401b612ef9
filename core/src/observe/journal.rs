//! The journal: this instance's events kept in the Kv in batches (`events/<at ms>/<instance>/
//! <n>`, a day), written with its counts after a drain and a scheduled run, so a cockpit
//! attached from elsewhere (`clawless tui --remote`, through `GET /admin/events`) follows
//! the turns of every instance. It reads the bus through a subscription of its own, bounded
//! like any other ([`JOURNAL_CAP`]; what does not fit is dropped and counted).

use std::time::Duration;

use clawless_platform::KvExt;
use serde::{Deserialize, Serialize};

use crate::app::Admin;
use crate::events::Stamped;
use crate::keys;

/// Events the journal may fall behind between two writes: as many as the bus's ring holds.
pub const JOURNAL_CAP: usize = crate::events::SLOTS;
/// Events in one kept batch.
const BATCH: usize = 500;
/// How long a batch is kept.
const KEPT: Duration = Duration::from_secs(86_400);
/// Batches read for one page.
const PAGE_BATCHES: usize = 20;
/// The window a first page starts with.
const FIRST_WINDOW_MS: u64 = 10 * 60_000;

/// A page of kept events, and the cursor to ask for the next one with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    pub events: Vec<Stamped>,
    pub cursor: String,
}

impl Admin<'_> {
    /// Writes the events published since the last call, in batches.
    pub(crate) async fn keep_journal(self) {
        let events = self.app.journal.drain();
        let now = self.app.platform.clock.now_ms();
        for (n, batch) in events.chunks(BATCH).enumerate() {
            let seq = self
                .app
                .journal_seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let key = keys::events(now, &self.app.instance, seq + n as u64);
            if let Err(e) = self
                .app
                .platform
                .kv
                .put_json(&key, &batch, Some(KEPT))
                .await
            {
                tracing::warn!(error = %e, events = batch.len(), "events not kept");
            }
        }
    }

    /// The events kept after `cursor` (a page's `cursor`, as it came in a query string;
    /// none: the last ten minutes), this instance's own written first. The page's cursor is
    /// percent-encoded, ready for the next query string.
    pub async fn event_page(
        self,
        cursor: Option<&str>,
    ) -> Result<EventPage, clawless_platform::PortError> {
        self.keep_journal().await;
        let cursor = cursor.map(|c| {
            percent_encoding::percent_decode_str(c)
                .decode_utf8_lossy()
                .into_owned()
        });
        let after = match cursor {
            Some(c) if c.starts_with(keys::EVENTS) => c,
            _ => {
                let since = self
                    .app
                    .platform
                    .clock
                    .now_ms()
                    .saturating_sub(FIRST_WINDOW_MS);
                keys::events(since, "", 0)
            }
        };
        let kv = &*self.app.platform.kv;
        let batches = kv.list_after(keys::EVENTS, &after, PAGE_BATCHES).await?;
        let next = batches.last().cloned().unwrap_or(after);
        let mut page = EventPage {
            events: Vec::new(),
            cursor: percent_encoding::utf8_percent_encode(
                &next,
                percent_encoding::NON_ALPHANUMERIC,
            )
            .to_string(),
        };
        for key in &batches {
            match kv.get_json::<Vec<Stamped>>(key).await {
                Ok(Some(batch)) => page.events.extend(batch),
                Ok(None) => {}
                Err(e) => tracing::warn!(key, error = %e, "a kept batch of events is unreadable"),
            }
        }
        Ok(page)
    }
}
