//! `/model`: a button per model of the agent's chain; a tap by a person the bot serves makes
//! it the chat's first choice (`model/<connector>/<chat>`), the rest of the chain staying as
//! its fallbacks. "Default" forgets the choice.

use clawless_platform::{KvExt, PortError};

use super::button::Button;
use super::Reply;
use crate::app::App;
use crate::connector::{Connector, Routed};
use crate::keys;
use crate::llm::chain::Link;
use crate::llm::ModelChain;
use crate::telegram::types::CallbackQuery;
use crate::telegram::Message;

/// A short tag of a model's label (FNV-1a, 32 bits, in hex): enough to tell two chains' models
/// apart in a button, not a secret.
fn tag(label: &str) -> String {
    let hash = label.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{hash:08x}")
}

/// The model `chat` chose with `/model`, if it is still in the agent's chain.
pub(super) async fn chosen_model(app: &App, conn: &Routed<'_>, chat: i64) -> Option<String> {
    let key = keys::chat_model(&conn.id, chat);
    match app.platform.kv.get_json::<String>(&key).await {
        Ok(label) => label.filter(|l| conn.agent.chain.links.iter().any(|k| &k.label == l)),
        Err(e) => {
            // The default chain answers; the choice is back once storage is.
            tracing::warn!(error = %e, "the chat's model could not be read");
            None
        }
    }
}

/// The agent's chain as `chat` uses it: its chosen model first.
pub(super) async fn chain_for(app: &App, conn: &Routed<'_>, chat: i64) -> ModelChain {
    let chosen = chosen_model(app, conn, chat).await;
    conn.agent.chain.preferring(chosen.as_deref())
}

/// `/model`: the chat's model and a button per model of the chain.
pub(super) async fn model_reply(
    app: &App,
    conn: &Routed<'_>,
    msg: &Message,
    reply_to: Option<i64>,
    books: Option<Box<crate::usage::Books>>,
) -> Result<Reply, PortError> {
    let links = &conn.agent.chain.links;
    let chosen = chosen_model(app, conn, msg.chat.id.0).await;
    let text = match (links.first(), &chosen) {
        (None, _) => "No model is configured: the bot's owner needs to add an API key.".into(),
        (Some(_), Some(c)) => format!("This chat uses {c} (chosen with /model). Pick another:"),
        (Some(first), None) => format!(
            "This chat uses {} (the default). Pick another; the others stay as fallbacks:",
            first.label
        ),
    };
    let mut buttons: Vec<(String, String)> = links
        .iter()
        .enumerate()
        .map(|(index, l)| {
            let tag = Some(tag(&l.label));
            (l.label.clone(), Button::Model { index, tag }.encode())
        })
        .collect();
    if chosen.is_some() {
        buttons.push(("Default".into(), Button::DefaultModel.encode()));
    }
    Ok(super::with_buttons(&text, buttons, reply_to, books))
}

/// A tap on a `/model` button ([`Button::Model`] or [`Button::DefaultModel`]).
pub(super) async fn model_tap(app: &App, conn: &Connector, q: &CallbackQuery, button: &Button) {
    let chat = q.message.as_ref().map(|m| m.chat.id.0);
    // The chain of the agent that answers where the button is.
    let conn = &super::agents::routed_tap(app, conn, q).await;
    let links = &conn.agent.chain.links;
    let may = super::pairing::may_tap(app, conn, q).await;
    let (text, alert) = match (button, chat) {
        _ if !may => (
            "Only people this bot serves can choose its model.".to_owned(),
            true,
        ),
        (Button::DefaultModel, Some(chat)) => {
            match app
                .platform
                .kv
                .delete(&keys::chat_model(&conn.id, chat))
                .await
            {
                Ok(()) => (
                    format!(
                        "Back to the default: {}.",
                        links.first().map_or("none", |l| l.label.as_str())
                    ),
                    false,
                ),
                Err(e) => failed(&e),
            }
        }
        (Button::Model { index, tag }, Some(chat)) => match picked(links, *index, tag) {
            Some(link) => {
                let key = keys::chat_model(&conn.id, chat);
                match app.platform.kv.put_json(&key, &link.label, None).await {
                    Ok(()) => (format!("This chat now uses {}.", link.label), false),
                    Err(e) => failed(&e),
                }
            }
            None => (
                "That model is not one you can pick here now: send /model again.".to_owned(),
                true,
            ),
        },
        _ => ("That button is no longer valid.".to_owned(), false),
    };
    if let Err(e) = conn.bot.answer_callback(&q.id, &text, alert).await {
        tracing::debug!(error = %e, "answerCallbackQuery failed");
    }
}

/// The model a button's `index` and `tag` name in `links`, if they name one there: a button
/// of another agent's list (in a group, people may talk with different agents) has another
/// model at that index, and its tag says so. A button from before tags has none.
fn picked<'a>(links: &'a [Link], index: usize, t: &Option<String>) -> Option<&'a Link> {
    let link = links.get(index)?;
    t.as_ref()
        .is_none_or(|t| *t == tag(&link.label))
        .then_some(link)
}

fn failed(e: &PortError) -> (String, bool) {
    tracing::warn!(error = %e, "the chat's model not changed");
    (
        "I could not change it right now; try again in a while.".to_owned(),
        true,
    )
}
