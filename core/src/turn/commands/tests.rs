//! The command table's own checks: names and help Telegram accepts, owner-only marks, /help.

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
    assert_eq!(find("new").map(|c| c.name), Some("new"));
    assert!(find("compact").is_some_and(|c| c.needs_model));
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
        "Hi, I'm Claw, your assistant. Just write to me.\n\nCommands:\n/new: start a fresh conversation\n/stop: cancel what waits for your approval\n/approve: what waits for approval, and what is allowed for now\n/revoke: end what you allowed for now\n/usage: tokens and cost today and this month\n/audit: what I did lately in this chat (owner only)\n/reminders: reminders and scheduled tasks in this chat, to cancel\n/watches: pages I check for changes in this chat, to cancel\n/timezone: this chat's time zone for reminders, e.g. /timezone Europe/Berlin\n/model: which model answers in this chat, to choose another\n/voice: whether I answer with voice notes too: /voice on, off or auto\n/imagine: a picture from a description, e.g. /imagine a lighthouse at dusk\n/agent: who answers in this chat, to switch to another, e.g. /agent coder\n/memory: what I keep in memory about you, or what matches, e.g. /memory dentist\n/compact: summarise the older part of this conversation now\n/context: how much of my context this conversation takes\n/pair: let someone in with the code I gave them, e.g. /pair K7M2Q9XA (owner only)\n/users: who may talk to me, to remove someone (owner only)\n/panel: your control panel: memory, reminders, usage (private chat)\n/help: this message"
    );
}
