//! Approvals in Telegram: a turn whose tool call needs one is suspended in its inbox job (the
//! agent's [`crate::agent::RunState`] and the pending call), the chat gets a message with three buttons,
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

use super::button::{Button, Choice};
use super::progress::Progress;
use super::{Answer, Reply, Step, Turn};
use crate::agent::{Agent, PendingCall};
use crate::app::App;
use crate::connector::Connector;
use crate::ids::Lane;
use crate::inbox::{Job, Outcome, Stage, Suspended};
use crate::keys;
use crate::telegram::{Message, Update, UpdateKind};

/// At most this many characters of a call's arguments are shown in the approval message.
const MAX_SHOWN_ARGS: usize = 800;

/// What the wait for an answer ended with.
pub(super) enum Wait {
    /// Nobody answered yet: come back at this instant (the expiry).
    Until(u64),
    Answered,
    LostLease,
}

/// Whether the turn stage would ignore `m` (not addressed to the bot, from a bot, a
/// channel's post). When the bot's identity cannot be had, the message counts.
async fn ignored(app: &App, conn: &Connector, m: &Message) -> bool {
    let me = match super::decide::needs_identity(m) {
        true => match super::agents::identity(app, conn).await {
            Ok(me) => Some(me),
            Err(_) => return false,
        },
        false => None,
    };
    let gate = super::decide::Gate::of(conn, app.config.limits.max_input_chars);
    matches!(
        super::decide::decide(m, me.as_ref(), &gate),
        super::decide::Decision::Ignore(_)
    )
}

