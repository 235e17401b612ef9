//! The commands: one table, each entry a command's name, description (what `/help` and
//! Telegram's command menu show, see [`crate::menu`]), who may use it, whether it needs the
//! model, and its handler. A new command is one entry and its handler.

use clawless_platform::PortError;
use futures::future::BoxFuture;

use super::{Checkpoint, Reply};
use crate::app::App;
use crate::connector::Routed;
use crate::session;
use crate::telegram::render::{plain_parts, LinkButton};
use crate::telegram::Message;
use crate::usage::Books;

/// One command: its name (without the slash), what `/help` and the menu say of it (empty:
/// left out of both), whether only the owner may use it (and only the owner's menu shows
/// it; its handler refuses anyone else), whether it calls the model (without one configured
/// it is refused before it runs), and its handler. A new command is one entry and its
/// handler.
#[derive(Clone, Copy)]
pub struct Command {
    pub name: &'static str,
    pub help: &'static str,
    pub owner_only: bool,
    pub needs_model: bool,
    pub(crate) run: Handler,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "/{}", self.name)
    }
}

impl PartialEq for Command {
    fn eq(&self, other: &Command) -> bool {
        self.name == other.name
    }
}

impl Eq for Command {}

/// What a command's handler is given.
pub(crate) struct Ctx<'a> {
    pub app: &'a App,
    pub conn: &'a Routed<'a>,
    pub msg: &'a Message,
    /// What follows the command word.
    pub args: &'a str,
    /// The message to answer to (in groups).
    pub reply_to: Option<i64>,
    /// The command's audit entry, written beside its reply.
    pub books: Option<Box<Books>>,
}

impl Ctx<'_> {
    /// A plain-text reply, the command's audit entry beside it.
    pub(super) fn text(self, text: &str) -> Reply {
        Reply::Send(Checkpoint {
            parts: plain_parts(text),
            sent: 0,
            reply_to: self.reply_to,
            session_turn: None,
            taint: None,
            books: self.books,
        })
    }
}

/// A command's handler: its reply (a storage failure is the turn's failure, retried).
pub(crate) type Handler = for<'a> fn(Ctx<'a>) -> BoxFuture<'a, Result<Reply, PortError>>;

/// Every command, in the order `/help` lists them. `/start` is what Telegram sends first.
pub const COMMANDS: &[Command] = &[
    Command {
        name: "new",
        help: "start a fresh conversation",
        owner_only: false,
        needs_model: false,
        run: new_session,
    },
    Command {
        name: "stop",
        help: "cancel what waits for your approval",
        owner_only: false,
        needs_model: false,
        run: stop,
    },
    Command {
        name: "approve",
        help: "what waits for approval, and what is allowed for now",
        owner_only: false,
        needs_model: false,
        run: approvals,
    },
    Command {
        name: "revoke",
        help: "end what you allowed for now",
        owner_only: false,
        needs_model: false,
        run: revoke,
    },
    Command {
        name: "usage",
        help: "tokens and cost today and this month",
        owner_only: false,
        needs_model: false,
        run: usage,
    },
    Command {
        name: "audit",
        help: "what I did lately in this chat (owner only)",
        owner_only: true,
        needs_model: false,
        run: audit,
    },
    Command {
        name: "reminders",
        help: "reminders and scheduled tasks in this chat, to cancel",
        owner_only: false,
        needs_model: false,
        run: reminders,
    },
    Command {
        name: "watches",
        help: "pages I check for changes in this chat, to cancel",
        owner_only: false,
        needs_model: false,
        run: watches,
    },
    Command {
        name: "timezone",
        help: "this chat's time zone for reminders, e.g. /timezone Europe/Berlin",
        owner_only: false,
        needs_model: false,
        run: timezone,
    },
    Command {
        name: "model",
        help: "which model answers in this chat, to choose another",
        owner_only: false,
        needs_model: false,
        run: model,
    },
    Command {
        name: "voice",
        help: "whether I answer with voice notes too: /voice on, off or auto",
        owner_only: false,
        needs_model: false,
        run: voice,
    },
    Command {
        name: "imagine",
        help: "a picture from a description, e.g. /imagine a lighthouse at dusk",
        owner_only: false,
        needs_model: false,
        run: imagine,
    },
    Command {
        name: "agent",
        help: "who answers in this chat, to switch to another, e.g. /agent coder",
        owner_only: false,
        needs_model: false,
        run: agent,
    },
    Command {
        name: "memory",
        help: "what I keep in memory about you, or what matches, e.g. /memory dentist",
        owner_only: false,
        needs_model: false,
        run: memory,
    },
    Command {
        name: "compact",
        help: "summarise the older part of this conversation now",
        owner_only: false,
        needs_model: true,
        run: compact,
    },
    Command {
        name: "context",
        help: "how much of my context this conversation takes",
        owner_only: false,
        needs_model: false,
        run: context,
    },
    Command {
        name: "pair",
        help: "let someone in with the code I gave them, e.g. /pair K7M2Q9XA (owner only)",
        owner_only: true,
        needs_model: false,
        run: pair,
    },
    Command {
        name: "users",
        help: "who may talk to me, to remove someone (owner only)",
        owner_only: true,
        needs_model: false,
        run: users,
    },
    Command {
        name: "panel",
        help: "your control panel: memory, reminders, usage (private chat)",
        owner_only: false,
        needs_model: false,
        run: panel,
    },
    Command {
        name: "help",
        help: "this message",
        owner_only: false,
        needs_model: false,
        run: help,
    },
    Command {
        name: "start",
        help: "",
        owner_only: false,
        needs_model: false,
        run: help,
    },
];

