//! A reply shown while it is written: the model's text so far goes to the chat as a draft
//! (`sendMessageDraft`, private chats), the first at once and then at most one every
//! `streaming.draft_every_ms`. The draft is a preview only: the finished answer is still
//! checkpointed and sent as a message, which exactly-once applies to; a crash mid-stream
//! leaves a draft that Telegram drops, and the retry sends the answer once.

use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::StreamExt;

use crate::app::App;
use crate::connector::Connector;
use crate::telegram::api::Target;

/// The text a streamed model call has written so far, and a wake-up for the draft loop.
pub(super) struct Drafts {
    latest: Arc<Mutex<String>>,
    changed: mpsc::UnboundedSender<()>,
    wakes: Mutex<Option<mpsc::UnboundedReceiver<()>>>,
}

impl Drafts {
    pub(super) fn new() -> Drafts {
        let (changed, wakes) = mpsc::unbounded();
        Drafts {
            latest: Arc::default(),
            changed,
            wakes: Mutex::new(Some(wakes)),
        }
    }

    /// What the model call under way has written so far (empty: withdrawn, a retry starts).
    pub(super) fn set(&self, text: &str) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest.clear();
        latest.push_str(text);
        // The loop may be gone (the turn ended): nothing to wake then.
        let _ = self.changed.unbounded_send(());
    }
}

impl App {
    /// What runs beside an agent turn until it ends: "typing…", and the drafts when the
    /// reply streams.
    pub(super) async fn beside_turn(
        &self,
        conn: &Connector,
        target: Target,
        message_id: i64,
        drafts: Option<&Drafts>,
    ) -> std::convert::Infallible {
        let Some(d) = drafts else {
            return self.keep_typing(conn, target).await;
        };
        let draft_id = message_id.max(1);
        let (never, _) = futures::future::select(
            pin!(self.keep_typing(conn, target)),
            pin!(self.show_drafts(conn, target, draft_id, d)),
        )
        .await
        .factor_first();
        never
    }

    /// Sends the drafts of `drafts` to `target` until dropped. Failures are only logged: the
    /// finished message does not depend on them.
    pub(super) async fn show_drafts(
        &self,
        conn: &Connector,
        target: Target,
        draft_id: i64,
        drafts: &Drafts,
    ) -> std::convert::Infallible {
        let taken = drafts
            .wakes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let every = Duration::from_millis(self.config.streaming.draft_every_ms);
        if let Some(mut wakes) = taken {
            let mut shown = String::new();
            while wakes.next().await.is_some() {
                // Whatever else changed meanwhile is in `latest` already.
                while let Ok(()) = wakes.try_recv() {}
                let text = drafts
                    .latest
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if text == shown {
                    continue;
                }
                if let Err(e) = conn.bot.send_draft(target, draft_id, &text).await {
                    tracing::debug!(error = %e, "sendMessageDraft failed");
                }
                shown = text;
                self.platform.clock.sleep(every).await;
            }
        }
        futures::future::pending().await
    }
}
