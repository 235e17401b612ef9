//! The ingress stage: a webhook body (or a polled update) is checked, parsed once, classified
//! and stored in the inbox, or dropped when the turn would ignore it anyway. Everything here
//! is on the ack path: two Kv calls for an update that becomes a job (three from someone
//! outside the configured users: their stranger record is read first).

use clawless_platform::PortError;
use serde_json::Value;

use crate::app::App;
use crate::events::Event;
use crate::ids::Lane;
use crate::inbox::Job;
use crate::shell::{BodyRefused, MAX_UPDATE_BYTES};
use crate::telegram::{Update, UpdateKind};
use crate::turn::decide::{self, Decision};

/// What the webhook answers Telegram, and which lane now has work (the target schedules
/// [`App::drain`] for it after responding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookReply {
    pub status: u16,
    pub body: &'static str,
    pub lane: Option<Lane>,
}

impl WebhookReply {
    fn new(status: u16, body: &'static str) -> Self {
        Self {
            status,
            body,
            lane: None,
        }
    }
}

impl App {
    /// A webhook request, the same on every shell: [`App::authorize_webhook`] before a byte
    /// of the body is read, then `read` (the shell's I/O) reads it capped at
    /// [`MAX_UPDATE_BYTES`], then [`App::handle_webhook`]. The shell answers with the reply and,
    /// after responding, drains its `lane` when there is one.
    pub async fn serve_webhook<F>(
        &self,
        connector: &str,
        secret: Option<&str>,
        read: impl FnOnce(usize) -> F,
    ) -> WebhookReply
    where
        F: std::future::Future<Output = Result<Vec<u8>, BodyRefused>>,
    {
        if let Err(refused) = self.authorize_webhook(connector, secret) {
            return refused;
        }
        let body = match read(MAX_UPDATE_BYTES).await {
            Ok(body) => body,
            Err(why) => {
                tracing::warn!(connector, ?why, "webhook body refused");
                return match why {
                    BodyRefused::TooLarge => WebhookReply::new(413, "payload too large"),
                    BodyRefused::Unreadable => WebhookReply::new(400, "unreadable body"),
                    BodyRefused::TooSlow => WebhookReply::new(408, "request timeout"),
                };
            }
        };
        self.handle_webhook(connector, secret, &body).await
    }

    /// The webhook: [`App::authorize_webhook`], the size cap, then [`App::accept_update`].
    ///
    /// Unknown connector → 404; wrong or missing secret → 401 and nothing else happens; a
    /// body over [`MAX_UPDATE_BYTES`] → 413; an
    /// update we cannot read or do not handle → 200 (so Telegram stops re-sending) and a log
    /// line; a storage failure → 500 so Telegram re-delivers.
    pub async fn handle_webhook(
        &self,
        connector: &str,
        secret: Option<&str>,
        body: &[u8],
    ) -> WebhookReply {
        if let Err(refused) = self.authorize_webhook(connector, secret) {
            return refused;
        }
        if body.len() > MAX_UPDATE_BYTES {
            tracing::warn!(
                connector,
                bytes = body.len(),
                "webhook body over the cap; refused"
            );
            return WebhookReply::new(413, "payload too large");
        }
        match self.accept_update(connector, body).await {
            Ok(lane) => WebhookReply {
                status: 200,
                body: "ok",
                lane,
            },
            Err(e) => {
                tracing::error!(connector, error = %e, "could not store update");
                WebhookReply::new(500, "storage unavailable")
            }
        }
    }

    /// The check a shell makes before it reads a webhook body: the connector exists and the
    /// secret matches (constant time). `Err` is the reply to send at once (404 or 401),
    /// without reading the body.
    pub fn authorize_webhook(
        &self,
        connector: &str,
        secret: Option<&str>,
    ) -> Result<(), WebhookReply> {
        let Some(conn) = self.connectors.get(connector) else {
            return Err(WebhookReply::new(404, "unknown connector"));
        };
        if !conn.secret.matches(secret.unwrap_or("")) {
            tracing::debug!(connector, "webhook refused: wrong or missing secret");
            return Err(WebhookReply::new(401, "unauthorized"));
        }
        Ok(())
    }

