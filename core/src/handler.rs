//! Processing one inbox job: decide what the update asks for (access, group gating,
//! commands), run the agent turn, checkpoint the answer, apply the session turn once, send the
//! parts once each.

use std::pin::pin;
use std::time::Duration;

use clawless_platform::PortError;
use futures::future::{select, Either};

use crate::app::{stranger_key, App, Connector};
use crate::inbox::{Checkpoint, Job, Lease};
use crate::llm::{LlmError, ModelChain};
use crate::session;
use crate::telegram::api::Target;
use crate::telegram::render::{document_part, plain_parts, render_parts, Part};
use crate::telegram::{BotIdentity, ChatKind, Message, TelegramError, Update};

/// What an update asks of us.
enum Decision {
    /// Not for us (group chatter, another bot's command, channel posts).
    Ignore(&'static str),
    /// A stranger addressed us.
    Stranger(i64),
    /// A fixed reply, no model call.
    Reply(String),
    /// Start a fresh session, then reply.
    NewSession(String),
    /// A turn for the agent.
    Turn(String),
}

/// Why a turn failed: a short, human sentence for the user (which service, what kind of
/// failure; never a raw error body) and the detail for the log.
struct Failure {
    user: String,
    detail: String,
}

impl Failure {
    fn storage(e: impl std::fmt::Display) -> Failure {
        Failure {
            user: "my storage is not reachable right now. Please try again in a while.".into(),
            detail: format!("storage: {e}"),
        }
    }

    fn telegram(e: TelegramError) -> Failure {
        Failure {
            user: "Telegram did not answer me. Please try again in a while.".into(),
            detail: format!("telegram: {e}"),
        }
    }

    fn model(e: &LlmError, chain: &ModelChain) -> Failure {
        // A chain fails only after its last link failed, so that link names the provider.
        let provider = chain
            .links
            .last()
            .map(|l| l.label.split('/').next().unwrap_or(&l.label).to_owned());
        Failure {
            user: e.for_user(provider.as_deref()),
            detail: format!("model: {e}"),
        }
    }
}

/// How processing a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Finished and removed from the inbox.
    Done,
    /// To be tried again at this instant (ms).
    RetryAt(u64),
    /// Another drainer took the lane; nothing more was written or sent.
    LostLease,
}

/// How often "typing…" is sent again while the agent works.
const TYPING_EVERY: Duration = Duration::from_millis(4500);

const NO_CONTENT: &str =
    "I can only read text for now: send me a message, or a caption with your photo or file.";

impl App {
    /// Processes a job while holding `lease`, checking the lease before every write that
    /// matters.
    pub(crate) async fn process(
        &self,
        key: &str,
        mut job: Job,
        lease: Lease<'_>,
    ) -> Result<Step, PortError> {
        let parsed = Update::from_value(&job.update);
        let (Ok(update), Some(conn)) = (parsed, self.connectors.get(&job.connector)) else {
            tracing::error!(
                key,
                "job names an unknown connector or holds an unreadable update; dropped"
            );
            self.inbox.finish(key, &job).await?;
            return Ok(Step::Done);
        };
        let Some(msg) = update.message() else {
            self.inbox.finish(key, &job).await?;
            return Ok(Step::Done);
        };
        let target = Target {
            chat_id: msg.chat.id.0,
            thread_id: msg.topic(),
        };
        if job.checkpoint.is_none() {
            let answer = self.answer(conn, msg, &job).await;
            if !self.inbox.hold(lease).await? {
                tracing::warn!(key, "lane taken by another drainer; answer discarded");
                return Ok(Step::LostLease);
            }
            match answer {
                Ok(Some(cp)) => {
                    job.checkpoint = Some(cp);
                    self.inbox.save(key, &job).await?;
                }
                Ok(None) => {
                    self.inbox.finish(key, &job).await?;
                    return Ok(Step::Done);
                }
                Err(failure) => {
                    let reason = &failure.detail;
                    if let Some(at) = self.inbox.retry_later(key, &mut job).await? {
                        tracing::warn!(key, attempt = job.attempts, %reason, "turn failed; will retry");
                        return Ok(Step::RetryAt(at));
                    }
                    tracing::error!(key, %reason, "turn failed for the last time; telling the user");
                    let text = format!("Sorry, I could not answer that: {}", failure.user);
                    job.checkpoint = Some(Checkpoint {
                        parts: plain_parts(&text),
                        sent: 0,
                        reply_to: None,
                        session_turn: None,
                    });
                    self.inbox.save(key, &job).await?;
                }
            }
        }
        self.apply_session_turn(&job, update.id).await?;
        self.deliver(key, &mut job, conn, target, lease).await
    }