/// The commands a menu shows, `(name, description)`: everyone's, or with `owner` the owner's
/// too, in the table's order.
pub fn menu(owner: bool) -> Vec<(&'static str, &'static str)> {
    COMMANDS
        .iter()
        .filter(|c| !c.help.is_empty() && (owner || !c.owner_only))
        .map(|c| (c.name, c.help))
        .collect()
}

/// The command called `name` (lower case, no slash).
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// What follows the command word: `/timezone Europe/Berlin` → `Europe/Berlin`.
pub fn args(text: &str) -> &str {
    let text = text.trim_start();
    text.find(char::is_whitespace)
        .map_or("", |at| text[at..].trim())
}

/// `/cmd@bot args` → `("cmd", Some("bot"))`, the command lower-cased.
pub fn parse(text: &str) -> Option<(String, Option<String>)> {
    let first = text.split_whitespace().next()?.strip_prefix('/')?;
    let (cmd, bot) = match first.split_once('@') {
        Some((c, b)) => (c, Some(b.to_owned())),
        None => (first, None),
    };
    (!cmd.is_empty()).then(|| (cmd.to_ascii_lowercase(), bot))
}

/// The greeting `/start` and `/help` answer with, listing the commands.
pub fn help_text(assistant: &str) -> String {
    let lines: Vec<String> = COMMANDS
        .iter()
        .filter(|c| !c.help.is_empty())
        .map(|c| format!("/{}: {}", c.name, c.help))
        .collect();
    format!(
        "Hi, I'm {assistant}, your assistant. Just write to me.\n\nCommands:\n{}",
        lines.join("\n")
    )
}

/// What `/stop` answers when nothing waits.
pub const NOTHING_TO_STOP: &str = "Nothing is waiting for your approval.";

/// What `/new` answers.
pub const NEW_SESSION_REPLY: &str = "Started a fresh conversation.";

/// What a command answers when no model is configured and it needs one.
pub const NO_MODEL: &str = "No model is configured: the bot's owner needs to add an API key.";

// The handlers, in the table's order.

fn new_session(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let key = session::session_key(&c.conn.id, c.msg);
        let kv = &*c.app.platform.kv;
        let old = session::load(kv, &key).await?;
        let scope = c.conn.memory_scope_of(c.msg);
        c.app
            .lifecycle()
            .end_session(&c.conn.agent.chain, &scope, &key, &old)
            .await;
        session::clear(kv, &key).await?;
        Ok(c.text(NEW_SESSION_REPLY))
    })
}

/// Alone: a `/stop` with a waiting turn is taken by that turn (`approval::await_answer`).
fn stop(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move { Ok(c.text(NOTHING_TO_STOP)) })
}

