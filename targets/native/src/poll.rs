//! Long polling: `getUpdates` in a loop, each update through the same accept path as the
//! webhook. The next offset is kept in Kv so a restart does not fetch old updates again
//! (and the inbox drops any it already has).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clawless_core::telegram::TelegramError;
use clawless_core::App;
use clawless_platform::KvExt;

use crate::runner::Kicker;

/// Refuses to poll while a webhook is set (Telegram would answer 409 forever).
pub async fn check_no_webhook(app: &App, connector: &str) -> Result<()> {
    let Some(conn) = app.connectors.get(connector) else {
        bail!("no connector {connector}")
    };
    let info = conn
        .bot
        .get_webhook_info()
        .await
        .map_err(|e| anyhow::anyhow!("getWebhookInfo: {e}"))?;
    if let Some(url) = info
        .get("url")
        .and_then(|u| u.as_str())
        .filter(|u| !u.is_empty())
    {
        bail!("a webhook is set for this bot ({url}); run `clawless webhook delete` to use long polling, or `clawless serve`");
    }
    Ok(())
}

pub async fn run(
    app: Arc<App>,
    connector: String,
    kicker: Kicker,
    stop: impl std::future::Future<Output = ()>,
) {
    let Some(conn) = app.connectors.get(&connector) else {
        return;
    };
    let offset_key = format!("poll/{connector}/offset");
    let mut offset: i64 = app
        .platform
        .kv
        .get_json(&offset_key)
        .await
        .ok()
        .flatten()
        .unwrap_or(0);
    tokio::pin!(stop);
    loop {
        let batch = tokio::select! {
            _ = &mut stop => return,
            r = conn.bot.get_updates(offset, 25) => r,
        };
        let updates = match batch {
            Ok(u) => u,
            Err(TelegramError::RetryAfter(s)) => {
                tokio::time::sleep(Duration::from_secs(s)).await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "getUpdates failed; retrying in 5s");
                tokio::time::sleep(Duration::from_secs(5)).await;
                continue;
            }
        };
        for u in updates {
            let id = u
                .get("update_id")
                .and_then(|v| v.as_i64())
                .unwrap_or(offset);
            match app
                .accept_update(&connector, u.to_string().as_bytes())
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
            offset = offset.max(id + 1);
            if let Err(e) = app.platform.kv.put_json(&offset_key, &offset, None).await {
                tracing::warn!(error = %e, "could not save poll offset");
            }
        }
    }
}
