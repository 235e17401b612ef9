//! The front: a webhook's acknowledgement on its own, for a shell that runs it apart from the
//! assistant (the Worker's front, `targets/worker/src/front.rs`: a small Worker that answers
//! Telegram and hands the lane to the assistant's Worker through a queue).
//!
//! It does what [`App::handle_webhook`](crate::App::handle_webhook) does before the turn,
//! without the app: the connector and its secret (constant time), the size cap, the update's
//! id and chat, and the job stored in the inbox with the same keys, so the assistant's drain
//! takes it as its own. What the ack alone cannot tell without the app (group chatter the bot
//! is not asked in, a stranger told a moment ago) becomes a job the turn ignores, as it
//! ignores such updates polled or re-delivered: one stored job is the price. Edited messages
//! and update kinds the bot does not handle are still dropped here.
//!
//! It counts what it acknowledged as the app counts it (`clawless_updates_accepted_total`,
//! `clawless_updates_dropped_total{reason}`, `clawless_ack_seconds`) and keeps the counts as
//! an instance of their own in the Kv ([`Front::keep_counts`]), which the assistant's
//! `/metrics` sums with its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use clawless_platform::{Clock, Kv};
use serde::Deserialize;
use serde_json::Value;

use crate::config::InboxConfig;
use crate::env::Env;
use crate::events::metrics::Snapshot;
use crate::events::Event;
use crate::ids::{ConnectorId, Lane};
use crate::inbox::{Inbox, Job};
use crate::ingress::WebhookReply;
use crate::secret::Secret;
use crate::shell::MAX_UPDATE_BYTES;

/// What the front reads of the config [`crate::Config::to_json`] wrote: the connectors'
/// secrets and the inbox's settings; everything else is skipped unread.
#[derive(Deserialize)]
struct Slim {
    connectors: BTreeMap<String, SlimConnector>,
    #[serde(default)]
    inbox: InboxConfig,
}

#[derive(Deserialize)]
struct SlimConnector {
    webhook_secret_env: String,
}

/// The acknowledging half of a webhook.
pub struct Front {
    connectors: BTreeMap<String, (ConnectorId, Secret)>,
    inbox: Inbox,
    /// The name its counts are kept under (`metrics/<instance>`).
    instance: String,
    /// What it counted (with a scratch string for label sets), and what it last kept.
    counts: Mutex<(Snapshot, String)>,
    kept: Mutex<Option<Snapshot>>,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secrets print as redacted (`Secret`'s own Debug).
        f.debug_struct("Front")
            .field("connectors", &self.connectors)
            .finish_non_exhaustive()
    }
}

impl Front {
    /// The front of the config `config_json` (as [`crate::Config::to_json`] wrote it), with
    /// the secrets from `env`, its counts kept as `instance`'s. A connector whose secret is
    /// not set refuses every webhook (401), as the app's does; `Err` names what could not be
    /// read.
    pub fn new(
        config_json: &str,
        env: &Env,
        kv: Arc<dyn Kv>,
        clock: Arc<dyn Clock>,
        instance: String,
    ) -> Result<Front, String> {
        let slim: Slim =
            serde_json::from_str(config_json).map_err(|e| format!("config.json: {e}"))?;
        let connectors = slim
            .connectors
            .into_iter()
            .map(|(id, c)| {
                let secret = env.secret(&c.webhook_secret_env);
                (id.clone(), (ConnectorId::new(id), secret))
            })
            .collect();
        Ok(Front {
            connectors,
            inbox: Inbox {
                kv,
                clock,
                config: slim.inbox,
            },
            instance,
            counts: Mutex::default(),
            kept: Mutex::default(),
        })
    }

    /// The connectors whose webhook secret is not set: their webhooks are refused.
    pub fn unset_secrets(&self) -> Vec<&str> {
        self.connectors
            .iter()
            .filter(|(_, (_, secret))| secret.is_empty())
            .map(|(id, _)| id.as_str())
            .collect()
    }

    /// Checked before the body is read: the connector exists (404) and the secret matches
    /// (401). `Ok` is the connector's id.
    pub fn authorize(
        &self,
        connector: &str,
        secret: Option<&str>,
    ) -> Result<&ConnectorId, WebhookReply> {
        let Some((id, expected)) = self.connectors.get(connector) else {
            return Err(reply(404, "unknown connector"));
        };
        if !expected.matches(secret.unwrap_or("")) {
            return Err(reply(401, "unauthorized"));
        }
        Ok(id)
    }