fn approvals(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let text = super::reports::grants_reply(c.app, c.conn, c.msg.chat.id.0, false).await?;
        Ok(c.text(&text))
    })
}

fn revoke(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let text = super::reports::grants_reply(c.app, c.conn, c.msg.chat.id.0, true).await?;
        Ok(c.text(&text))
    })
}

fn usage(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let text = super::reports::usage_reply(c.app, c.conn, c.msg).await?;
        Ok(c.text(&text))
    })
}

fn audit(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let text = super::reports::audit_reply(c.app, c.conn, c.msg).await?;
        Ok(c.text(&text))
    })
}

fn reminders(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        super::reminders::reminders_reply(c.app, c.conn, c.msg, c.reply_to, c.books).await
    })
}

fn watches(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let chat = c.msg.chat.id.0;
        super::watch::watches_reply(c.app, c.conn, chat, c.reply_to, c.books).await
    })
}

fn timezone(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let chat = c.msg.chat.id.0;
        let text = super::reminders::timezone_reply(c.app, c.conn, chat, c.args).await?;
        Ok(c.text(&text))
    })
}

fn model(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(
        async move { super::model::model_reply(c.app, c.conn, c.msg, c.reply_to, c.books).await },
    )
}

fn voice(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let chat = c.msg.chat.id.0;
        let text = super::voice::voice_reply(c.app, c.conn, chat, c.args).await?;
        Ok(c.text(&text))
    })
}

fn imagine(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let Ctx {
            app,
            conn,
            msg,
            args,
            reply_to,
            books,
        } = c;
        super::pictures::imagine(app, conn, msg, args, (reply_to, books)).await
    })
}

fn agent(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        super::agents::agent_reply(c.app, c.conn, c.msg, c.args, c.reply_to, c.books).await
    })
}

fn memory(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let scope = c.conn.memory_scope_of(c.msg);
        let text = super::reports::memory_reply(c.app, &scope, c.args).await?;
        Ok(c.text(&text))
    })
}

/// The panel's two ways in: a Mini App button (HTTPS only) and a one-time browser link.
fn panel(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let (Some(from), true) = (&c.msg.from, c.msg.is_private()) else {
            return Ok(c.text("Send /panel in a private chat with me: the link is yours alone."));
        };
        let panel = c.app.panel();
        let Some(base) = panel.base(c.conn).await else {
            return Ok(c.text("I don't know the address I'm reached at. Set CLAWLESS_PUBLIC_URL to it (https://…), then send /panel again."));
        };
        let token = panel.new_link(c.conn, from.id.0, c.msg.message_id).await?;
        let mut links = Vec::new();
        if base.starts_with("https://") {
            links.push(LinkButton {
                label: "Open the panel".into(),
                url: format!("{base}/app/"),
                web_app: true,
            });
        }
        links.push(LinkButton {
            label: "Open in a browser (once, 10 min)".into(),
            url: format!("{base}/app/login?t={token}"),
            web_app: false,
        });
        let reply = c.text("Your control panel: your memory, reminders and usage. The browser link works once, within 10 minutes; keep it to yourself.");
        Ok(match reply {
            Reply::Send(mut cp) => {
                if let Some(last) = cp.parts.last_mut() {
                    last.links = links;
                }
                Reply::Send(cp)
            }
            other => other,
        })
    })
}

fn compact(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let text = super::compact::compact_reply(c.app, c.conn, c.msg).await?;
        Ok(c.text(&text))
    })
}

fn context(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let text = super::compact::context_reply(c.app, c.conn, c.msg).await?;
        Ok(c.text(&text))
    })
}

fn pair(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        super::pairing::pair_reply(c.app, c.conn, c.msg, c.args, c.reply_to, c.books).await
    })
}

fn users(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(
        async move { super::pairing::users_reply(c.app, c.conn, c.msg, c.reply_to, c.books).await },
    )
}

fn help(c: Ctx<'_>) -> BoxFuture<'_, Result<Reply, PortError>> {
    Box::pin(async move {
        let agent = &c.conn.agent.config;
        let text = help_text(agent.name.as_deref().unwrap_or(&agent.id));
        Ok(c.text(&text))
    })
}

#[cfg(test)]
mod tests;
