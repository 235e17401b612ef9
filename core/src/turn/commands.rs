//! The commands the bot answers without the model: one table, so a new command is one entry
//! (and `/help` and Telegram's command menu list it, see [`crate::menu`]).

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Greets and lists the commands.
    Help,
    /// Ends the session (its summary goes to memory) and starts a fresh one.
    NewSession,
    /// Cancels the turn waiting for an approval (answered where the wait is resolved;
    /// alone, it says nothing waits).
    Stop,
    /// Lists what waits for an approval and what is granted in this chat.
    Approvals,
    /// Ends this chat's grants.
    Revoke,
    /// Today's and this month's tokens and cost, and what the caps leave.
    Usage,
    /// The last steps of the audit trail in this chat (the owner only).
    Audit,
    /// This chat's reminders, each with a cancel button.
    Reminders,
    /// Shows or sets this chat's time zone.
    TimeZone,
    /// The chat's model, with a button per model of the agent.
    Model,
    /// The agents this chat may use, a button each; with a name, switches to that one.
    Agent,
    /// Summarises the conversation's older turns now.
    Compact,
    /// How full the conversation's context is.
    Context,
    /// Lets in the person whose pairing code follows (the owner, in private).
    Pair,
    /// Who may talk to the bot, a remove button per paired person (the owner, in private).
    Users,
}

/// One command: its name (without the slash), what `/help` and the menu say of it (empty:
/// left out of both), whether only the owner's menu shows it, and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub name: &'static str,
    pub help: &'static str,
    pub owner_only: bool,
    pub action: Action,
}

/// Every command, in the order `/help` lists them. `/start` is what Telegram sends first.
pub const COMMANDS: &[Command] = &[
    Command {
        name: "new",
        help: "start a fresh conversation",
        owner_only: false,
        action: Action::NewSession,
    },
    Command {
        name: "stop",
        help: "cancel what waits for your approval",
        owner_only: false,
        action: Action::Stop,
    },
    Command {
        name: "approve",
        help: "what waits for approval, and what is allowed for now",
        owner_only: false,
        action: Action::Approvals,
    },
    Command {
        name: "revoke",
        help: "end what you allowed for now",
        owner_only: false,
        action: Action::Revoke,
    },
    Command {
        name: "usage",
        help: "tokens and cost today and this month",
        owner_only: false,
        action: Action::Usage,
    },
    Command {
        name: "audit",
        help: "what I did lately in this chat (owner only)",
        owner_only: true,
        action: Action::Audit,
    },
    Command {
        name: "reminders",
        help: "reminders and scheduled tasks in this chat, to cancel",
        owner_only: false,
        action: Action::Reminders,
    },
    Command {
        name: "timezone",
        help: "this chat's time zone for reminders, e.g. /timezone Europe/Berlin",
        owner_only: false,
        action: Action::TimeZone,
    },
    Command {
        name: "model",
        help: "which model answers in this chat, to choose another",
        owner_only: false,
        action: Action::Model,
    },
    Command {
        name: "agent",
        help: "who answers in this chat, to switch to another, e.g. /agent coder",
        owner_only: false,
        action: Action::Agent,
    },
    Command {
        name: "compact",
        help: "summarise the older part of this conversation now",
        owner_only: false,
        action: Action::Compact,
    },
    Command {
        name: "context",
        help: "how much of my context this conversation takes",
        owner_only: false,
        action: Action::Context,
    },
    Command {
        name: "pair",
        help: "let someone in with the code I gave them, e.g. /pair K7M2Q9XA (owner only)",
        owner_only: true,
        action: Action::Pair,
    },
    Command {
        name: "users",
        help: "who may talk to me, to remove someone (owner only)",
        owner_only: true,
        action: Action::Users,
    },
    Command {
        name: "help",
        help: "this message",
        owner_only: false,
        action: Action::Help,
    },
    Command {
        name: "start",
        help: "",
        owner_only: false,
        action: Action::Help,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_help_lists_them() {
        assert_eq!(
            parse("/New@Bot x"),
            Some(("new".into(), Some("Bot".into())))
        );
        assert_eq!(parse("/help"), Some(("help".into(), None)));
        assert_eq!(parse("/ x"), None);
        assert_eq!(parse("hi /new"), None);
        assert_eq!(find("new").map(|c| c.action), Some(Action::NewSession));
        let everyone: Vec<&str> = menu(false).iter().map(|c| c.0).collect();
        let owner: Vec<&str> = menu(true).iter().map(|c| c.0).collect();
        assert!(everyone.contains(&"new") && !everyone.contains(&"users"));
        assert!(
            !everyone.contains(&"start"),
            "no description: not in the menu"
        );
        assert_eq!(owner.len(), everyone.len() + 3, "audit, pair and users");
        for c in COMMANDS {
            // Telegram's BotCommand: 1-32 characters of a-z, 0-9 and _; a description of
            // 1-256 characters.
            assert!(
                c.name.len() <= 32
                    && c.name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            );
            assert!(c.help.chars().count() <= 256, "{}", c.name);
            assert_eq!(c.owner_only, c.help.contains("(owner only)"), "{}", c.name);
        }
        assert!(find("nope").is_none());
        assert_eq!(
            help_text("Claw"),
            "Hi, I'm Claw, your assistant. Just write to me.\n\nCommands:\n/new: start a fresh conversation\n/stop: cancel what waits for your approval\n/approve: what waits for approval, and what is allowed for now\n/revoke: end what you allowed for now\n/usage: tokens and cost today and this month\n/audit: what I did lately in this chat (owner only)\n/reminders: reminders and scheduled tasks in this chat, to cancel\n/timezone: this chat's time zone for reminders, e.g. /timezone Europe/Berlin\n/model: which model answers in this chat, to choose another\n/agent: who answers in this chat, to switch to another, e.g. /agent coder\n/compact: summarise the older part of this conversation now\n/context: how much of my context this conversation takes\n/pair: let someone in with the code I gave them, e.g. /pair K7M2Q9XA (owner only)\n/users: who may talk to me, to remove someone (owner only)\n/help: this message"
        );
    }
}
