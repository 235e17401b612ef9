//! Approvals in Telegram: a turn whose tool call needs one is suspended in its inbox job (the
//! agent's [`RunState`] and the pending call), the chat gets a message with three buttons,
//! and the job waits at the head of its lane. Whatever arrives next in the lane answers it:
//!
//! ```text
//!                 ┌─ tap by the asker or the owner ─▶ Allowed once / for a while / Denied ─┐
//! Suspended ──────┼─ tap by anyone else ──▶ "not yours" alert, still waiting               ├─▶ resumed once
//! (job at head,   ├─ a new message ───────▶ Superseded (the new message is answered next)  │   (the model is
//!  buttons sent)  ├─ /stop ───────────────▶ Stopped (no further model call)                │    told, the turn
//!                 └─ the expiry passes ───▶ Expired (the scheduled sweep comes back then) ─┘    finishes)
//! ```
//!
//! The answer is written into the job under the lane's lease before the tap's own job is
//! finished, so a replayed or duplicate tap finds nothing waiting; the approval message is
//! edited to show the outcome. Nothing here waits in memory: any invocation on any shell that
//! drains the lane resumes the turn.

use clawless_platform::PortError;

use super::progress::Progress;
use super::{Answer, Checkpoint, Failure, Reply, Step};
use crate::agent::{Agent, Failed, PendingCall, RunState, Step as AgentStep, Verdict};
use crate::app::App;
use crate::connector::{Connector, Routed};
use crate::ids::Lane;
use crate::inbox::{Job, Lease, Outcome, Suspended};
use crate::keys;
use crate::llm::ChatMessage;
use crate::session;
use crate::telegram::api::Target;
use crate::telegram::render::{document_part, render_parts};
use crate::telegram::{Message, Update, UpdateKind};
use crate::tools::ToolContext;

/// A suspended turn bigger than this is not kept (a DynamoDB item holds 400 KB): the call is
/// refused instead.
pub const MAX_SUSPENDED_BYTES: usize = 256 * 1024;
/// At most this many characters of a call's arguments are shown in the approval message.
const MAX_SHOWN_ARGS: usize = 800;

/// What the wait for an answer ended with.
pub(super) enum Wait {
    /// Nobody answered yet: come back at this instant (the expiry).
    Until(u64),
    Answered,
    LostLease,
}

impl App {
    /// Suspends the job's turn at `s`: the state is stored first, then the approval message
    /// is sent and its id stored.
    pub(super) async fn suspend(
        &self,
        key: &str,
        job: &mut Job,
        conn: &Connector,
        target: Target,
        s: Suspended,
        lease: Lease<'_>,
    ) -> Result<Step, PortError> {
        let mut s = s;
        let expires = s.expires_ms;
        let books = s.books.take();
        job.suspended = Some(Box::new(s));
        // The waiting state is newer than any step kept before it.
        job.running = None;
        self.inbox.save(key, job).await?;
        tracing::info!(key, "turn waits for an approval");
        let (sent, ()) = futures::future::join(
            self.send_approval(key, job, conn, target, lease),
            self.keep_books(conn, books),
        )
        .await;
        match sent? {
            Wait::LostLease => Ok(Step::LostLease),
            _ => Ok(Step::RetryAt(expires)),
        }
    }

    /// Sends the approval message if it was not sent yet (a failed send is tried again at the
    /// next drain; the expiry still runs).
    async fn send_approval(
        &self,
        key: &str,
        job: &mut Job,
        conn: &Connector,
        target: Target,
        lease: Lease<'_>,
    ) -> Result<Wait, PortError> {
        let Some(s) = job.suspended.as_deref() else {
            return Ok(Wait::Answered);
        };
        if s.message_id.is_some() {
            return Ok(Wait::Until(s.expires_ms));
        }
        let minutes = self.config.approvals.grant_minutes;
        let text = approval_text(&s.call, self.config.approvals.expiry_minutes);
        let buttons = [
            ("Allow once", format!("ap:{}:o", s.id)),
            (
                &*format!("Allow for {minutes} min"),
                format!("ap:{}:g", s.id),
            ),
            ("Deny", format!("ap:{}:d", s.id)),
        ];
        let expires = s.expires_ms;
        match conn.bot.send_buttons(target, &text, &buttons).await {
            Ok(id) => {
                if !self.inbox.hold(lease).await? {
                    return Ok(Wait::LostLease);
                }
                if let Some(s) = job.suspended.as_deref_mut() {
                    s.message_id = Some(id);
                }
                self.inbox.save(key, job).await?;
            }
            Err(e) => {
                tracing::warn!(key, error = %e, "approval message not sent; tried again at the next drain")
            }
        }
        Ok(Wait::Until(expires))
    }

