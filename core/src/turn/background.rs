//! A background sub-agent's jobs (see [`crate::spawn`]). The task kept by `spawn` with
//! `background: true` fires like a reminder, but into the chat's task lane
//! ([`Lane::of_tasks`]), so the chat goes on being answered while it runs: the child runs
//! as the chat's agent's, and its answer (or why there is none) is posted to the chat from
//! there. The answer joins the chat's session through a second job, [`What::Done`], in the
//! chat's lane, since only that lane writes the session. The second job's update id is the
//! task's own ([`done_update_id`]), so a task run again after a crash never records its
//! answer twice.

use super::{Answer, Checkpoint, Failure, Reply};
use crate::allowance::{Allowance, Work};
use crate::app::App;
use crate::connector::Routed;
use crate::ids::Lane;
use crate::inbox::Job;
use crate::llm::ChatMessage;
use crate::schedule::{done_update_id, Fire, What};
use crate::session;
use crate::telegram::Message;
use crate::tools::ToolContext;

/// Runs background task `fire` (agent `agent` on `task`) within the invocation's allowance,
/// posts what came of it, and hands it to the chat's lane for the session. A task whose first
/// model call does not fit what the invocation has left is handed on before it begins; one
/// stopped later by the allowance posts what it found (see [`crate::spawn`]).
#[allow(clippy::too_many_arguments)]
pub(super) async fn background_task(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
    fire: &Fire,
    agent: &str,
    task: &str,
    tools: Option<Vec<String>>,
    within: &Allowance,
) -> Result<Reply, Answer> {
    if !within.may_fit(app.platform.clock.now_ms(), Work::Model) {
        return Err(Answer::HandOff);
    }
    let id = fire.reminder;
    let chat = msg.chat.id.0;
    let user = msg.from.as_ref().map_or(0, |u| u.id.0);
    let origin = crate::schedule::Origin::of(&conn.id, msg);
    let ctx = ToolContext {
        scope: conn.memory_scope_of(msg),
        granted: super::reports::granted(app, conn, chat)
            .await
            .map_err(Failure::storage)?,
        origin: Some(origin.clone()),
        depth: 0,
        // The spend caps hold for a background task as for a turn.
        budget: super::reports::budget(app, &conn.id, user)
            .await
            .map_err(Failure::storage)?,
        // A task run again after a crash: its keyed tools find what the first run did.
        call: format!("{}/task{id}", conn.id),
        tainted: None,
        allowance: Some(within.clone()),
    };
    tracing::info!(connector = %conn.id, task = id, agent, "background task runs");
    let (answer, reported) =
        crate::spawn::run_fired(&conn.agent, &app.spawn, &ctx, agent, task, tools).await;
    let reply = match answer {
        Ok(text) => format!("Background task #{id} ({agent}) is done:\n\n{text}"),
        Err(e) => format!("Background task #{id} ({agent}) did not finish: {e}"),
    };
    // The session's record, in the chat's lane, ahead of what waits there.
    let update_id = done_update_id(id);
    let what = What::Done {
        agent: agent.to_owned(),
        task: task.to_owned(),
        answer: reply.clone(),
    };
    let done = Fire {
        reminder: id,
        at_ms: fire.at_ms,
        what,
    };
    let now = app.platform.clock.now_ms();
    let done = Job::of_firing(&conn.id, update_id, &origin, done, now);
    let lane = Lane::of_chat(&conn.id, chat);
    if !app
        .inbox
        .accept(&lane, &done)
        .await
        .map_err(Failure::storage)?
    {
        tracing::info!(connector = %conn.id, task = id, "the answer was already handed to the chat");
    }
    // The child's steps come marked with its agent.
    let books = super::run::books(msg, agent, reported.usage, 0, reported.steps);
    let mut out = super::run::turn_reply(app, conn, msg, reply, Vec::new(), (books, false));
    if let Reply::Send(cp) = &mut out {
        cp.reply_to = None;
        cp.session_turn = None;
    }
    Ok(out)
}

/// A background task's answer, posted already, joins the chat's session (so the
/// conversation's agent knows what came of it); nothing is sent.
pub(super) fn background_done(
    conn: &Routed<'_>,
    msg: &Message,
    fire: &Fire,
    agent: &str,
    task: &str,
    answer: &str,
) -> Reply {
    let asked = ChatMessage::user_text(format!(
        "[Background task #{}, handed to {agent} earlier:]\n{task}",
        fire.reminder
    ));
    Reply::Send(Checkpoint {
        parts: Vec::new(),
        sent: 0,
        reply_to: None,
        session_turn: Some((
            session::session_key(&conn.id, msg),
            vec![asked, ChatMessage::assistant_text(answer.to_owned())],
        )),
        // What the sub-agent read is not known here; its answer may carry any of it.
        taint: Some(format!("the answer of background task #{}", fire.reminder)),
        books: None,
    })
}
