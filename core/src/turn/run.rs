//! An agent turn: the agent runs from a state (new, resumed after an approval, or kept
//! after a crash) with "typing…" and the previews beside it, each step kept in the job and
//! published on the event bus; what it comes to is a checkpoint to deliver, a suspension for
//! an approval, or a failure. Its bookkeeping (spend, audit) is built here and written beside
//! the delivery.

use clawless_platform::PortError;

use super::progress::{Progress, MAX_SUSPENDED_BYTES};
use super::{Answer, Checkpoint, Failure, Reply, Turn};
use crate::agent::{Failed, RunState, Step as AgentStep, Verdict};
use crate::app::App;
use crate::connector::Connector;
use crate::inbox::Suspended;
use crate::llm::ChatMessage;
use crate::session;
use crate::telegram::api::Target;
use crate::telegram::render::{document_part, render_parts};
use crate::telegram::Message;
use crate::tools::ToolContext;

/// The bookkeeping of `msg`'s turn by `agent`: its spend and audit `steps` (numbered from
/// `first_seq`); `None` when there is none.
pub(super) fn books(
    msg: &Message,
    agent: &str,
    spend: crate::usage::Tally,
    first_seq: u32,
    steps: Vec<(u64, crate::audit::Step)>,
) -> Option<Box<crate::usage::Books>> {
    if steps.is_empty() && spend.is_empty() {
        return None;
    }
    let user = msg.from.as_ref().map_or(0, |u| u.id.0);
    let models = crate::usage::split_by_model(agent, spend, &steps);
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
        models,
    }))
}

/// Writes a turn's bookkeeping: the spend counters and the audit entries, side by side.
/// Failures are logged; the answer never waits on them.
pub(super) async fn keep_books(
    app: &App,
    conn: &Connector,
    books: Option<Box<crate::usage::Books>>,
) {
    let Some(b) = books else {
        return;
    };
    let ledger = app.ledger();
    let retention = app.config.audit.retention();
    let (counted, audited) = futures::future::join(
        ledger.add(&conn.id, b.user, b.chat, b.spend, &b.models),
        crate::audit::write(&*app.platform.kv, &conn.id, &b.audit, retention),
    )
    .await;
    if let Err(e) = counted {
        tracing::warn!(error = %e, "usage not counted");
    }
    if let Err(e) = audited {
        tracing::warn!(error = %e, "audit entries not written");
    }
}

/// Writes the books of `state`'s steps not written yet (its spend since the last books, its
/// audit entries), and marks them written in `state`, for a turn that goes on elsewhere: a
/// retry after a failure, an invocation after a pause. A crash before `state` is kept again
/// writes them again (the same audit keys; the spend counted twice).
async fn keep_books_so_far(
    app: &App,
    conn: &crate::connector::Routed<'_>,
    msg: &Message,
    state: &mut RunState,
) {
    let steps = std::mem::take(&mut state.log);
    let first_seq = state.logged;
    let logged = first_seq.saturating_add(steps.len() as u32);
    let spent = state.usage.since(&state.recorded);
    let books = books(msg, &conn.agent.config.id, spent, first_seq, steps);
    keep_books(app, conn, books).await;
    state.recorded = state.usage;
    state.logged = logged;
}

/// The checkpoint of a finished agent turn.
pub(super) fn turn_reply(
    app: &App,
    conn: &Connector,
    msg: &Message,
    reply: String,
    messages: Vec<crate::llm::ChatMessage>,
    (books, speak): (Option<Box<crate::usage::Books>>, bool),
) -> Reply {
    let mut parts = render_parts(&reply);
    if parts.len() > app.config.limits.max_reply_parts {
        parts = vec![document_part(&reply)];
    }
    if let Some(voice) = speak.then(|| super::voice::spoken(app, &reply)).flatten() {
        parts.insert(0, voice);
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
        taint: None,
        books,
    })
}

/// What an agent turn reads before the model is asked, read side by side: the history (or a
/// fresh session), the chat's model and voice setting, its grants and the sender's budget.
pub(super) struct Ready {
    session: Result<session::Session, PortError>,
    model: Option<String>,
    speak: bool,
    granted: Result<std::collections::BTreeSet<String>, PortError>,
    budget: Result<Option<crate::usage::Left>, PortError>,
}

impl Ready {
    /// The untrusted text the conversation read since the person last wrote
    /// ([`session::Session::tainted`]).
    pub(super) fn tainted(&self) -> Option<String> {
        self.session.as_ref().ok()?.tainted.clone()
    }
}

