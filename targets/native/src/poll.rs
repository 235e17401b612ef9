//! Long polling: `getUpdates` in a loop, each update through the same accept path as the
//! webhook. The next offset is kept in memory and saved to Kv after each batch, so a restart
//! does not fetch old updates again (and the inbox drops any it already has).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clawless_core::admin::AdminError;
use clawless_core::telegram::TelegramError;
use clawless_core::{App, ConnectorId};

use crate::runner::Kicker;

/// Refuses to poll while a webhook is set (Telegram would answer 409 forever).
pub async fn check_no_webhook(app: &App, connector: &ConnectorId) -> Result<()> {
    if let Some(url) = app.admin().webhook_url(connector).await? {
        bail!("a webhook is set for this bot ({url}); run `clawless webhook delete` to use long polling, or `clawless serve`");
    }
    Ok(())
}

pub async fn run(
    app: Arc<App>,
    connector: ConnectorId,
    kicker: Kicker,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    // Read once; then kept here, and saved after each batch (not read before every poll).
    let mut offset = app.admin().poll_offset(&connector).await;
    loop {
        let batch = tokio::select! {
            _ = &mut stop => return,
            r = app.admin().poll_updates(&connector, offset, 25) => r,
        };
        let updates = match batch {
            Ok(u) => u,
            Err(AdminError::Telegram(TelegramError::RetryAfter(s))) => {
                tokio::time::sleep(Duration::from_secs(s)).await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "getUpdates failed; retrying in 5s");
                tokio::time::sleep(Duration::from_secs(5)).await;
                continue;
            }
        };
        let before = offset;
        for (update, next) in updates {
            match app
                .accept_update(connector.as_str(), update.to_string().as_bytes())
                .await
            {
                Ok(Some(lane)) => kicker.kick(lane),
                Ok(None) => {}
                Err(e) => {
                    // Not acknowledged: Telegram hands it out again on the next call.
                    tracing::error!(error = %e, "could not store update; will fetch it again");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    break;
                }
            }
            offset = next;
        }
        // Saved beside the next poll's wait, not before it: a restart before the save
        // fetches the batch again, and the inbox drops what it already has.
        if offset != before {
            let (app, connector) = (app.clone(), connector.clone());
            tokio::spawn(async move {
                if let Err(e) = app.admin().save_poll_offset(&connector, offset).await {
                    tracing::warn!(error = %e, "could not save poll offset");
                }
            });
        }
    }
}