    /// The webhook: [`Front::authorize`], the cap, then the update stored as a job in its
    /// chat's lane. 200 with the lane when it is new work; 200 without one for a duplicate or
    /// an update the bot does not answer (so Telegram stops sending it); 500 when storage
    /// failed (Telegram sends it again).
    pub async fn ack(&self, connector: &str, secret: Option<&str>, body: &[u8]) -> WebhookReply {
        let id = match self.authorize(connector, secret) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        if body.len() > MAX_UPDATE_BYTES {
            return reply(413, "payload too large");
        }
        let started = self.inbox.clock.now_ms();
        let dropped = |reason: &'static str| {
            self.count(&Event::Dropped {
                connector: connector.into(),
                reason: compact_str::CompactString::const_new(reason),
            });
            reply(200, "ok")
        };
        let Ok(raw) = serde_json::from_slice::<Value>(body) else {
            return dropped("not json");
        };
        let (update_id, chat) = match sort(&raw) {
            Ok(sorted) => sorted,
            Err(reason) => return dropped(reason),
        };
        let lane = Lane::of_chat(id, chat);
        let job = Job::new(id.clone(), update_id, raw, started);
        match self.inbox.accept(&lane, &job).await {
            Ok(true) => {
                self.count(&Event::Accepted {
                    connector: connector.into(),
                    lane: lane.as_str().into(),
                    ack_ms: self.inbox.clock.now_ms().saturating_sub(started),
                });
                WebhookReply {
                    status: 200,
                    body: "ok",
                    lane: Some(lane),
                }
            }
            Ok(false) => dropped("duplicate"),
            Err(e) => {
                tracing::error!(connector, error = %e, "could not store update");
                reply(500, "storage unavailable")
            }
        }
    }
}

impl Front {
    fn count(&self, event: &Event) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let (snapshot, scratch) = &mut *counts;
        snapshot.count_ack(event, scratch);
    }

    /// What it has counted since it started.
    pub fn counts(&self) -> Snapshot {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Keeps its counts in the Kv (`metrics/<instance>`, three days) when they changed since
    /// last kept: for after the response. A failure is logged; the next call tries again.
    pub async fn keep_counts(&self) {
        let kv = &*self.inbox.kv;
        crate::observe::keep_counts(kv, &self.instance, self.counts(), &self.kept).await;
    }
}

fn reply(status: u16, body: &'static str) -> WebhookReply {
    WebhookReply {
        status,
        body,
        lane: None,
    }
}

/// The update's id and chat, or why it is not stored: the same kinds as the app's ack takes
/// (a message with a sender, a button tap on a message that names its chat), the same ids
/// (positive: the others name the bot's own jobs).
pub fn sort(raw: &Value) -> Result<(i64, i64), &'static str> {
    let dropped = Err;
    let Some(update_id) = raw.get("update_id").and_then(Value::as_i64) else {
        return dropped("unreadable");
    };
    if update_id <= 0 {
        return dropped("id not positive");
    }
    let chat_of = |m: &Value| m.get("chat")?.get("id")?.as_i64();
    // The reasons are the app's (`clawless_updates_dropped_total{reason}` is summed over both).
    let chat = if let Some(m) = raw.get("message") {
        if m.get("from").is_none_or(Value::is_null) {
            return dropped("no sender");
        }
        chat_of(m).ok_or("unreadable")
    } else if raw.get("edited_message").is_some() {
        return dropped("edited");
    } else if let Some(q) = raw.get("callback_query") {
        q.get("message")
            .and_then(chat_of)
            .ok_or("button without chat")
    } else {
        return dropped("unhandled type");
    };
    chat.map(|chat| (update_id, chat))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sort_takes_what_the_app_takes() {
        let msg = json!({"update_id": 5, "message": {"message_id": 1, "from": {"id": 7}, "chat": {"id": -9}}});
        assert_eq!(sort(&msg).ok(), Some((5, -9)));
        let tap = json!({"update_id": 6, "callback_query": {"id": "q", "from": {"id": 7}, "message": {"message_id": 1, "chat": {"id": 3}}}});
        assert_eq!(sort(&tap).ok(), Some((6, 3)));
        for dropped in [
            json!({"update_id": 0, "message": {"from": {"id": 7}, "chat": {"id": 1}}}),
            json!({"update_id": -3, "message": {"from": {"id": 7}, "chat": {"id": 1}}}),
            json!({"message": {"from": {"id": 7}, "chat": {"id": 1}}}),
            json!({"update_id": "5", "message": {"from": {"id": 7}, "chat": {"id": 1}}}),
            json!({"update_id": 5, "message": {"chat": {"id": 1}}}),
            json!({"update_id": 5, "message": {"from": null, "chat": {"id": 1}}}),
            json!({"update_id": 5, "message": {"from": {"id": 7}}}),
            json!({"update_id": 5, "message": {"from": {"id": 7}, "chat": {"id": "x"}}}),
            json!({"update_id": 5, "edited_message": {"from": {"id": 7}, "chat": {"id": 1}}}),
            json!({"update_id": 5, "callback_query": {"id": "q", "from": {"id": 7}}}),
            json!({"update_id": 5, "poll": {}}),
            json!([1, 2]),
            json!(null),
        ] {
            assert!(sort(&dropped).is_err(), "{dropped} should be dropped");
        }
    }
}