impl Turn<'_> {
    /// Reads what [`Turn::run_agent_ready`] needs, all at once.
    pub(super) async fn ready(&self) -> Ready {
        let Turn { app, conn, msg, .. } = *self;
        let key = session::session_key(&conn.id, msg);
        let scope = conn.memory_scope_of(msg);
        let user = msg.from.as_ref().map_or(0, |u| u.id.0);
        let (session, model, speak, granted, budget) = futures::future::join5(
            current_session(app, &key, (conn, &scope)),
            super::model::chosen_model(app, conn, msg.chat.id.0),
            super::voice::speaks(app, conn, msg),
            super::reports::granted(app, conn, msg.chat.id.0),
            super::reports::budget(app, &conn.id, user),
        )
        .await;
        Ready {
            session,
            model,
            speak,
            granted,
            budget,
        }
    }

    /// A turn the bot starts on its own in this chat (a scheduled task, a webhook's delivery,
    /// a watch's change): `told` is its message, with memories recalled for `about`, read
    /// beside the session. `untrusted` names what it carries from outside; without it, what
    /// the conversation read since the person last wrote still steers nothing without them.
    /// Its answer stands alone, replying to no message.
    pub(super) async fn run_own(
        &self,
        told: String,
        about: &str,
        untrusted: Option<String>,
        progress: &Progress<'_>,
    ) -> Result<Reply, Answer> {
        let Turn { app, conn, msg, .. } = *self;
        let scope = conn.memory_scope_of(msg);
        let life = app.lifecycle();
        let (recall, skills, ready) = futures::future::join3(
            life.recall(&scope, about),
            conn.agent.skills_block(&scope),
            self.ready(),
        )
        .await;
        let mut run = conn
            .agent
            .begin(ChatMessage::user_text(told), &recall, &skills);
        match untrusted {
            Some(what) => run.tainted = Some(what),
            None => run.carry(ready.tainted()),
        }
        let mut reply = self.run_agent_ready(run, Some(progress), ready).await?;
        if let Reply::Send(cp) = &mut reply {
            cp.reply_to = None;
        }
        Ok(reply)
    }

    /// Runs the agent from `run` for `msg`'s conversation, with "typing…" beside it; with
    /// `progress`, each step is kept in the job (see `progress.rs`).
    pub(super) async fn run_agent(
        &self,
        run: RunState,
        progress: Option<&Progress<'_>>,
    ) -> Result<Reply, Answer> {
        let ready = self.ready().await;
        self.run_agent_ready(run, progress, ready).await
    }

    /// [`Turn::run_agent`] with its reads done (beside the recall, for a new turn).
    pub(super) async fn run_agent_ready(
        &self,
        run: RunState,
        progress: Option<&Progress<'_>>,
        ready: Ready,
    ) -> Result<Reply, Answer> {
        let Turn { app, conn, msg, .. } = *self;
        let scope = conn.memory_scope_of(msg);
        let Ready {
            session,
            model,
            speak,
            granted,
            budget,
        } = ready;
        let history = session::for_model(
            session.map_err(Failure::storage)?,
            app.config.session.history_window,
        );
        let granted = granted.map_err(Failure::storage)?;
        let origin = Some(crate::schedule::Origin::of(&conn.id, msg));
        let ctx = ToolContext {
            scope,
            granted,
            origin,
            depth: 0,
            budget: None,
            // Unique to this update's turn (its job's trace: connector and update id; a
            // message id is not, for a reminder's firing), kept across crashes.
            call: match progress {
                Some(p) => format!("{}/{}", p.trace, msg.chat.id.0),
                None => format!("{}/{}/{}", conn.id, msg.chat.id.0, msg.message_id),
            },
            tainted: None,
            allowance: None,
        };
        let budget = budget.map_err(Failure::storage)?;
        let recorded = run.recorded;
        let first_seq = run.logged;
        let target = Target {
            chat_id: msg.chat.id.0,
            thread_id: msg.topic(),
        };
        let round = run.round;
        let allowance = progress.map(|p| p.allowance());
        // The reply shows as it is written (a draft, or a placeholder in groups).
        let drafts = super::draft::drafts_for(app, msg);
        let on_text = |text: &str| {
            if let Some(d) = &drafts {
                d.set(text);
            }
        };
        // Each model and tool call goes on the event bus as it ends.
        let trace = progress.map(|p| p.trace.clone()).unwrap_or_default();
        let on_step = |at: u64, step: &crate::audit::Step| {
            if let Some(e) = crate::events::Event::of_step(step) {
                app.events.publish(at, &trace, e);
            }
        };
        let opts = crate::agent::RunOptions {
            on_step: Some(&on_step),
            budget,
            model: model.as_deref(),
            on_text: drafts
                .is_some()
                .then_some(&on_text as crate::llm::OnText<'_>),
            saver: progress.map(|p| p as &dyn crate::agent::Saver),
            allowance,
            ..Default::default()
        };
        let turn = conn.agent.run(&history, run, &ctx, opts);
        let beside = super::draft::Beside {
            conn,
            target,
            message_id: msg.message_id,
            drafts: drafts.as_ref(),
            allowance,
        };
        let step = super::draft::beside_turn(app, beside, turn).await;
        let mut step = match step {
            Ok(step) => step,
            Err(failed) => {
                // The turn fails (and is retried); what this attempt spent and did, the
                // failed call included, is kept now, as no delivery will carry it.
                let Failed { error, mut state } = *failed;
                keep_books_so_far(app, conn, msg, &mut state).await;
                // The retry goes on from the last step, its books starting after these.
                if let Some(p) = progress {
                    p.keep(state);
                }
                // The chain as the chat ordered it: its last link is the one that failed last.
                let chain = conn.agent.chain.preferring(model.as_deref());
                return Err(Answer::Failed(Failure::model(&error, &chain)));
            }
        };
        if let AgentStep::Pause(mut state) = step {
            // Its books so far are written now, not with the answer: each invocation writes
            // its own steps' entries, within its storage calls (see `crate::allowance`), and
            // the invocation that goes on starts after them.
            return match progress {
                Some(p) => {
                    tell_owner_of_leaks(conn, msg, &state.log).await;
                    keep_books_so_far(app, conn, msg, &mut state).await;
                    p.keep(*state);
                    Err(Answer::HandOff)
                }
                None => Err(Answer::Lost),
            };
        }
        let (spent, steps) = match &mut step {
            AgentStep::Lost | AgentStep::Pause(_) => return Err(Answer::Lost),
            AgentStep::Done(out) => (out.usage, std::mem::take(&mut out.log)),
            AgentStep::Ask { state, .. } => {
                let steps = std::mem::take(&mut state.log);
                state.logged = first_seq.saturating_add(steps.len() as u32);
                (state.usage, steps)
            }
        };
        tell_owner_of_leaks(conn, msg, &steps).await;
        // Kept in the job and written beside the delivery (a retry of the job runs the model
        // again and counts that too).
        let books = books(
            msg,
            &conn.agent.config.id,
            spent.since(&recorded),
            first_seq,
            steps,
        );
        match step {
            AgentStep::Lost | AgentStep::Pause(_) => Err(Answer::Lost),
            AgentStep::Done(out) => {
                // Pictures made this turn go first, then the voice note, then the text.
                let pictures = super::pictures::photo_parts(&out.messages, &ctx.scope);
                let mut reply = turn_reply(app, conn, msg, out.reply, out.messages, (books, speak));
                if let Reply::Send(cp) = &mut reply {
                    cp.parts.splice(0..0, pictures);
                    // What the turn read stays in the history: its conversation keeps it.
                    cp.taint = out.tainted;
                }
                Ok(reply)
            }
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
                    keep_books(app, conn, books).await;
                    state.verdicts.insert(call.id, Verdict::Denied);
                    return Box::pin(self.run_agent(state, progress)).await;
                }
                let from = msg.from.as_ref().map_or(0, |u| u.id.0);
                let now = app.platform.clock.now_ms();
                Ok(Reply::Ask(Box::new(Suspended {
                    id: format!("{}.{}", msg.message_id, state.round.max(round)),
                    run: state,
                    call,
                    asker: from,
                    message_id: None,
                    expires_ms: now.saturating_add(app.config.approvals.expiry_ms()),
                    answer: None,
                    books,
                })))
            }
        }
    }
}