    /// Looks for the answer to the job's approval: already given, expired, or in the jobs
    /// behind it in the lane (taps are consumed here; a new message supersedes).
    pub(super) async fn await_answer(
        &self,
        key: &str,
        job: &mut Job,
        conn: &Connector,
        target: Target,
        lease: Lease<'_>,
    ) -> Result<Wait, PortError> {
        loop {
            let Some(s) = job.suspended.as_deref() else {
                return Ok(Wait::Answered);
            };
            if s.answer.is_some() {
                return Ok(Wait::Answered);
            }
            if self.platform.clock.now_ms() >= s.expires_ms {
                return self
                    .record(key, job, conn, Outcome::Expired, None, lease)
                    .await;
            }
            if s.message_id.is_none() {
                if let Wait::LostLease = self.send_approval(key, job, conn, target, lease).await? {
                    return Ok(Wait::LostLease);
                }
            }
            let lane: &Lane = lease.lane;
            let Some((next_key, next)) = self.inbox.next_after(lane, key).await? else {
                let at = job.suspended.as_deref().map_or(0, |s| s.expires_ms);
                return Ok(Wait::Until(at));
            };
            if next.fire.is_some() {
                // A reminder's task is a new turn in the chat, as a message is.
                return self
                    .record(key, job, conn, Outcome::Superseded, None, lease)
                    .await;
            }
            let update = Update::from_value(&next.update);
            match update.as_ref().map(|u| &u.kind) {
                // Switching agents ends the session the waiting turn belongs to: not now.
                Ok(UpdateKind::CallbackQuery(q)) if super::agents::is_agent_button(q) => {
                    let text = "Answer the request above first, or /stop it.";
                    if let Err(e) = conn.bot.answer_callback(&q.id, text, false).await {
                        tracing::debug!(error = %e, "answerCallbackQuery failed");
                    }
                    self.inbox.finish(&next_key, &next).await?;
                }
                Ok(UpdateKind::CallbackQuery(q)) if super::is_side_button(q) => {
                    self.button_tap(conn, q).await;
                    self.inbox.finish(&next_key, &next).await?;
                }
                Ok(UpdateKind::CallbackQuery(q)) => {
                    let Some(s) = job.suspended.as_deref() else {
                        return Ok(Wait::Answered);
                    };
                    let (id, code) = parse_button(q.data.as_deref().unwrap_or(""));
                    let outcome = (id == s.id).then(|| Outcome::from_button(code)).flatten();
                    let from = q.from.id.0;
                    // `exec` runs as the bot's own user, with what it can read: only the owner
                    // answers for it.
                    let owner_only = s.call.name == "exec";
                    let may = (from == s.asker && !owner_only || conn.owner == Some(from))
                        && self.may_talk(conn, from).await?;
                    let (text, alert) = match outcome {
                        None => ("This request is no longer waiting.", false),
                        Some(_) if !may => ("This approval is not yours.", true),
                        Some(Outcome::Deny) => ("Denied.", false),
                        Some(_) => ("Allowed.", false),
                    };
                    if let (Some(outcome), true) = (outcome, may) {
                        let by = Some(q.from.first_name.clone()).filter(|n| !n.is_empty());
                        if let Wait::LostLease =
                            self.record(key, job, conn, outcome, by, lease).await?
                        {
                            return Ok(Wait::LostLease);
                        }
                    }
                    if let Err(e) = conn.bot.answer_callback(&q.id, text, alert).await {
                        tracing::warn!(error = %e, "answerCallbackQuery failed");
                    }
                    self.inbox.finish(&next_key, &next).await?;
                }
                Ok(UpdateKind::Message(m)) if self.ignored(conn, m).await => {
                    // Group chatter the turn would not answer: it neither answers nor
                    // supersedes the approval.
                    self.inbox.finish(&next_key, &next).await?;
                }
                Ok(UpdateKind::Message(m)) if is_stop(m) => {
                    let wait = self
                        .record(key, job, conn, Outcome::Stopped, None, lease)
                        .await?;
                    // The /stop is answered by the stopped turn's reply.
                    self.inbox.finish(&next_key, &next).await?;
                    return Ok(wait);
                }
                _ => {
                    return self
                        .record(key, job, conn, Outcome::Superseded, None, lease)
                        .await
                }
            }
        }
    }