    /// Stores an update in the inbox; returns the lane to drain when there is new work. What
    /// happened is published: [`Event::Accepted`] with the time it took, or
    /// [`Event::Dropped`] with why.
    pub async fn accept_update(
        &self,
        connector: &str,
        body: &[u8],
    ) -> Result<Option<Lane>, PortError> {
        let started = self.platform.clock.now_ms();
        let admitted = self.admit(connector, body).await?;
        let now = self.platform.clock.now_ms();
        let event = match &admitted {
            Ok((lane, _)) => Event::Accepted {
                connector: connector.into(),
                lane: lane.as_str().into(),
                ack_ms: now.saturating_sub(started),
            },
            Err(reason) => Event::Dropped {
                connector: connector.into(),
                // Its text is static: kept by reference, not copied.
                reason: compact_str::CompactString::const_new(reason),
            },
        };
        let trace = match &admitted {
            Ok((_, id)) => compact_str::format_compact!("{connector}/{id}"),
            Err(_) => compact_str::CompactString::default(),
        };
        self.events.publish(now, trace, event);
        Ok(admitted.ok().map(|(lane, _)| lane))
    }

    /// [`App::accept_update`]'s work: the lane and update id stored, or why not.
    async fn admit(
        &self,
        connector: &str,
        body: &[u8],
    ) -> Result<Result<(Lane, i64), &'static str>, PortError> {
        let Some(conn) = self.connectors.get(connector) else {
            return Ok(Err("unknown connector"));
        };
        let raw: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(connector, error = %e, "update is not JSON; dropped");
                return Ok(Err("not json"));
            }
        };
        let update = match Update::from_value(&raw) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(connector, error = %e, "update unreadable; dropped");
                return Ok(Err("unreadable"));
            }
        };
        if update.id <= 0 {
            // Telegram's ids are positive; the others name the bot's own jobs (a reminder's
            // firing), which no webhook may pre-empt.
            tracing::warn!(
                connector,
                update_id = update.id,
                "update id not positive; dropped"
            );
            return Ok(Err("id not positive"));
        }
        let msg = match &update.kind {
            UpdateKind::Message(m) => m,
            UpdateKind::CallbackQuery(q) => {
                // A button tap goes to its chat's lane, whoever tapped: the turn waiting
                // there answers it (an alert when it is not theirs to answer).
                let Some(chat) = q.message.as_ref().map(|m| m.chat.id.0) else {
                    tracing::info!(%connector, update_id = update.id, "button on a message too old to name its chat; dropped");
                    return Ok(Err("button without chat"));
                };
                return self
                    .enqueue(conn, Lane::of_chat(&conn.id, chat), update.id, raw)
                    .await;
            }
            UpdateKind::EditedMessage(_) => {
                tracing::info!(
                    connector,
                    update_id = update.id,
                    "edited message: not answered again"
                );
                return Ok(Err("edited"));
            }
            UpdateKind::Unknown(_) => {
                tracing::info!(
                    connector,
                    update_id = update.id,
                    "unhandled update type; dropped"
                );
                return Ok(Err("unhandled type"));
            }
        };
        let Some(from) = &msg.from else {
            tracing::info!(
                connector,
                update_id = update.id,
                "message without sender; dropped"
            );
            return Ok(Err("no sender"));
        };
        // What the turn would ignore (group chatter, bots, channels) costs no job when it can
        // be told here: always in private chats, in groups once the bot knows who it is.
        let me = conn.cached_identity();
        if !decide::needs_identity(msg) || me.is_some() {
            let gate = decide::Gate::of(conn, self.config.limits.max_input_chars);
            if let Decision::Ignore(why) = decide::decide(msg, me.as_ref(), &gate) {
                tracing::debug!(connector, update_id = update.id, why, "dropped at the ack");
                return Ok(Err(why));
            }
        }
        if !conn.allowed.contains(&from.id.0) && self.pairings().quiet(&conn.id, from.id.0).await? {
            return Ok(Err("stranger told already")); // their code, a moment ago
        }
        let lane = Lane::of_chat(&conn.id, msg.chat.id.0);
        self.enqueue(conn, lane, update.id, raw).await
    }

    /// Stores the update as a job in `lane`; `Err("duplicate")` when it was already accepted.
    async fn enqueue(
        &self,
        conn: &crate::connector::Connector,
        lane: Lane,
        update_id: i64,
        raw: Value,
    ) -> Result<Result<(Lane, i64), &'static str>, PortError> {
        let now = self.platform.clock.now_ms();
        let job = Job::new(conn.id.clone(), update_id, raw, now);
        if !self.inbox.accept(&lane, &job).await? {
            tracing::info!(connector = %conn.id, update_id, "duplicate delivery dropped");
            return Ok(Err("duplicate"));
        }
        Ok(Ok((lane, update_id)))
    }
}
