//! Which agent answers a conversation, and `/agent`. `routing.yaml` routes each message (see
//! [`crate::config::routing`]); a conversation whose route lists several `agents:` may switch
//! among them with `/agent NAME` or a button (`ag:<index>`), kept in `agent/<session key>`
//! (read only where the route offers a choice, so a single-agent chat costs no read).
//! Switching ends the conversation as `/new` does: its history belongs to the other persona.

use std::sync::Arc;

use clawless_platform::{KvExt, PortError};

use super::button::Button;
use super::Reply;
use crate::agent::Agent;
use crate::app::App;
use crate::config::Route;
use crate::connector::{place_of, Connector, Routed};
use crate::keys;
use crate::session;
use crate::telegram::types::CallbackQuery;
use crate::telegram::Message;
use crate::telegram::{BotIdentity, TelegramError};

/// A tap as the message it stands for: the button's chat and topic, from the person tapping
/// (whose conversation it is in a group).
fn tap_message(q: &CallbackQuery) -> Option<Message> {
    let mut m = q.message.as_deref()?.clone();
    m.from = Some(q.from.clone());
    Some(m)
}

/// `conn` with the agent that answers `msg`: its route's, or the one the conversation
/// chose with `/agent` while its route still allows it.
pub(crate) async fn routed<'a>(app: &App, conn: &'a Connector, msg: &Message) -> Routed<'a> {
    let route = conn.route(Some(&place_of(msg)));
    let mut id = route.agent.as_str();
    let chosen = match route.allowed().len() > 1 {
        true => chosen_agent(app, conn, msg).await,
        false => None,
    };
    if let Some(c) = chosen.as_deref() {
        if route.allowed().iter().any(|a| a == c) {
            id = c;
        }
    }
    let agent = conn.agent(id).unwrap_or(conn.default_agent()).clone();
    Routed { conn, agent }
}

/// `conn` with the agent of the conversation a tap was made in (the connector's default
/// when Telegram did not include the button's message).
pub(super) async fn routed_tap<'a>(
    app: &App,
    conn: &'a Connector,
    q: &CallbackQuery,
) -> Routed<'a> {
    match tap_message(q) {
        Some(m) => routed(app, conn, &m).await,
        None => Routed {
            conn,
            agent: conn.default_agent().clone(),
        },
    }
}

/// The agent `msg`'s conversation chose with `/agent`, if any could be read.
async fn chosen_agent(app: &App, conn: &Connector, msg: &Message) -> Option<String> {
    let key = keys::chat_agent(&session::session_key(&conn.id, msg));
    match app.platform.kv.get_json::<String>(&key).await {
        Ok(id) => id,
        Err(e) => {
            // The routed agent answers; the choice is back once storage is.
            tracing::warn!(error = %e, "the conversation's agent could not be read");
            None
        }
    }
}

/// `/agent` and `/agent NAME`: the agents this chat may use with a button each, or a
/// switch to the one named (by id or name, any case).
pub(super) async fn agent_reply(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
    arg: &str,
    reply_to: Option<i64>,
    books: Option<Box<crate::usage::Books>>,
) -> Result<Reply, PortError> {
    let route = conn.route(Some(&place_of(msg)));
    let allowed = allowed_agents(conn, route);
    let current = conn.agent.config.display_name();
    if !arg.is_empty() {
        let text = match allowed.iter().find(|a| named(a, arg)) {
            Some(to) => switch(app, conn, msg, route, to).await?,
            None => format!(
                "This chat cannot use {:?}. It may use: {}.",
                arg.chars().take(64).collect::<String>(),
                ids(&allowed)
            ),
        };
        return Ok(super::with_buttons(&text, Vec::new(), reply_to, books));
    }
    let text = match allowed.len() {
        0 | 1 => format!("This chat talks with {current}, the only agent it may use."),
        _ => {
            let mut lines = vec![format!("This chat talks with {current}. It may use:")];
            for a in &allowed {
                let mark = match Arc::ptr_eq(a, &conn.agent) {
                    true => " (current)",
                    false => "",
                };
                let (name, id) = (a.config.display_name(), &a.config.id);
                lines.push(format!("• {name}: /agent {id}{mark}"));
            }
            lines.push("Switching starts a fresh conversation.".into());
            lines.join("\n")
        }
    };
    let buttons = match allowed.len() > 1 {
        true => allowed
            .iter()
            .enumerate()
            .map(|(i, a)| (a.config.display_name(), Button::Agent(i).encode()))
            .collect(),
        false => Vec::new(),
    };
    Ok(super::with_buttons(&text, buttons, reply_to, books))
}