    /// Whether the turn stage would ignore `m` (not addressed to the bot, from a bot, a
    /// channel's post). When the bot's identity cannot be had, the message counts.
    async fn ignored(&self, conn: &Connector, m: &Message) -> bool {
        let me = match super::decide::needs_identity(m) {
            true => match self.identity(conn).await {
                Ok(me) => Some(me),
                Err(_) => return false,
            },
            false => None,
        };
        let gate = super::decide::Gate::of(
            conn,
            conn.default_agent(),
            self.config.limits.max_input_chars,
        );
        matches!(
            super::decide::decide(m, me.as_ref(), &gate),
            super::decide::Decision::Ignore(_)
        )
    }

    /// Stores the answer in the job (under the lease), keeps a grant, and edits the approval
    /// message to show the outcome.
    async fn record(
        &self,
        key: &str,
        job: &mut Job,
        conn: &Connector,
        outcome: Outcome,
        by: Option<String>,
        lease: Lease<'_>,
    ) -> Result<Wait, PortError> {
        if !self.inbox.hold(lease).await? {
            return Ok(Wait::LostLease);
        }
        let Some(s) = job.suspended.as_deref_mut() else {
            return Ok(Wait::Answered);
        };
        s.answer = Some((outcome, by.clone()));
        let (tool, message_id) = (s.call.name.clone(), s.message_id);
        // Written with the resumed turn's other steps.
        let now = self.platform.clock.now_ms();
        s.run.log.push((
            now,
            crate::audit::Step::Approval {
                tool: tool.clone(),
                outcome: outcome.name().to_owned(),
                by: by.clone(),
            },
        ));
        self.inbox.save(key, job).await?;
        let chat = chat_of(job);
        if outcome == Outcome::AllowForAWhile {
            let grant = keys::grant(&conn.id, chat, &tool);
            let ttl = self.config.approvals.grant_ttl();
            if let Err(e) = self.platform.kv.put(&grant, b"1", Some(ttl)).await {
                tracing::warn!(error = %e, "grant not stored; the next call asks again");
            }
        }
        tracing::info!(key, tool, ?outcome, "approval answered");
        if let Some(id) = message_id {
            let text = outcome_text(
                outcome,
                &tool,
                by.as_deref(),
                self.config.approvals.grant_minutes,
            );
            if let Err(e) = conn.bot.edit_text(chat, id, &text).await {
                tracing::debug!(error = %e, "approval message not edited");
            }
        }
        Ok(Wait::Answered)
    }

    /// Resumes the job's answered turn: the agent runs on from its state with the verdict.
    pub(super) async fn resume(
        &self,
        key: &str,
        job: &mut Job,
        conn: &Routed<'_>,
        msg: &Message,
        lease: Lease<'_>,
    ) -> Result<Reply, Answer> {
        let Some(s) = job.suspended.as_deref() else {
            return Ok(Reply::Nothing);
        };
        let Some((outcome, _)) = s.answer else {
            return Ok(Reply::Nothing);
        };
        let call = s.call.id.clone();
        let mut run = s.run.clone();
        if outcome == Outcome::Stopped {
            let (recorded, first_seq) = (run.recorded, run.logged);
            let mut out = Agent::cancel(run, "Stopped.");
            let steps = std::mem::take(&mut out.log);
            let books = self.books(msg, out.usage.since(&recorded), first_seq, steps);
            return Ok(self.turn_reply(conn, msg, out.reply, out.messages, books));
        }
        run.verdicts.insert(call, outcome.verdict());
        if matches!(outcome, Outcome::Expired | Outcome::Superseded) {
            run.closing = Some(outcome.verdict());
        }
        let progress = Progress::new(self, key, job, lease);
        self.run_agent(conn, msg, run, Some(&progress)).await
    }

