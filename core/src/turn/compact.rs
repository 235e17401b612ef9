//! A long conversation compacted, not cut: after a turn is delivered, a session past
//! `session.compact_tokens` (or `history_window` messages) has its older turns summarised by
//! the agent's model, their facts saved to memory first (`memory/compact.rs`). `/compact`
//! does it on demand, `/context` shows how full the conversation is.

use clawless_platform::PortError;

use crate::app::App;
use crate::connector::Routed;
use crate::memory::compact::Compacted;
use crate::session::{self, estimate_tokens};
use crate::telegram::Message;

/// Compacts the session of `msg`'s conversation and saves it.
pub(super) async fn compact_session(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
) -> Result<Compacted, PortError> {
    let key = session::session_key(&conn.id, msg);
    let mut s = session::load(&*app.platform.kv, &key).await?;
    let scope = conn.memory_scope_of(msg);
    let done = app
        .lifecycle()
        .compact(
            &conn.agent.chain,
            &scope,
            &key,
            &mut s,
            app.config.session.keep_recent,
        )
        .await;
    if done.folded > 0 {
        session::save(&*app.platform.kv, &key, &s).await?;
        tracing::info!(
            folded = done.folded,
            facts = done.facts,
            "session compacted"
        );
        let folded = crate::events::Event::Compacted {
            folded: done.folded,
        };
        app.emit("", folded);
    }
    Ok(done)
}

/// `/compact`: compacts now and says what it did.
pub(super) async fn compact_reply(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
) -> Result<String, PortError> {
    let done = compact_session(app, conn, msg).await?;
    if done.folded == 0 {
        return Ok(format!(
            "Nothing to compact yet: the conversation is within the last {} messages I keep word for word.",
            app.config.session.keep_recent
        ));
    }
    let facts = match done.facts {
        true => " What is worth remembering went to memory first.",
        false => "",
    };
    let how = match done.by_model {
        true => "",
        false => " (The model could not be reached: the summary lists the topics only.)",
    };
    Ok(format!(
        "Compacted: {} older messages are now a summary; the recent ones stay as they were.{facts}{how}",
        done.folded
    ))
}

/// `/context`: how much of the model's context this conversation takes.
pub(super) async fn context_reply(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
) -> Result<String, PortError> {
    let key = session::session_key(&conn.id, msg);
    let s = session::load(&*app.platform.kv, &key).await?;
    let cfg = &app.config.session;
    let history = estimate_tokens(&s.messages);
    let mut lines = vec![format!(
        "History: {} messages, about {history} tokens.",
        s.messages.len()
    )];
    match cfg.compact_tokens {
        0 => lines.push(format!(
            "Compaction is off: past {} messages the oldest are dropped.",
            cfg.history_window
        )),
        budget => lines.push(format!(
            "Older turns are summarised at about {budget} tokens or {} messages: {}% full.",
            cfg.history_window,
            (history.saturating_mul(100) / budget.max(1)).max(
                (s.messages.len() as u64).saturating_mul(100) / cfg.history_window.max(1) as u64
            )
        )),
    }
    lines.push(match &s.summary {
        Some(summary) => format!(
            "Summary of older turns: about {} tokens.",
            summary.len() / 4
        ),
        None => "No older turns summarised yet.".into(),
    });
    lines.push(format!(
        "Instructions: about {} tokens.",
        conn.agent.config.system_prompt.len() / 4
    ));
    lines.push("/compact summarises the older turns now; /new starts afresh.".into());
    Ok(lines.join("\n"))
}