/// A tap on an `/agent` button ([`Button::Agent`]: `index` of the agents offered there).
pub(super) async fn agent_tap(app: &App, conn: &Connector, q: &CallbackQuery, index: usize) {
    let msg = tap_message(q);
    let may = super::pairing::may_tap(app, conn, q).await;
    let (text, alert) = match &msg {
        _ if !may => (
            "Only people this bot serves can choose who answers.".to_owned(),
            true,
        ),
        Some(msg) => {
            let routed = routed(app, conn, msg).await;
            let route = conn.route(Some(&place_of(msg)));
            let allowed = allowed_agents(&routed, route);
            match allowed.get(index) {
                Some(to) => match switch(app, &routed, msg, route, to).await {
                    Ok(text) => (text, false),
                    Err(e) => failed(&e),
                },
                None => ("That agent is no longer offered here.".to_owned(), true),
            }
        }
        None => ("That button is no longer valid.".to_owned(), false),
    };
    if let Err(e) = conn.bot.answer_callback(&q.id, &text, alert).await {
        tracing::debug!(error = %e, "answerCallbackQuery failed");
    }
}

/// Makes `to` the agent of `msg`'s conversation: the current conversation ends as with
/// `/new` (its summary to the current agent's memory), then the choice is kept (or
/// forgotten, when `to` is the route's own agent). In that order, so a retry after a
/// failure does both.
async fn switch(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
    route: &Route,
    to: &Arc<Agent>,
) -> Result<String, PortError> {
    let name = to.config.display_name();
    if Arc::ptr_eq(to, &conn.agent) {
        return Ok(format!("This chat already talks with {name}."));
    }
    let key = session::session_key(&conn.id, msg);
    let old = session::load(&*app.platform.kv, &key).await?;
    if !old.messages.is_empty() {
        app.lifecycle()
            .end_session(&conn.agent.chain, &conn.memory_scope_of(msg), &key, &old)
            .await;
    }
    session::clear(&*app.platform.kv, &key).await?;
    let choice = keys::chat_agent(&key);
    match to.config.id == route.agent {
        true => app.platform.kv.delete(&choice).await?,
        false => {
            app.platform
                .kv
                .put_json(&choice, &to.config.id, None)
                .await?
        }
    }
    Ok(format!(
        "Now talking with {name}. This is a fresh conversation."
    ))
}

/// Our own id and username: memory, then Kv, then `getMe`.
pub(super) async fn identity(app: &App, conn: &Connector) -> Result<BotIdentity, TelegramError> {
    if let Some(me) = conn.cached_identity() {
        return Ok(me);
    }
    let key = keys::bot_identity(&conn.id);
    let me = match clawless_platform::KvExt::get_json::<BotIdentity>(&*app.platform.kv, &key).await
    {
        Ok(Some(me)) => me,
        _ => {
            let me = conn.bot.get_me().await?;
            let ttl = Some(std::time::Duration::from_secs(86_400));
            if let Err(e) =
                clawless_platform::KvExt::put_json(&*app.platform.kv, &key, &me, ttl).await
            {
                tracing::warn!(error = %e, "could not cache getMe");
            }
            me
        }
    };
    *conn.identity.lock().unwrap_or_else(|e| e.into_inner()) = Some(me.clone());
    Ok(me)
}

/// The agents `route` lets a chat use, in its order (the route's own first).
fn allowed_agents(conn: &Connector, route: &Route) -> Vec<Arc<Agent>> {
    route
        .allowed()
        .iter()
        .filter_map(|id| conn.agent(id).cloned())
        .collect()
}

/// Whether `arg` names `agent`: its id or its name, in any case.
fn named(agent: &Agent, arg: &str) -> bool {
    let arg = arg.trim();
    agent.config.id.eq_ignore_ascii_case(arg)
        || agent
            .config
            .name
            .as_deref()
            .is_some_and(|n| n.to_lowercase() == arg.to_lowercase())
}

fn ids(agents: &[Arc<Agent>]) -> String {
    let ids: Vec<&str> = agents.iter().map(|a| a.config.id.as_str()).collect();
    ids.join(", ")
}

fn failed(e: &PortError) -> (String, bool) {
    tracing::warn!(error = %e, "the conversation's agent not changed");
    (
        "I could not change it right now; try again in a while.".to_owned(),
        true,
    )
}