    /// Decides and, for a turn, runs the agent. `Ok(None)`: nothing to send.
    async fn answer(
        &self,
        conn: &Connector,
        msg: &Message,
        job: &Job,
    ) -> Result<Option<Checkpoint>, Failure> {
        let decision = self.decide(conn, msg).await.map_err(Failure::telegram)?;
        let reply_to = (!msg.is_private()).then_some(msg.message_id);
        let text = match decision {
            Decision::Ignore(why) => {
                tracing::debug!(update_id = job.update_id, why, "not answered");
                return Ok(None);
            }
            Decision::Stranger(user) => {
                let first = self
                    .platform
                    .kv
                    .put_if_absent(&stranger_key(&conn.id, user), b"1", None)
                    .await
                    .map_err(Failure::storage)?;
                if !first {
                    return Ok(None);
                }
                format!("Sorry, this is a private assistant. Your Telegram user id is {user}; its owner can add it to allowed_users.")
            }
            Decision::Reply(text) => text,
            Decision::NewSession(text) => {
                let key = session::session_key(&conn.id, msg);
                let old = session::load(&*self.platform.kv, &key)
                    .await
                    .map_err(Failure::storage)?;
                self.lifecycle()
                    .end_session(&conn.agent.chain, &conn.memory_scope_of(msg), &key, &old)
                    .await;
                session::clear(&*self.platform.kv, &key)
                    .await
                    .map_err(Failure::storage)?;
                text
            }
            Decision::Turn(text) => {
                let key = session::session_key(&conn.id, msg);
                let scope = conn.memory_scope_of(msg);
                let s = self
                    .current_session(&key, Some((conn, &scope)))
                    .await
                    .map_err(Failure::storage)?;
                let target = Target {
                    chat_id: msg.chat.id.0,
                    thread_id: msg.topic(),
                };
                // "typing…" is shown beside the turn, never awaited before it.
                // Polled first, so its request is under way before the turn's first await.
                let out = match select(
                    pin!(self.keep_typing(conn, target)),
                    pin!(self.agent_turn(conn, &scope, &s.messages, &text)),
                )
                .await
                {
                    Either::Left((never, _)) => match never {},
                    Either::Right((out, _)) => out,
                }
                .map_err(|e| Failure::model(&e, &conn.agent.chain))?;
                let mut parts = render_parts(&out.reply);
                if parts.len() > self.config.limits.max_reply_parts {
                    parts = vec![document_part(&out.reply)];
                }
                return Ok(Some(Checkpoint {
                    parts,
                    sent: 0,
                    reply_to,
                    session_turn: Some((key, out.messages)),
                }));
            }
        };
        Ok(Some(Checkpoint {
            parts: plain_parts(&text),
            sent: 0,
            reply_to,
            session_turn: None,
        }))
    }

    /// Shows "typing…" in the chat until dropped: at once, then every [`TYPING_EVERY`]
    /// (Telegram shows it for about 5 s). Failures are only logged.
    async fn keep_typing(&self, conn: &Connector, target: Target) -> std::convert::Infallible {
        loop {
            if let Err(e) = conn.bot.send_typing(target).await {
                tracing::debug!(error = %e, "sendChatAction failed");
            }
            crate::app::yield_now().await;
            self.platform.clock.sleep(TYPING_EVERY).await;
        }
    }

    /// The session, or a fresh one when it has been idle past `idle_minutes`; with `end`, an
    /// idle one is ended first, its summary going to the memory `scope` (see
    /// [`crate::memory::lifecycle::Lifecycle::end_session`]).
    async fn current_session(
        &self,
        key: &str,
        end: Option<(&Connector, &str)>,
    ) -> Result<session::Session, PortError> {
        let s = session::load(&*self.platform.kv, key).await?;
        let idle = self.config.session.idle_ms();
        if idle > 0
            && s.updated_ms > 0
            && self.platform.clock.now_ms().saturating_sub(s.updated_ms) > idle
        {
            if let Some((conn, scope)) = end {
                self.lifecycle()
                    .end_session(&conn.agent.chain, scope, key, &s)
                    .await;
            }
            return Ok(session::Session {
                last_update_id: s.last_update_id,
                applied: s.applied,
                ..Default::default()
            });
        }
        Ok(s)
    }

