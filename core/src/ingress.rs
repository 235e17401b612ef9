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

impl App {
    /// An incoming webhook (`POST /hooks/<name>`, see [`crate::hooks`]), the same on every
    /// shell: the hook, its secret (constant time) and the body's type are checked before
    /// `read` reads the body capped at [`crate::hooks::MAX_HOOK_BYTES`]; then the rate, and the
    /// delivery is stored as a job in its chat's lane. 202 when it is in the inbox (a repeated
    /// `Idempotency-Key` too, delivered once), 401, 404, 413, 415, 400 (a body that does not
    /// read as its type says, a bad key), 429 past the hook's `per_minute`, 500 when storage
    /// failed (the sender should retry). The shell drains the reply's lane after responding.
    pub async fn serve_hook<F>(
        &self,
        req: crate::hooks::HookRequest<'_>,
        read: impl FnOnce(usize) -> F,
    ) -> WebhookReply
    where
        F: std::future::Future<Output = Result<Vec<u8>, BodyRefused>>,
    {
        let Some(hook) = self.hooks.get(req.name) else {
            self.hook_event("-", "unknown");
            return WebhookReply::new(404, "unknown hook");
        };
        let name = hook.config.name.as_str();
        let token = crate::hooks::bearer(req.authorization).unwrap_or("");
        if !hook.secret.matches(token) {
            tracing::debug!(hook = name, "hook refused: wrong or missing secret");
            self.hook_event(name, "unauthorized");
            return WebhookReply::new(401, "unauthorized");
        }
        let Some(kind) = crate::hooks::BodyKind::of(req.content_type) else {
            self.hook_event(name, "unsupported_type");
            return WebhookReply::new(415, "send JSON, text or a form");
        };
        if req
            .idempotency_key
            .is_some_and(|k| !crate::hooks::key_ok(k))
        {
            self.hook_event(name, "bad_request");
            return WebhookReply::new(400, "Idempotency-Key: 1 to 255 visible characters");
        }
        let body = match read(crate::hooks::MAX_HOOK_BYTES).await {
            Ok(body) => body,
            Err(why) => {
                tracing::warn!(hook = name, ?why, "hook body refused");
                let (status, result, text) = match why {
                    BodyRefused::TooLarge => (413, "too_large", "payload too large"),
                    BodyRefused::Unreadable => (400, "bad_request", "unreadable body"),
                    BodyRefused::TooSlow => (408, "bad_request", "request timeout"),
                };
                self.hook_event(name, result);
                return WebhookReply::new(status, text);
            }
        };
        if body.len() > crate::hooks::MAX_HOOK_BYTES {
            self.hook_event(name, "too_large");
            return WebhookReply::new(413, "payload too large");
        }
        let payload = match kind.read(&body) {
            Ok(p) => p,
            Err(why) => {
                self.hook_event(name, "bad_request");
                return WebhookReply::new(400, why);
            }
        };
        match self.deliver_hook(hook, &req, &payload, &body).await {
            Ok((result, lane)) => {
                if result != "delivered" {
                    self.hook_event(name, result);
                }
                match result {
                    "rate_limited" => WebhookReply::new(429, "too many deliveries this minute"),
                    "duplicate" => WebhookReply::new(202, "accepted before"),
                    _ => WebhookReply {
                        status: 202,
                        body: "accepted",
                        lane,
                    },
                }
            }
            Err(e) => {
                tracing::error!(hook = name, error = %e, "could not store a hook's delivery");
                self.hook_event(name, "storage_error");
                WebhookReply::new(500, "storage unavailable")
            }
        }
    }

    /// The rate counted, then the delivery stored in its chat's lane: its result and the
    /// lane when it is new.
    async fn deliver_hook(
        &self,
        hook: &crate::hooks::Hook,
        req: &crate::hooks::HookRequest<'_>,
        payload: &crate::hooks::Payload,
        body: &[u8],
    ) -> Result<(&'static str, Option<Lane>), PortError> {
        let now = self.platform.clock.now_ms();
        let kv = &*self.platform.kv;
        let c = &hook.config;
        if !crate::hooks::within_rate(kv, &c.name, c.per_minute, now).await? {
            return Ok(("rate_limited", None));
        }
        let Some(conn) = self.connectors.get(&hook.connector) else {
            return Ok(("unknown", None));
        };
        let update_id = crate::hooks::update_id(&c.name, req.idempotency_key, now, body);
        let text = crate::template::render(c.template(), payload);
        let user = match c.chat {
            chat if chat > 0 => chat,
            _ => conn.owner.unwrap_or(0),
        };
        let origin = crate::schedule::Origin {
            connector: conn.id.clone(),
            chat: c.chat,
            chat_type: crate::hooks::chat_type(c.chat).into(),
            thread: None,
            user,
            user_name: String::new(),
        };
        let fire = crate::schedule::Fire {
            reminder: 0,
            at_ms: now,
            what: crate::schedule::What::Hook {
                hook: c.name.clone(),
                turn: c.mode == crate::config::HookMode::Turn,
                text,
            },
        };
        let job = Job::of_firing(&conn.id, update_id, &origin, fire, now);
        let lane = Lane::of_chat(&conn.id, c.chat);
        if !self.inbox.accept(&lane, &job).await? {
            tracing::info!(hook = %c.name, update_id, "hook delivery accepted before; not again");
            return Ok(("duplicate", None));
        }
        let trace = crate::turn::trace(&job);
        self.emit_hook(c.name.as_str(), "accepted", trace.into());
        Ok(("delivered", Some(lane)))
    }

    /// Publishes a hook request's result ([`Event::HookReceived`]).
    fn hook_event(&self, hook: &str, result: &'static str) {
        self.emit_hook(hook, result, compact_str::CompactString::default());
    }

    fn emit_hook(&self, hook: &str, result: &'static str, trace: compact_str::CompactString) {
        let now = self.platform.clock.now_ms();
        let event = Event::HookReceived {
            hook: hook.into(),
            result: compact_str::CompactString::const_new(result),
        };
        self.events.publish(now, trace, event);
    }
}