impl Turn<'_> {
    /// Suspends the job's turn at `s`: the state is stored first, then the approval message
    /// is sent and its id stored.
    pub(super) async fn suspend(&self, job: &mut Job, s: Suspended) -> Result<Step, PortError> {
        let Turn { app, key, conn, .. } = *self;
        let mut s = s;
        let expires = s.expires_ms;
        let books = s.books.take();
        let tool = s.call.name.clone();
        // The waiting state is newer than any step kept before it.
        job.stage = Stage::Waiting(Box::new(s));
        app.emit(
            &super::trace(job),
            crate::events::Event::ApprovalAsked { tool },
        );
        app.inbox.save(key, job).await?;
        tracing::info!(key, "turn waits for an approval");
        let (sent, ()) = futures::future::join(
            self.send_approval(job),
            super::run::keep_books(app, conn, books),
        )
        .await;
        match sent? {
            Wait::LostLease => Ok(Step::LostLease),
            _ => Ok(Step::RetryAt(expires)),
        }
    }

    /// Looks for the answer to the job's approval: already given, expired, or in the jobs
    /// behind it in the lane (taps are consumed here; a new message supersedes).
    pub(super) async fn await_answer(&self, job: &mut Job) -> Result<Wait, PortError> {
        let Turn {
            app,
            key,
            conn,
            lease,
            ..
        } = *self;
        loop {
            let Some(s) = job.suspended() else {
                return Ok(Wait::Answered);
            };
            if s.answer.is_some() {
                return Ok(Wait::Answered);
            }
            if app.platform.clock.now_ms() >= s.expires_ms {
                return self.record(job, Outcome::Expired, None).await;
            }
            if s.message_id.is_none() {
                if let Wait::LostLease = self.send_approval(job).await? {
                    return Ok(Wait::LostLease);
                }
            }
            let lane: &Lane = lease.lane;
            let Some((next_key, next)) = app.inbox.next_after(lane, key).await? else {
                let at = job.suspended().map_or(0, |s| s.expires_ms);
                return Ok(Wait::Until(at));
            };
            if next.fire.is_some() {
                // A reminder's task is a new turn in the chat, as a message is.
                return self.record(job, Outcome::Superseded, None).await;
            }
            let update = Update::from_value(&next.update);
            match update.as_ref().map(|u| &u.kind) {
                Ok(UpdateKind::CallbackQuery(q)) => {
                    let tapped = q.data.as_deref().and_then(Button::decode);
                    let (id, answer) = match tapped {
                        Some(Button::Approval { id, answer }) => (id, answer),
                        // Switching agents ends the session the waiting turn belongs to: not
                        // now.
                        Some(Button::Agent(_)) => {
                            let text = "Answer the request above first, or /stop it.";
                            if let Err(e) = conn.bot.answer_callback(&q.id, text, false).await {
                                tracing::debug!(error = %e, "answerCallbackQuery failed");
                            }
                            app.inbox.finish(&next_key, &next).await?;
                            continue;
                        }
                        // Another button (or data no button of ours wrote), answered as
                        // anywhere else.
                        _ => {
                            super::tap::button_tap(app, conn, q).await;
                            app.inbox.finish(&next_key, &next).await?;
                            continue;
                        }
                    };
                    let Some(s) = job.suspended() else {
                        return Ok(Wait::Answered);
                    };
                    let outcome = (id == s.id).then(|| Outcome::from(answer));
                    let from = q.from.id.0;
                    // `exec` runs as the bot's own user, with what it can read: only the owner
                    // answers for it.
                    let owner_only = s.call.name == "exec";
                    let may = (from == s.asker && !owner_only || conn.owner == Some(from))
                        && super::pairing::may_talk(app, conn, from).await?;
                    let (text, alert) = match outcome {
                        None => ("This request is no longer waiting.", false),
                        Some(_) if !may => ("This approval is not yours.", true),
                        Some(Outcome::Deny) => ("Denied.", false),
                        Some(_) => ("Allowed.", false),
                    };
                    if let (Some(outcome), true) = (outcome, may) {
                        let by = Some(q.from.first_name.clone()).filter(|n| !n.is_empty());
                        if let Wait::LostLease = self.record(job, outcome, by).await? {
                            return Ok(Wait::LostLease);
                        }
                    }
                    if let Err(e) = conn.bot.answer_callback(&q.id, text, alert).await {
                        tracing::warn!(error = %e, "answerCallbackQuery failed");
                    }
                    app.inbox.finish(&next_key, &next).await?;
                }
                Ok(UpdateKind::Message(m)) if ignored(app, conn, m).await => {
                    // Group chatter the turn would not answer: it neither answers nor
                    // supersedes the approval.
                    app.inbox.finish(&next_key, &next).await?;
                }
                Ok(UpdateKind::Message(m)) if is_stop(m) => {
                    let wait = self.record(job, Outcome::Stopped, None).await?;
                    // The /stop is answered by the stopped turn's reply.
                    app.inbox.finish(&next_key, &next).await?;
                    return Ok(wait);
                }
                _ => return self.record(job, Outcome::Superseded, None).await,
            }
        }
    }

    /// Resumes the job's answered turn: the agent runs on from its state with the verdict.
    pub(super) async fn resume(&self, job: &mut Job) -> Result<Reply, Answer> {
        let Turn {
            app,
            key,
            conn,
            msg,
            lease,
            ..
        } = *self;
        let Some(s) = job.suspended() else {
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
            let books = super::run::books(
                msg,
                &conn.agent.config.id,
                out.usage.since(&recorded),
                first_seq,
                steps,
            );
            // Pictures made before the stop were paid for: they go with it.
            let pictures = super::pictures::photo_parts(&out.messages, &conn.memory_scope_of(msg));
            let tainted = out.tainted.take();
            let mut reply =
                super::run::turn_reply(app, conn, msg, out.reply, out.messages, (books, false));
            if let Reply::Send(cp) = &mut reply {
                cp.parts.splice(0..0, pictures);
                // What the turn read stays in the history: its conversation keeps it.
                cp.taint = tainted;
            }
            return Ok(reply);
        }
        run.verdicts.insert(call, outcome.verdict());
        if matches!(outcome, Outcome::Expired | Outcome::Superseded) {
            run.closing = Some(outcome.verdict());
        }
        let progress = Progress::new(app, key, job, lease);
        self.run_agent(run, Some(&progress)).await
    }

    /// Sends the approval message if it was not sent yet (a failed send is tried again at the
    /// next drain; the expiry still runs).
    async fn send_approval(&self, job: &mut Job) -> Result<Wait, PortError> {
        let Turn {
            app,
            key,
            conn,
            target,
            lease,
            ..
        } = *self;
        let Some(s) = job.suspended() else {
            return Ok(Wait::Answered);
        };
        if s.message_id.is_some() {
            return Ok(Wait::Until(s.expires_ms));
        }
        let minutes = app.config.approvals.grant_minutes;
        let text = approval_text(&s.call, app.config.approvals.expiry_minutes);
        let answer = |answer| {
            Button::Approval {
                id: s.id.clone(),
                answer,
            }
            .encode()
        };
        let buttons = [
            ("Allow once", answer(Choice::Once)),
            (
                &*format!("Allow for {minutes} min"),
                answer(Choice::ForAWhile),
            ),
            ("Deny", answer(Choice::Deny)),
        ];
        let expires = s.expires_ms;
        match conn.bot.send_buttons(target, &text, &buttons).await {
            Ok(id) => {
                if !app.inbox.hold(lease).await? {
                    return Ok(Wait::LostLease);
                }
                if let Some(s) = job.suspended_mut() {
                    s.message_id = Some(id);
                }
                app.inbox.save(key, job).await?;
            }
            Err(e) => {
                tracing::warn!(key, error = %e, "approval message not sent; tried again at the next drain")
            }
        }
        Ok(Wait::Until(expires))
    }

    /// Stores the answer in the job (under the lease), keeps a grant, and edits the approval
    /// message to show the outcome.
    async fn record(
        &self,
        job: &mut Job,
        outcome: Outcome,
        by: Option<String>,
    ) -> Result<Wait, PortError> {
        let Turn {
            app,
            key,
            conn,
            lease,
            ..
        } = *self;
        if !app.inbox.hold(lease).await? {
            return Ok(Wait::LostLease);
        }
        let Some(s) = job.suspended_mut() else {
            return Ok(Wait::Answered);
        };
        s.answer = Some((outcome, by.clone()));
        let (tool, message_id) = (s.call.name.clone(), s.message_id);
        // Written with the resumed turn's other steps.
        let now = app.platform.clock.now_ms();
        s.run.log.push((
            now,
            crate::audit::Step::Approval {
                tool: tool.clone(),
                outcome: outcome.name().to_owned(),
                by: by.clone(),
            },
        ));
        app.inbox.save(key, job).await?;
        let chat = chat_of(job);
        if outcome == Outcome::AllowForAWhile {
            let grant = keys::grant(&conn.id, chat, &tool);
            let ttl = app.config.approvals.grant_ttl();
            if let Err(e) = app.platform.kv.put(&grant, b"1", Some(ttl)).await {
                tracing::warn!(error = %e, "grant not stored; the next call asks again");
            }
        }
        tracing::info!(key, tool, ?outcome, "approval answered");
        let answered = crate::events::Event::ApprovalAnswered {
            tool: tool.clone(),
            outcome: outcome.name().to_owned(),
        };
        app.emit(&super::trace(job), answered);
        if let Some(id) = message_id {
            let text = outcome_text(
                outcome,
                &tool,
                by.as_deref(),
                app.config.approvals.grant_minutes,
            );
            if let Err(e) = conn.bot.edit_text(chat, id, &text).await {
                tracing::debug!(error = %e, "approval message not edited");
            }
        }
        Ok(Wait::Answered)
    }
}

/// The chat of a job's update (0 when unreadable).
fn chat_of(job: &Job) -> i64 {
    Update::from_value(&job.update)
        .ok()
        .and_then(|u| u.chat().map(|c| c.id.0))
        .unwrap_or(0)
}

fn is_stop(m: &Message) -> bool {
    super::commands::parse(m.text().unwrap_or(""))
        .and_then(|(name, _)| super::commands::find(&name))
        .is_some_and(|c| c.name == "stop")
}

/// The approval message: the tool, its level and its arguments (secrets redacted, long
/// values cut), and the expiry.
pub fn approval_text(call: &PendingCall, expiry_minutes: u64) -> String {
    let level = match call.level {
        crate::tools::Level::Safe => "reads",
        crate::tools::Level::Guarded => "writes my own data or reads the web",
        crate::tools::Level::Unsafe => "acts outside the assistant",
    };
    let why = match &call.why {
        Some(why) => format!("\n\n⚠️ Asked because {why}."),
        None => String::new(),
    };
    format!(
        "🔐 Approval needed\nI want to run {} ({level}) with:\n{}{why}\n\nNot answered within {expiry_minutes} min counts as Deny.",
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
