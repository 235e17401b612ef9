//! Reminders in the turn stage: a firing's job (a text sent as "⏰ …", or a prompt run as an
//! agent turn in the chat's session), `/reminders` (the chat's reminders, a cancel button
//! each), `/timezone`, and the taps on those buttons.

use clawless_platform::PortError;

use super::button::Button;
use super::{Checkpoint, Failure, Reply, Turn};
use crate::app::App;
use crate::connector::Connector;
use crate::schedule::zone::Zone;
use crate::schedule::{Fire, What};
use crate::telegram::render::plain_parts;
use crate::telegram::types::CallbackQuery;
use crate::telegram::Message;

/// How much of a reminder's text `/reminders` shows.
const SHOWN_CHARS: usize = 60;

/// `/reminders`: the chat's reminders, times in its zone, a cancel button each.
pub(super) async fn reminders_reply(
    app: &App,
    conn: &Connector,
    msg: &Message,
    reply_to: Option<i64>,
    books: Option<Box<crate::usage::Books>>,
) -> Result<Reply, PortError> {
    let chat = msg.chat.id.0;
    let store = app.schedules();
    let zone = store.zone_of(&conn.id, chat).await?;
    let all = store.list(&conn.id, chat).await?;
    let now = app.platform.clock.now_ms();
    let text = match all.is_empty() {
        true => format!(
            "No reminders in this chat. Ask me, e.g. \"remind me tomorrow at 9 to call Ana\" or \"every Monday at 8 send me the week's plan\". Time zone: {} (/timezone to change it).",
            zone.name
        ),
        false => {
            let lines: Vec<String> = all
                .iter()
                .map(|r| crate::tools::schedule::describe(r, &zone, now, SHOWN_CHARS))
                .collect();
            format!(
                "Reminders in this chat (time zone {}):\n{}",
                zone.name,
                lines.join("\n")
            )
        }
    };
    let buttons = all
        .iter()
        .map(|r| {
            (
                format!("Cancel #{}", r.id),
                Button::CancelReminder(r.id).encode(),
            )
        })
        .collect();
    Ok(super::with_buttons(&text, buttons, reply_to, books))
}

/// `/timezone`: shows the chat's zone, or sets it to `arg`.
pub(super) async fn timezone_reply(
    app: &App,
    conn: &Connector,
    chat: i64,
    arg: &str,
) -> Result<String, PortError> {
    let store = app.schedules();
    let now = (app.platform.clock.now_ms() / 1000) as i64;
    if arg.is_empty() {
        let zone = store.zone_of(&conn.id, chat).await?;
        return Ok(format!(
            "This chat's time zone is {}: it is {}. Change it with /timezone Europe/Berlin (any IANA name, or an offset like +02:00).",
            zone.name,
            zone.format(now, false)
        ));
    }
    let Some(zone) = Zone::find(arg) else {
        return Ok(format!(
            "I don't know the time zone {arg:?}. Use a name like Europe/Berlin or America/New_York, or an offset like +02:00."
        ));
    };
    store.set_zone(&conn.id, chat, &zone).await?;
    Ok(format!(
        "Time zone set to {}: it is {} there. Reminders set from now on use it; /reminders shows times in it.",
        zone.name,
        zone.format(now, false)
    ))
}

/// A tap on a cancel button ([`Button::CancelReminder`]): the reminder of the button's
/// chat cancelled if the person tapping may talk to the bot. The tap is always answered.
pub(super) async fn reminder_tap(app: &App, conn: &Connector, q: &CallbackQuery, id: u64) {
    let chat = q.message.as_ref().map(|m| m.chat.id.0);
    let may = super::pairing::may_tap(app, conn, q).await;
    let (text, alert) = match chat {
        _ if !may => (
            "Only people this bot serves can cancel reminders.".to_owned(),
            true,
        ),
        Some(chat) => match app.schedules().cancel(&conn.id, chat, id).await {
            Ok(Some(_)) => (format!("Cancelled reminder #{id}."), false),
            Ok(None) => ("That reminder is no longer there.".to_owned(), false),
            Err(e) => {
                tracing::warn!(error = %e, "reminder not cancelled");
                (
                    "I could not cancel it right now; try again in a while.".to_owned(),
                    true,
                )
            }
        },
        None => ("That reminder is no longer there.".to_owned(), false),
    };
    if let Err(e) = conn.bot.answer_callback(&q.id, &text, alert).await {
        tracing::debug!(error = %e, "answerCallbackQuery failed");
    }
}

impl Turn<'_> {
    /// A firing: the text to send, or the prompt's agent turn (its answer goes to the chat,
    /// not as a reply). Nothing when the person who set it may no longer talk to the bot.
    pub(super) async fn fired(
        &self,
        fire: &Fire,
        progress: &super::progress::Progress<'_>,
    ) -> Result<Reply, super::Answer> {
        let Turn { app, conn, msg, .. } = *self;
        let user = msg.from.as_ref().map_or(0, |u| u.id.0);
        if !super::pairing::may_talk(app, conn, user)
            .await
            .map_err(Failure::storage)?
        {
            tracing::info!(connector = %conn.id, reminder = fire.reminder, "its owner is no longer allowed; not fired");
            return Ok(Reply::Nothing);
        }
        if let What::Hook { hook, turn, text } = &fire.what {
            let mode = match turn {
                true => crate::config::HookMode::Turn,
                false => crate::config::HookMode::Message,
            };
            return self
                .hook_delivery(hook, mode, text, fire.at_ms, progress)
                .await;
        }
        if let What::Watch { .. } = &fire.what {
            return self.watch_check(fire, progress).await;
        }
        tracing::info!(connector = %conn.id, reminder = fire.reminder, at = fire.at_ms, "reminder fires");
        let prompt = match &fire.what {
            What::Text(text) => {
                return Ok(Reply::Send(Checkpoint {
                    parts: plain_parts(&format!("⏰ {text}")),
                    sent: 0,
                    reply_to: None,
                    session_turn: None,
                    taint: None,
                    books: None,
                }))
            }
            What::Prompt(p) => p,
            What::Gated { prompt, watch } => {
                let firing = (fire.reminder, *watch, msg.message_id);
                let opens =
                    crate::watch::gate_opens(&*app.platform.kv, &conn.id, msg.chat.id.0, firing);
                if !opens.await.map_err(Failure::storage)? {
                    tracing::info!(connector = %conn.id, task = fire.reminder, watch, "its watch saw no change; not run");
                    return Ok(Reply::Nothing);
                }
                prompt
            }
            What::Spawn { agent, task, tools } => {
                let tools = tools.clone();
                let within = progress.allowance();
                return super::background::background_task(
                    app, conn, msg, fire, agent, task, tools, within,
                )
                .await;
            }
            What::Done {
                agent,
                task,
                answer,
            } => {
                return Ok(super::background::background_done(
                    conn, msg, fire, agent, task, answer,
                ))
            }
            // Delivered and checked above.
            What::Hook { .. } | What::Watch { .. } => return Ok(Reply::Nothing),
        };
        let text = format!(
            "[Scheduled task #{}, set earlier to run now: carry it out and answer here.]\n{prompt}",
            fire.reminder
        );
        self.run_own(text, prompt, None, progress).await
    }
}
