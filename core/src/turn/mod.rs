//! The turn stage: one inbox job from decision to delivery. [`decide`] reads the update
//! (access, group gating, commands from [`commands`]) without I/O; a turn runs the agent with
//! "typing…" beside it; the answer is checkpointed in the job before anything is sent; then
//! [`deliver`] applies the session turn once and sends each part once.

mod agents;
pub mod approval;
mod background;
pub mod button;
pub mod commands;
mod compact;
pub mod decide;
mod deliver;
mod draft;
mod hooks;
mod media;
mod model;
pub(crate) mod pairing;
mod pictures;
mod progress;
mod reminders;
mod reports;
mod run;
mod tap;
mod voice;
mod watch;
#[cfg(feature = "archive")]
pub(crate) use voice::SPOKEN_DIR;

use clawless_platform::PortError;

use crate::app::App;
use crate::connector::Routed;
use crate::inbox::{Checkpoint, Job, Lease, Stage};
use crate::keys;
use crate::llm::{LlmError, ModelChain};
use crate::session;
use crate::telegram::api::Target;
use crate::telegram::render::plain_parts;
use crate::telegram::{Message, TelegramError, Update};
use decide::Decision;

/// A plain-text reply (no session turn) with `buttons`, one a row, `(label, callback data)`,
/// under its last part.
pub(super) fn with_buttons(
    text: &str,
    buttons: Vec<(String, String)>,
    reply_to: Option<i64>,
    books: Option<Box<crate::usage::Books>>,
) -> Reply {
    let mut parts = plain_parts(text);
    if let Some(last) = parts.last_mut() {
        last.buttons = buttons;
    }
    Reply::Send(Checkpoint {
        parts,
        sent: 0,
        reply_to,
        session_turn: None,
        taint: None,
        books,
    })
}

/// The trace id of a job's events: `<connector>/<update id>`.
pub(crate) fn trace(job: &Job) -> String {
    format!("{}/{}", job.connector, job.update_id)
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

/// Why [`Turn::answer`] gave no reply.
enum Answer {
    Failed(Failure),
    /// Another drainer took the lane.
    Lost,
    /// The invocation's allowance is spent: the turn is kept in the job to go on elsewhere.
    HandOff,
}

impl From<Failure> for Answer {
    fn from(f: Failure) -> Answer {
        Answer::Failed(f)
    }
}

/// What deciding on (or resuming) a job came to.
pub(super) enum Reply {
    /// Nothing to send.
    Nothing,
    Send(Checkpoint),
    /// The turn waits for an approval.
    Ask(Box<crate::inbox::Suspended>),
}

/// One job's turn, built once per job by `process` once the update is read and the
/// conversation routed: what every step of it needs besides the job itself.
#[derive(Clone, Copy)]
pub(super) struct Turn<'a> {
    pub(super) app: &'a App,
    /// The job's inbox key.
    pub(super) key: &'a str,
    /// The connector, routed to the agent that answers this conversation.
    pub(super) conn: &'a Routed<'a>,
    pub(super) msg: &'a Message,
    /// Where its replies go: the chat and, in forums, the topic.
    pub(super) target: Target,
    pub(super) lease: Lease<'a>,
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
    /// The turn is kept in the job for a fresh invocation (see [`crate::allowance`]).
    HandOff,
}