    /// Runs the agent from `run` for `msg`'s conversation, with "typing…" beside it; with
    /// `progress`, each step is kept in the job (see `progress.rs`).
    pub(super) async fn run_agent(
        &self,
        conn: &Routed<'_>,
        msg: &Message,
        run: RunState,
        progress: Option<&Progress<'_>>,
    ) -> Result<Reply, Answer> {
        let key = session::session_key(&conn.id, msg);
        let scope = conn.memory_scope_of(msg);
        // The chat's model is read beside the history, not after it.
        let (session, model) = futures::future::join(
            self.current_session(&key, Some((conn, &scope))),
            self.chosen_model(conn, msg.chat.id.0),
        )
        .await;
        let history = session::for_model(
            session.map_err(Failure::storage)?,
            self.config.session.history_window,
        );
        let granted = self
            .granted(conn, msg.chat.id.0)
            .await
            .map_err(Failure::storage)?;
        let origin = Some(super::reminders::origin(&conn.id, msg));
        let ctx = ToolContext {
            scope,
            granted,
            origin,
            depth: 0,
            budget: None,
            // Unique to this update's turn, kept across crashes.
            call: format!("{}/{}/{}", conn.id, msg.chat.id.0, msg.message_id),
        };
        let user = msg.from.as_ref().map_or(0, |u| u.id.0);
        let budget = self
            .budget(&conn.id, user)
            .await
            .map_err(Failure::storage)?;
        let recorded = run.recorded;
        let first_seq = run.logged;
        let target = Target {
            chat_id: msg.chat.id.0,
            thread_id: msg.topic(),
        };
        let round = run.round;
        // The reply shows as it is written (a draft, or a placeholder in groups).
        let drafts = self.drafts_for(msg);
        let on_text = |text: &str| {
            if let Some(d) = &drafts {
                d.set(text);
            }
        };
        let opts = crate::agent::RunOptions {
            budget,
            model: model.as_deref(),
            on_text: drafts
                .is_some()
                .then_some(&on_text as crate::llm::OnText<'_>),
            saver: progress.map(|p| p as &dyn crate::agent::Saver),
            ..Default::default()
        };
        let turn = conn.agent.run(&history, run, &ctx, opts);
        let step = self
            .beside_turn(conn, target, msg.message_id, drafts.as_ref(), turn)
            .await;
        let mut step = match step {
            Ok(step) => step,
            Err(failed) => {
                // The turn fails (and is retried); what this attempt spent and did, the
                // failed call included, is kept now, as no delivery will carry it.
                let Failed { error, mut state } = *failed;
                let steps = std::mem::take(&mut state.log);
                let logged = first_seq.saturating_add(steps.len() as u32);
                let books = self.books(msg, state.usage.since(&recorded), first_seq, steps);
                self.keep_books(conn, books).await;
                // The retry goes on from the last step, its books starting after these.
                if let Some(p) = progress {
                    state.recorded = state.usage;
                    state.logged = logged;
                    p.keep(state);
                }
                // The chain as the chat ordered it: its last link is the one that failed last.
                let chain = conn.agent.chain.preferring(model.as_deref());
                return Err(Answer::Failed(Failure::model(&error, &chain)));
            }
        };
        let (spent, steps) = match &mut step {
            AgentStep::Lost => return Err(Answer::Lost),
            AgentStep::Done(out) => (out.usage, std::mem::take(&mut out.log)),
            AgentStep::Ask { state, .. } => {
                let steps = std::mem::take(&mut state.log);
                state.logged = first_seq.saturating_add(steps.len() as u32);
                (state.usage, steps)
            }
        };
        // Kept in the job and written beside the delivery (a retry of the job runs the model
        // again and counts that too).
        let books = self.books(msg, spent.since(&recorded), first_seq, steps);
        match step {
            AgentStep::Lost => Err(Answer::Lost),
            AgentStep::Done(out) => Ok(self.turn_reply(conn, msg, out.reply, out.messages, books)),
            AgentStep::Ask { state, call } => {
                let mut state = *state;
                state.recorded = state.usage;
                // Images and documents are not kept while the turn waits: the model has seen
                // them; the resumed turn reads a line saying they were there.
                for m in &mut state.messages {
                    *m = m.without_media();
                }
                let size = serde_json::to_vec(&state).map_or(usize::MAX, |b| b.len());
                if size > MAX_SUSPENDED_BYTES {
                    // Too big to keep while waiting: refuse the call and go on.
                    tracing::warn!(size, "turn too large to wait for an approval; call refused");
                    self.keep_books(conn, books).await;
                    state.verdicts.insert(call.id, Verdict::Denied);
                    return Box::pin(self.run_agent(conn, msg, state, progress)).await;
                }
                let from = msg.from.as_ref().map_or(0, |u| u.id.0);
                let now = self.platform.clock.now_ms();
                Ok(Reply::Ask(Box::new(Suspended {
                    id: format!("{}.{}", msg.message_id, state.round.max(round)),
                    run: state,
                    call,
                    asker: from,
                    message_id: None,
                    expires_ms: now.saturating_add(self.config.approvals.expiry_ms()),
                    answer: None,
                    books,
                })))
            }
        }
    }

    /// The bookkeeping of `msg`'s turn: its spend and audit `steps` (numbered from
    /// `first_seq`); `None` when there is none.
    pub(super) fn books(
        &self,
        msg: &Message,
        spend: crate::usage::Tally,
        first_seq: u32,
        steps: Vec<(u64, crate::audit::Step)>,
    ) -> Option<Box<crate::usage::Books>> {
        if steps.is_empty() && spend.is_empty() {
            return None;
        }
        let user = msg.from.as_ref().map_or(0, |u| u.id.0);
        let entries: Vec<crate::audit::Entry> = steps
            .into_iter()
            .zip(first_seq..)
            .map(|((at_ms, step), seq)| crate::audit::Entry {
                at_ms,
                trace: msg.message_id,
                seq,
                chat: msg.chat.id.0,
                user,
                step,
            })
            .collect();
        Some(Box::new(crate::usage::Books {
            spend,
            user,
            chat: msg.chat.id.0,
            audit: entries,
        }))
    }

    /// Writes a turn's bookkeeping: the spend counters and the audit entries, side by side.
    /// Failures are logged; the answer never waits on them.
    pub(super) async fn keep_books(
        &self,
        conn: &Connector,
        books: Option<Box<crate::usage::Books>>,
    ) {
        let Some(b) = books else {
            return;
        };
        let ledger = self.ledger();
        let retention = self.config.audit.retention();
        let (counted, audited) = futures::future::join(
            ledger.add(&conn.id, b.user, b.chat, b.spend),
            crate::audit::write(&*self.platform.kv, &conn.id, &b.audit, retention),
        )
        .await;
        if let Err(e) = counted {
            tracing::warn!(error = %e, "usage not counted");
        }
        if let Err(e) = audited {
            tracing::warn!(error = %e, "audit entries not written");
        }
    }

    /// The checkpoint of a finished agent turn.
    pub(super) fn turn_reply(
        &self,
        conn: &Connector,
        msg: &Message,
        reply: String,
        messages: Vec<crate::llm::ChatMessage>,
        books: Option<Box<crate::usage::Books>>,
    ) -> Reply {
        let mut parts = render_parts(&reply);
        if parts.len() > self.config.limits.max_reply_parts {
            parts = vec![document_part(&reply)];
        }
        Reply::Send(Checkpoint {
            parts,
            sent: 0,
            reply_to: (!msg.is_private()).then_some(msg.message_id),
            // The history keeps a line where an image or a document was, not its bytes.
            session_turn: Some((
                session::session_key(&conn.id, msg),
                messages.iter().map(ChatMessage::without_media).collect(),
            )),
            books,
        })
    }
}

/// The chat of a job's update (0 when unreadable).
fn chat_of(job: &Job) -> i64 {
    Update::from_value(&job.update)
        .ok()
        .and_then(|u| u.chat().map(|c| c.id.0))
        .unwrap_or(0)
}

/// `ap:<id>:<code>` → `(id, code)`.
fn parse_button(data: &str) -> (&str, &str) {
    let rest = data.strip_prefix("ap:").unwrap_or("");
    rest.rsplit_once(':').unwrap_or(("", ""))
}

fn is_stop(m: &Message) -> bool {
    super::commands::parse(m.text().unwrap_or(""))
        .and_then(|(name, _)| super::commands::find(&name))
        .is_some_and(|c| c.action == super::commands::Action::Stop)
}

/// The approval message: the tool, its level and its arguments (secrets redacted, long
/// values cut), and the expiry.
pub fn approval_text(call: &PendingCall, expiry_minutes: u64) -> String {
    let level = match call.level {
        crate::tools::Level::Safe => "reads",
        crate::tools::Level::Guarded => "writes my own data or reads the web",
        crate::tools::Level::Unsafe => "acts outside the assistant",
    };
    format!(
        "🔐 Approval needed\nI want to run {} ({level}) with:\n{}\n\nNot answered within {expiry_minutes} min counts as Deny.",
        call.name,
        crate::audit::shown_args(&call.input, MAX_SHOWN_ARGS)
    )
}

/// What the approval message says once answered.
fn outcome_text(outcome: Outcome, tool: &str, by: Option<&str>, grant_minutes: u64) -> String {
    let by = by.map(|b| format!(" by {b}")).unwrap_or_default();
    match outcome {
        Outcome::AllowOnce => format!("✅ {tool}: allowed once{by}."),
        Outcome::AllowForAWhile => {
            format!("✅ {tool}: allowed for {grant_minutes} min{by}.")
        }
        Outcome::Deny => format!("❌ {tool}: denied{by}."),
        Outcome::Expired => format!("⌛ {tool}: nobody answered in time; not run."),
        Outcome::Superseded => format!("↪️ {tool}: not run, a new message came first."),
        Outcome::Stopped => format!("⏹ {tool}: stopped with /stop."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_parse() {
        assert_eq!(parse_button("ap:12.1:o"), ("12.1", "o"));
        assert_eq!(parse_button("garbage"), ("", ""));
        assert_eq!(Outcome::from_button("x"), None);
    }
}