    async fn decide(&self, conn: &Connector, msg: &Message) -> Result<Decision, TelegramError> {
        let Some(from) = &msg.from else {
            return Ok(Decision::Ignore("no sender"));
        };
        if from.is_bot {
            return Ok(Decision::Ignore("from a bot"));
        }
        let text = msg.text().unwrap_or("");
        let command = parse_command(text);
        let mut body = text.to_owned();
        match msg.chat.kind {
            ChatKind::Private => {}
            ChatKind::Group | ChatKind::Supergroup => {
                if msg.is_channel_forward() {
                    return Ok(Decision::Ignore("a linked channel's post"));
                }
                let me = self.identity(conn).await?;
                let mentions = msg.mentions_of(&me);
                let mentioned = !mentions.is_empty();
                let replied = msg
                    .reply_to_message
                    .as_ref()
                    .and_then(|r| r.from.as_ref())
                    .is_some_and(|u| u.id.0 == me.id);
                let commanded = match &command {
                    Some((_, Some(bot))) => bot.eq_ignore_ascii_case(&me.username),
                    Some((_, None)) => true,
                    None => false,
                };
                if let Some((_, Some(_))) = &command {
                    if !commanded {
                        return Ok(Decision::Ignore("command for another bot"));
                    }
                }
                if !(mentioned || replied || commanded) {
                    return Ok(Decision::Ignore("group message not addressed to the bot"));
                }
                body = without(text, &mentions);
            }
            ChatKind::Channel | ChatKind::Other => {
                return Ok(Decision::Ignore("not a private chat or group"))
            }
        }
        if !conn.allowed.contains(&from.id.0) {
            return Ok(Decision::Stranger(from.id.0));
        }
        let name = conn
            .agent
            .config
            .name
            .clone()
            .unwrap_or_else(|| conn.agent.config.id.clone());
        match command.as_ref().map(|(c, _)| c.as_str()) {
            Some("start") | Some("help") => return Ok(Decision::Reply(format!(
                "Hi, I'm {name}, your assistant. Just write to me.\n\nCommands:\n/new: start a fresh conversation\n/help: this message"
            ))),
            Some("new") => return Ok(Decision::NewSession("Started a fresh conversation.".into())),
            _ => {}
        }
        let body = body.trim();
        if body.is_empty() {
            return Ok(if msg.text().is_some() {
                Decision::Reply("Yes? Write your question after the mention.".into())
            } else {
                Decision::Reply(NO_CONTENT.into())
            });
        }
        let body = capped(body, self.config.limits.max_input_chars);
        if msg.photo.is_some() {
            return Ok(Decision::Turn(format!(
                "[The user attached a photo, which you cannot see.]\n{body}"
            )));
        }
        Ok(Decision::Turn(body))
    }