/// Processes a job while holding `lease`, checking the lease before every write that
/// matters.
pub(crate) async fn process(
    app: &App,
    key: &str,
    mut job: Job,
    lease: Lease<'_>,
) -> Result<Step, PortError> {
    let parsed = Update::from_value(&job.update);
    let (Ok(update), Some(conn)) = (parsed, app.connectors.get(&job.connector)) else {
        tracing::error!(
            key,
            "job names an unknown connector or holds an unreadable update; dropped"
        );
        app.inbox.finish(key, &job).await?;
        return Ok(Step::Done);
    };
    if let crate::telegram::UpdateKind::CallbackQuery(q) = &update.kind {
        // An approval's tap reaches here only when no turn waits for it: a turn waiting
        // for an answer takes the taps queued behind it (`approval::await_answer`).
        tap::button_tap(app, conn, q).await;
        app.inbox.finish(key, &job).await?;
        return Ok(Step::Done);
    }
    let Some(msg) = update.message() else {
        app.inbox.finish(key, &job).await?;
        return Ok(Step::Done);
    };
    // The agent that answers this conversation, for the rest of the job.
    let conn = &match hook_agent(app, conn, &job) {
        Some(agent) => crate::connector::Routed { conn, agent },
        None => agents::routed(app, conn, msg).await,
    };
    let target = Target {
        chat_id: msg.chat.id.0,
        thread_id: msg.topic(),
    };
    let turn = Turn {
        app,
        key,
        conn,
        msg,
        target,
        lease,
    };
    let mut ended = "answered";
    // An answered job goes straight to its delivery.
    if !matches!(job.stage, Stage::Answered(_)) {
        let answer = match job.stage {
            // A turn cut by a crash goes on from its last kept step.
            Stage::Running(_) => turn.go_on(&mut job).await,
            // A waiting turn is looked at in place: its state (up to 256 KB) is not copied
            // on every drain of its lane while it waits.
            Stage::Waiting(_) => match turn.await_answer(&mut job).await? {
                approval::Wait::Until(at) => return Ok(Step::RetryAt(at)),
                approval::Wait::LostLease => return Ok(Step::LostLease),
                approval::Wait::Answered => turn.resume(&mut job).await,
            },
            Stage::New | Stage::Gathered(_) | Stage::Answered(_) => turn.answer(&mut job).await,
        };
        let answer = match answer {
            Err(Answer::Lost) => return Ok(Step::LostLease),
            Err(Answer::HandOff) => {
                if !app.inbox.hold(lease).await? {
                    return Ok(Step::LostLease);
                }
                app.inbox.save(key, &job).await?;
                return Ok(Step::HandOff);
            }
            Err(Answer::Failed(f)) => Err(f),
            Ok(reply) => Ok(reply),
        };
        if !app.inbox.hold(lease).await? {
            tracing::warn!(key, "lane taken by another drainer; answer discarded");
            return Ok(Step::LostLease);
        }
        match answer {
            Ok(Reply::Send(cp)) => {
                job.stage = Stage::Answered(cp);
                app.inbox.save(key, &job).await?;
            }
            Ok(Reply::Ask(s)) => {
                turn_ended(app, &job, "waiting");
                return turn.suspend(&mut job, *s).await;
            }
            Ok(Reply::Nothing) => {
                app.inbox.finish(key, &job).await?;
                turn_ended(app, &job, "nothing");
                return Ok(Step::Done);
            }
            Err(failure) => {
                let reason = &failure.detail;
                if let Some(at) = app.inbox.retry_later(key, &mut job).await? {
                    tracing::warn!(key, attempt = job.attempts, %reason, "turn failed; will retry");
                    let retry = crate::events::Event::RetryScheduled {
                        attempt: job.attempts,
                        retry_at_ms: at,
                        reason: reason.chars().take(200).collect(),
                    };
                    app.emit(&trace(&job), retry);
                    return Ok(Step::RetryAt(at));
                }
                ended = "failed";
                tracing::error!(key, %reason, "turn failed for the last time; telling the user");
                let text = format!("Sorry, I could not answer that: {}", failure.user);
                // What the person said stays in the session, marked unanswered, so "try
                // again" or the next message has it.
                let run = match std::mem::take(&mut job.stage) {
                    Stage::Running(run) => Some(run),
                    _ => None,
                };
                let taint = run.as_ref().and_then(|run| run.tainted.clone());
                let session_turn = run.and_then(|run| {
                    let asked = run.messages.into_iter().next()?;
                    let key = session::session_key(&conn.id, msg);
                    let note = format!("[Not answered: {}]", failure.user);
                    Some((
                        key,
                        vec![asked, crate::llm::ChatMessage::assistant_text(note)],
                    ))
                });
                job.stage = Stage::Answered(Checkpoint {
                    parts: plain_parts(&text),
                    sent: 0,
                    reply_to: None,
                    session_turn,
                    taint,
                    books: None,
                });
                app.inbox.save(key, &job).await?;
            }
        }
    }
    // The bookkeeping goes out beside the answer; taken from the job first, so the saves
    // of the delivery do not keep it for a retry.
    let books = job.checkpoint_mut().and_then(|c| c.books.take());
    // A group's streamed reply may have a placeholder to edit into the first part.
    let preview = (app.config.streaming.groups && !msg.is_private())
        .then(|| keys::preview(&conn.id, msg.chat.id.0, msg.message_id));
    let (delivered, ()) = futures::future::join(
        turn.deliver(&mut job, preview, update.id),
        run::keep_books(app, conn, books),
    )
    .await;
    let (step, compact) = match delivered {
        Ok((step, compact)) => (Ok(step), compact),
        Err(e) => (Err(e), false),
    };
    if matches!(step, Ok(Step::Done)) {
        turn_ended(app, &job, ended);
    }
    if compact && matches!(step, Ok(Step::Done)) {
        // The answer is out: the user does not wait for this.
        if let Err(e) = compact::compact_session(app, conn, msg).await {
            tracing::warn!(error = %e, "compaction failed; the history is trimmed instead");
        }
    }
    step
}

/// The agent a hook's delivery names (`agent:` of the hook), if it names one.
fn hook_agent(
    app: &App,
    conn: &crate::connector::Connector,
    job: &Job,
) -> Option<std::sync::Arc<crate::agent::Agent>> {
    let Some(crate::schedule::Fire {
        what: crate::schedule::What::Hook { hook, .. },
        ..
    }) = &job.fire
    else {
        return None;
    };
    let agent = app.hooks.get(hook)?.config.agent.as_deref()?;
    conn.agent(agent).cloned()
}