/// Tells the connector's owner, in their private chat, of each call this turn refused
/// because it would have carried a secret out (best effort; the model was told, the audit
/// trail has it).
async fn tell_owner_of_leaks(conn: &Connector, msg: &Message, steps: &[(u64, crate::audit::Step)]) {
    let refused: Vec<&str> = steps
        .iter()
        .filter_map(|(_, s)| match s {
            crate::audit::Step::Tool { name, decision, .. }
                if decision == crate::agent::LEAK_REFUSED =>
            {
                Some(name.as_str())
            }
            _ => None,
        })
        .collect();
    let Some(owner) = conn.owner else {
        return;
    };
    if refused.is_empty() {
        return;
    }
    let text = format!(
        "🛑 I refused to run {} in chat {}: the call would have carried one of my secrets (or a key) out. The model was told; /audit there shows it. If a page or a forwarded message asked for it, it was an attempt to steal it.",
        refused.join(", "),
        msg.chat.id.0
    );
    let to = Target {
        chat_id: owner,
        thread_id: None,
    };
    if let Err(e) = conn.bot.send_message(to, &text, false, None).await {
        tracing::info!(connector = %conn.id, error = %e, "the owner was not told of a refused leak");
    }
}

/// The session, or a fresh one when it has been idle past `idle_minutes`: the idle one is
/// ended first, its summary going to the memory `scope` (see
/// [`crate::memory::lifecycle::Lifecycle::end_session`]).
async fn current_session(
    app: &App,
    key: &crate::ids::SessionKey,
    (conn, scope): (&crate::connector::Routed<'_>, &crate::ids::Scope),
) -> Result<session::Session, clawless_platform::PortError> {
    let (idle, now) = (app.config.session.idle_ms(), app.platform.clock.now_ms());
    let (s, ended) = session::load_current(&*app.platform.kv, key, idle, now).await?;
    if let Some(old) = ended {
        app.lifecycle()
            .end_session(&conn.agent.chain, scope, key, &old)
            .await;
    }
    Ok(s)
}
