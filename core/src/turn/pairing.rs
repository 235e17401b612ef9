//! Pairing in the turn stage (the store is [`crate::pairing`]): what a stranger is told (their
//! code; the owner is told too), `/pair CODE` and `/users` (the owner, in their private chat;
//! a remove button per paired person, `pu:<user>`), and the taps on those buttons.

use clawless_platform::PortError;

use super::button::Button;
use super::{Failure, Reply};
use crate::app::App;
use crate::audit::{Entry, Step};
use crate::connector::Connector;
use crate::pairing::{Person, Told, NOTIFY_BELOW};
use crate::telegram::api::Target;
use crate::telegram::types::CallbackQuery;
use crate::telegram::Message;
use crate::usage::Books;

/// Paired people `/users` lists (with a button each), and configured ids it shows.
const LISTED: usize = 50;

/// Why `msg` may not manage pairings: only the owner, only in their private chat.
fn refusal(conn: &Connector, msg: &Message) -> Option<&'static str> {
    if msg.from.as_ref().map(|u| u.id.0) != conn.owner || conn.owner.is_none() {
        return Some("Only the bot's owner can let people in or out.");
    }
    if !msg.is_private() {
        return Some("Do that in your private chat with me, not in a group.");
    }
    None
}

fn send(text: &str, reply_to: Option<i64>, books: Option<Box<Books>>) -> Reply {
    super::with_buttons(text, Vec::new(), reply_to, books)
}

/// A stranger wrote: their pairing code (the owner is told of a new one), that too many
/// wait, or nothing when they were told a moment ago.
pub(super) async fn stranger_reply(
    app: &App,
    conn: &Connector,
    msg: &Message,
    update_id: i64,
    reply_to: Option<i64>,
) -> Result<Reply, Failure> {
    let Some(from) = &msg.from else {
        return Ok(Reply::Nothing);
    };
    let person = Person::of(from);
    let told = app
        .pairings()
        .stranger(
            &conn.id,
            &person,
            update_id,
            &conn.pairing_key,
            &app.instance,
        )
        .await
        .map_err(Failure::storage)?;
    let id = person.id;
    let text = match told {
        Told::Quiet => return Ok(Reply::Nothing),
        Told::Full => format!(
            "Sorry, this is a private assistant, and too many people are waiting for its owner right now. Write to me again in a while. Your Telegram user id is {id}."
        ),
        Told::Code { code, new, pending } => {
            if new && pending < NOTIFY_BELOW {
                tell_owner(conn, &person, &code).await;
            }
            let within = match new {
                true => "within the hour",
                false => "within an hour of when I first gave it to you",
            };
            format!(
                "Sorry, this is a private assistant. To ask its owner for access, give them this code: {code}\nThey let you in by sending me /pair {code} {within}. Your Telegram user id is {id}."
            )
        }
    };
    Ok(send(&text, reply_to, None))
}

/// Tells the owner, in their private chat, that `person` asks to pair (best effort).
async fn tell_owner(conn: &Connector, person: &Person, code: &str) {
    let Some(owner) = conn.owner.filter(|o| *o != person.id) else {
        return;
    };
    let text = format!(
        "{} asks to talk to me. To let them in, send: /pair {code}\n(The code works for an hour; /users lists who may talk to me.)",
        person.label()
    );
    let to = Target {
        chat_id: owner,
        thread_id: None,
    };
    if let Err(e) = conn.bot.send_message(to, &text, false, None).await {
        tracing::info!(connector = %conn.id, error = %e, "the owner was not told of a pairing code");
    }
}

/// `/pair CODE`: the owner lets in the person the code was given to.
pub(super) async fn pair_reply(
    app: &App,
    conn: &Connector,
    msg: &Message,
    code: &str,
    reply_to: Option<i64>,
    mut books: Option<Box<Books>>,
) -> Result<Reply, PortError> {
    if let Some(no) = refusal(conn, msg) {
        return Ok(send(no, reply_to, books));
    }
    if code.is_empty() {
        let text = "Send /pair with the code the person got from me, e.g. /pair K7M2Q9XA.";
        return Ok(send(text, reply_to, books));
    }
    let by = conn.owner;
    let Some(paired) = app.pairings().approve(&conn.id, code, by).await? else {
        let shown: String = code.chars().take(16).collect();
        let text = format!(
            "No code {shown} is waiting: it was used already, it has expired (codes work for an hour), or it is mistyped. They get a new one when they write to me again."
        );
        return Ok(send(&text, reply_to, books));
    };
    if let Some(b) = books.as_mut() {
        let seq = u32::try_from(b.audit.len()).unwrap_or(u32::MAX);
        b.audit.push(Entry {
            at_ms: paired.at_ms,
            trace: msg.message_id,
            seq,
            chat: msg.chat.id.0,
            user: by.unwrap_or(0),
            step: paired.step("approved"),
        });
    }
    crate::pairing::welcome(conn, &paired).await;
    let text = format!(
        "{} can talk to me now. /users lists who may talk to me and removes people.",
        paired.person.label()
    );
    Ok(send(&text, reply_to, books))
}