/// Publishes the end of `job`'s turn, with the time since it was accepted.
fn turn_ended(app: &App, job: &Job, outcome: &str) {
    let now = app.platform.clock.now_ms();
    let latency_ms = match job.accepted_ms {
        0 => 0,
        at => now.saturating_sub(at),
    };
    let event = crate::events::Event::TurnEnded {
        outcome: outcome.to_owned(),
        latency_ms,
    };
    app.emit(&trace(job), event);
}

impl Turn<'_> {
    /// Decides and, for a turn, reads its media and runs the agent; a reminder's firing does
    /// what it holds.
    async fn answer(&self, job: &mut Job) -> Result<Reply, Answer> {
        let Turn {
            app,
            key,
            conn,
            msg,
            lease,
            ..
        } = *self;
        if let Some(fire) = job.fire.clone() {
            let progress = progress::Progress::new(app, key, job, lease);
            return self.fired(&fire, &progress).await;
        }
        let me = match decide::needs_identity(msg) {
            true => Some(
                agents::identity(app, conn)
                    .await
                    .map_err(Failure::telegram)?,
            ),
            false => None,
        };
        let mut gate = decide::Gate::of(conn, app.config.limits.max_input_chars);
        let mut decision = decide::decide(msg, me.as_ref(), &gate);
        if let Decision::Stranger(user) = decision {
            // Not in the config: one read of their pairing.
            let paired = app.pairings().is_paired(&conn.id, user).await;
            gate.paired = paired.map_err(Failure::storage)?;
            decision = decide::decide(msg, me.as_ref(), &gate);
        }
        let reply_to = (!msg.is_private()).then_some(msg.message_id);
        let text = match decision {
            Decision::Ignore(why) => {
                tracing::debug!(update_id = job.update_id, why, "not answered");
                return Ok(Reply::Nothing);
            }
            Decision::Stranger(_) => {
                return Ok(pairing::stranger_reply(app, conn, msg, job.update_id, reply_to).await?)
            }
            Decision::Reply(text) => text,
            Decision::Command(command, args) => {
                // A command is kept in the audit trail, written beside its reply.
                let step = crate::audit::Step::Command {
                    name: command.name.to_owned(),
                };
                let now = app.platform.clock.now_ms();
                let books = run::books(msg, "", Default::default(), 0, vec![(now, step)]);
                let ctx = commands::Ctx {
                    app,
                    conn,
                    msg,
                    args: &args,
                    reply_to,
                    books,
                };
                if command.needs_model && conn.agent.chain.links.is_empty() {
                    return Ok(ctx.text(commands::NO_MODEL));
                }
                return (command.run)(ctx)
                    .await
                    .map_err(|e| Answer::Failed(Failure::storage(e)));
            }
            Decision::Turn(text) => {
                match self.user_message(job, text).await? {
                    media::Input::Message(user) => {
                        let scope = conn.memory_scope_of(msg);
                        // Recall and the skills' listing are independent: read side by side.
                        let text = user.text();
                        let life = app.lifecycle();
                        // So are the history, the chat's settings and the budget.
                        let (recall, skills, ready) = futures::future::join3(
                            life.recall(&scope, &text),
                            conn.agent.skills_block(&scope),
                            self.ready(),
                        )
                        .await;
                        let mut run = conn.agent.begin(user, &recall, &skills);
                        run.tainted = msg.untrusted_source();
                        // After the entries of an attempt cut before the model saw the media.
                        run.logged = job.media().map_or(0, |m| m.logged);
                        let progress = progress::Progress::new(app, key, job, lease);
                        return self.run_agent_ready(run, Some(&progress), ready).await;
                    }
                    media::Input::Reply(text) => text,
                    media::Input::Lost => return Err(Answer::Lost),
                }
            }
        };
        Ok(Reply::Send(Checkpoint {
            parts: plain_parts(&text),
            sent: 0,
            reply_to,
            session_turn: None,
            taint: None,
            books: None,
        }))
    }

    /// Goes on with the turn kept in the job (see `progress.rs`) after a crash cut it.
    async fn go_on(&self, job: &mut Job) -> Result<Reply, Answer> {
        let Turn {
            app, key, lease, ..
        } = *self;
        let Some(run) = job.running().cloned() else {
            return Ok(Reply::Nothing);
        };
        tracing::info!(
            key,
            round = run.round,
            "turn goes on from its last kept step"
        );
        let fired = job.fire.is_some();
        let progress = progress::Progress::new(app, key, job, lease);
        let mut reply = self.run_agent(run, Some(&progress)).await?;
        if let (true, Reply::Send(cp)) = (fired, &mut reply) {
            // A firing's answer goes to the chat, not as a reply (as `fired` does).
            cp.reply_to = None;
        }
        Ok(reply)
    }
}