    /// Our own id and username: memory, then Kv, then `getMe`.
    async fn identity(&self, conn: &Connector) -> Result<BotIdentity, TelegramError> {
        if let Some(me) = conn
            .identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(me);
        }
        let key = format!("botinfo/{}", conn.id);
        let me = match clawless_platform::KvExt::get_json::<BotIdentity>(&*self.platform.kv, &key)
            .await
        {
            Ok(Some(me)) => me,
            _ => {
                let me = conn.bot.get_me().await?;
                let ttl = Some(std::time::Duration::from_secs(86_400));
                if let Err(e) =
                    clawless_platform::KvExt::put_json(&*self.platform.kv, &key, &me, ttl).await
                {
                    tracing::warn!(error = %e, "could not cache getMe");
                }
                me
            }
        };
        *conn.identity.lock().unwrap_or_else(|e| e.into_inner()) = Some(me.clone());
        Ok(me)
    }

    /// Appends the checkpointed turn to its session, unless a previous try already did.
    async fn apply_session_turn(&self, job: &Job, update_id: i64) -> Result<(), PortError> {
        let Some((key, messages)) = job
            .checkpoint
            .as_ref()
            .and_then(|c| c.session_turn.as_ref())
        else {
            return Ok(());
        };
        let kv = &*self.platform.kv;
        let mut s = self.current_session(key, None).await?;
        if s.has_applied(update_id) {
            return Ok(());
        }
        s.messages.extend(messages.iter().cloned());
        session::trim(&mut s.messages, self.config.session.history_window);
        s.mark_applied(update_id);
        s.updated_ms = self.platform.clock.now_ms();
        session::save(kv, key, &s).await
    }

    /// Sends the parts not sent yet, checkpointing each.
    async fn deliver(
        &self,
        key: &str,
        job: &mut Job,
        conn: &Connector,
        target: Target,
        lease: Lease<'_>,
    ) -> Result<Step, PortError> {
        while let Some((part, reply_to)) = next_part(job) {
            if !self.inbox.hold(lease).await? {
                tracing::warn!(key, "lane taken by another drainer; stopped before sending");
                return Ok(Step::LostLease);
            }
            match self.send_part(conn, target, &part, reply_to).await {
                Ok(()) => {
                    if let Some(cp) = job.checkpoint.as_mut() {
                        cp.sent += 1;
                    }
                    self.inbox.save(key, job).await?;
                }
                Err(e) if e.is_transient() => {
                    if let Some(at) = self.inbox.retry_later(key, job).await? {
                        tracing::warn!(key, error = %e, "send failed; will retry");
                        return Ok(Step::RetryAt(at));
                    }
                    tracing::error!(key, error = %e, "send failed for the last time; reply dropped");
                    break;
                }
                Err(e) => {
                    tracing::error!(key, error = %e, "Telegram refused the reply; dropped");
                    break;
                }
            }
        }
        self.inbox.finish(key, job).await?;
        Ok(Step::Done)
    }

    /// Sends one part: HTML first and, if Telegram refuses its entities, the same as plain text.
    /// A short `retry_after` is waited out here.
    async fn send_part(
        &self,
        conn: &Connector,
        target: Target,
        part: &Part,
        reply_to: Option<i64>,
    ) -> Result<(), TelegramError> {
        let mut html = part.html;
        let mut text = part.text.clone();
        for _ in 0..4 {
            let sent = match &part.document {
                Some(doc) => {
                    conn.bot
                        .send_document(target, "answer.md", doc.as_bytes(), &text, reply_to)
                        .await
                }
                None => conn.bot.send_message(target, &text, html, reply_to).await,
            };
            match sent {
                Ok(_) => return Ok(()),
                Err(e) if html && e.is_entity_error() => {
                    tracing::warn!(error = %e, "HTML refused; resending as plain text");
                    html = false;
                    text = crate::telegram::render::strip_html(&text);
                }
                Err(TelegramError::RetryAfter(secs)) if secs <= 30 => {
                    self.platform.clock.sleep(Duration::from_secs(secs)).await;
                }
                Err(e) => return Err(e),
            }
        }
        Err(TelegramError::Unavailable(
            "gave up sending after repeated refusals".into(),
        ))
    }
}

/// The next part to send and, for the first, the message it replies to.
fn next_part(job: &Job) -> Option<(Part, Option<i64>)> {
    let cp = job.checkpoint.as_ref()?;
    let part = cp.parts.get(cp.sent)?.clone();
    Some((part, if cp.sent == 0 { cp.reply_to } else { None }))
}

/// `/cmd@bot args` → `("cmd", Some("bot"))`.
fn parse_command(text: &str) -> Option<(String, Option<String>)> {
    let first = text.split_whitespace().next()?.strip_prefix('/')?;
    let (cmd, bot) = match first.split_once('@') {
        Some((c, b)) => (c, Some(b.to_owned())),
        None => (first, None),
    };
    (!cmd.is_empty()).then(|| (cmd.to_ascii_lowercase(), bot))
}

/// `text` without the byte `ranges` (sorted, non-overlapping, on char boundaries).
fn without(text: &str, ranges: &[std::ops::Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in ranges {
        if r.start >= at {
            out.push_str(&text[at..r.start]);
            at = r.end;
        }
    }
    out.push_str(&text[at..]);
    out
}

/// `text` cut to `max` characters, with a note for the model when it was cut.
fn capped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!(
            "{}\n[The message was cut here: it had {} characters, more than the {max} accepted.]",
            &text[..at],
            text.chars().count()
        ),
        None => text.to_owned(),
    }
}