/// `/users`: who may talk to the bot: from the config, and paired (a remove button each).
pub(super) async fn users_reply(
    app: &App,
    conn: &Connector,
    msg: &Message,
    reply_to: Option<i64>,
    books: Option<Box<Books>>,
) -> Result<Reply, PortError> {
    if let Some(no) = refusal(conn, msg) {
        return Ok(send(no, reply_to, books));
    }
    let paired = app.pairings().paired(&conn.id, LISTED).await?;
    let mut configured: Vec<String> = conn
        .allowed
        .iter()
        .take(LISTED)
        .map(|id| match Some(*id) == conn.owner {
            true => format!("{id} (you)"),
            false => id.to_string(),
        })
        .collect();
    if conn.allowed.len() > LISTED {
        configured.push("…".into());
    }
    let mut text = format!(
        "From the config (allowed_users; change them there): {}",
        configured.join(", ")
    );
    if paired.is_empty() {
        text.push_str(
            "\nPaired: nobody. Strangers who write to me get a code; /pair CODE lets them in.",
        );
    } else {
        text.push_str("\nPaired (a button removes them):");
        for p in &paired {
            let (y, m, d) = crate::calendar::civil_from_days(crate::calendar::day_of(p.at_ms));
            text.push_str(&format!(
                "\n• {}, since {y:04}-{m:02}-{d:02}",
                p.person.label()
            ));
        }
    }
    let buttons = paired
        .iter()
        .map(|p| {
            let name: String = p.person.name.chars().take(24).collect();
            let label = match name.is_empty() {
                true => format!("Remove {}", p.person.id),
                false => format!("Remove {name}"),
            };
            (label, Button::Unpair(p.person.id).encode())
        })
        .collect();
    Ok(super::with_buttons(&text, buttons, reply_to, books))
}

/// A tap on a `/users` remove button ([`Button::Unpair`]): the owner's ends that
/// pairing. Always answered.
pub(super) async fn pairing_tap(app: &App, conn: &Connector, q: &CallbackQuery, user: i64) {
    let (text, alert) = match conn.owner == Some(q.from.id.0) {
        false => ("Only the bot's owner can remove people.".to_owned(), true),
        true => match app.pairings().remove(&conn.id, user).await {
            Ok(Some(p)) => {
                audit_tap(app, conn, q, p.step("removed")).await;
                (
                    format!("Removed {}: they are a stranger again.", p.person.label()),
                    false,
                )
            }
            Ok(None) => ("They were not paired any more.".to_owned(), false),
            Err(e) => {
                tracing::warn!(error = %e, "pairing not removed");
                (
                    "I could not remove them right now; try again in a while.".to_owned(),
                    true,
                )
            }
        },
    };
    if let Err(e) = conn.bot.answer_callback(&q.id, &text, alert).await {
        tracing::debug!(error = %e, "answerCallbackQuery failed");
    }
}

/// Writes `step` of a tap to the audit trail (logged on failure).
async fn audit_tap(app: &App, conn: &Connector, q: &CallbackQuery, step: Step) {
    let entry = Entry {
        at_ms: app.platform.clock.now_ms(),
        trace: q.message.as_ref().map_or(0, |m| m.message_id),
        seq: 0,
        chat: q.message.as_ref().map_or(0, |m| m.chat.id.0),
        user: q.from.id.0,
        step,
    };
    let retention = app.config.audit.retention();
    if let Err(e) = crate::audit::write(&*app.platform.kv, &conn.id, &[entry], retention).await {
        tracing::warn!(error = %e, "audit entry of a pairing not written");
    }
}

/// Whether `user` may talk to `conn`: configured, or paired (one Kv read).
pub(crate) async fn may_talk(app: &App, conn: &Connector, user: i64) -> Result<bool, PortError> {
    if conn.allowed.contains(&user) {
        return Ok(true);
    }
    app.pairings().is_paired(&conn.id, user).await
}

/// Whether the person tapping may talk to the bot (a storage failure: no, logged).
pub(super) async fn may_tap(app: &App, conn: &Connector, q: &CallbackQuery) -> bool {
    may_talk(app, conn, q.from.id.0).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "who may talk could not be read");
        false
    })
}
