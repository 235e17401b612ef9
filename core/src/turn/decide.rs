//! What an update asks of us, decided without any I/O: from the message, who may talk to the
//! bot, and (in groups) the bot's own identity.

use std::collections::BTreeSet;
use std::ops::Range;

use super::commands::{self, Command};
use crate::connector::Connector;
use crate::telegram::{BotIdentity, ChatKind, Message};

/// What an update asks of us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not for us (group chatter, another bot's command, channel posts).
    Ignore(&'static str),
    /// A stranger addressed us.
    Stranger(i64),
    /// A fixed reply, no model call.
    Reply(String),
    /// A turn for the agent, with the text it reads.
    Turn(String),
    /// A command of the table, and what follows its word.
    Command(&'static Command, String),
}

/// The connector's settings a decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    /// Who may talk to the bot from the config.
    pub allowed: &'a BTreeSet<i64>,
    /// The sender is paired (read from the Kv before deciding; see [`crate::pairing`]).
    pub paired: bool,
    /// Longer texts are cut (see `limits.max_input_chars`).
    pub max_input_chars: usize,
}

impl<'a> Gate<'a> {
    /// What a decision on `conn`'s messages depends on.
    pub fn of(conn: &'a Connector, max_input_chars: usize) -> Gate<'a> {
        Gate {
            allowed: &conn.allowed,
            paired: false,
            max_input_chars,
        }
    }
}

pub(super) const NO_CONTENT: &str =
    "I cannot read that kind of message: send me text, a photo, a voice note or a file.";

/// Whether deciding on `msg` needs the bot's identity (group messages: mentions and replies).
pub fn needs_identity(msg: &Message) -> bool {
    matches!(msg.chat.kind, ChatKind::Group | ChatKind::Supergroup) && !msg.is_channel_forward()
}

/// Decides what `msg` asks for. `me` must be given when [`needs_identity`] says so; without
/// it a group message is ignored.
pub fn decide(msg: &Message, me: Option<&BotIdentity>, gate: &Gate<'_>) -> Decision {
    let Some(from) = &msg.from else {
        return Decision::Ignore("no sender");
    };
    if from.is_bot {
        return Decision::Ignore("from a bot");
    }
    let text = msg.text().unwrap_or("");
    let command = commands::parse(text);
    let mut body = text.to_owned();
    match msg.chat.kind {
        ChatKind::Private => {}
        ChatKind::Group | ChatKind::Supergroup => {
            if msg.is_channel_forward() {
                return Decision::Ignore("a linked channel's post");
            }
            let Some(me) = me else {
                return Decision::Ignore("the bot's identity is unknown");
            };
            let mut mentions = msg.mentions_of(me);
            mentions.sort_by_key(|r| r.start);
            let replied = msg
                .reply_to_message
                .as_ref()
                .and_then(|r| r.from.as_ref())
                .is_some_and(|u| u.id.0 == me.id);
            let commanded = match &command {
                Some((_, Some(bot))) => bot.eq_ignore_ascii_case(&me.username),
                Some((_, None)) => true,
                None => false,
            };
            if let Some((_, Some(_))) = &command {
                if !commanded {
                    return Decision::Ignore("command for another bot");
                }
            }
            if mentions.is_empty() && !replied && !commanded {
                return Decision::Ignore("group message not addressed to the bot");
            }
            body = without(text, &mentions);
        }
        ChatKind::Channel | ChatKind::Other => {
            return Decision::Ignore("not a private chat or group")
        }
    }
    if !gate.allowed.contains(&from.id.0) && !gate.paired {
        return Decision::Stranger(from.id.0);
    }
    if let Some(cmd) = command.and_then(|(name, _)| commands::find(&name)) {
        return Decision::Command(cmd, commands::args(text).to_owned());
    }
    let body = body.trim();
    if body.is_empty() && !msg.has_media() {
        return if msg.text().is_some() {
            Decision::Reply("Yes? Write your question after the mention.".into())
        } else {
            Decision::Reply(NO_CONTENT.into())
        };
    }
    // A photo, voice note or file is read by the turn (`turn/media.rs`).
    Decision::Turn(capped(body, gate.max_input_chars))
}

/// `text` without the byte `ranges` (sorted by start, on char boundaries; overlaps skipped).
fn without(text: &str, ranges: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in ranges {
        if r.start >= at && r.end <= text.len() {
            out.push_str(&text[at..r.start]);
            at = r.end;
        }
    }
    out.push_str(&text[at..]);
    out
}

/// `text` cut to `max` characters, with a note for the model when it was cut.
fn capped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!(
            "{}\n[The message was cut here: it had {} characters, more than the {max} accepted.]",
            &text[..at],
            text.chars().count()
        ),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(v: serde_json::Value) -> Message {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    fn gate(allowed: &BTreeSet<i64>) -> Gate<'_> {
        Gate {
            allowed,
            paired: false,
            max_input_chars: 10,
        }
    }

    #[test]
    fn private_messages_from_allowed_users_are_turns_and_cut_to_the_limit() {
        let allowed = BTreeSet::from([1]);
        let m = msg(
            json!({"message_id": 1, "chat": {"id": 1, "type": "private"},
            "from": {"id": 1, "first_name": "A"}, "text": "hello there, long text"}),
        );
        match decide(&m, None, &gate(&allowed)) {
            Decision::Turn(t) => assert!(t.starts_with("hello ther\n[The message was cut"), "{t}"),
            other => panic!("{other:?}"),
        }
        let stranger = msg(
            json!({"message_id": 1, "chat": {"id": 2, "type": "private"},
            "from": {"id": 2, "first_name": "B"}, "text": "hi"}),
        );
        assert_eq!(
            decide(&stranger, None, &gate(&allowed)),
            Decision::Stranger(2)
        );
        let paired = Gate {
            paired: true,
            ..gate(&allowed)
        };
        assert_eq!(
            decide(&stranger, None, &paired),
            Decision::Turn("hi".into())
        );
        let new = msg(
            json!({"message_id": 1, "chat": {"id": 1, "type": "private"},
            "from": {"id": 1, "first_name": "A"}, "text": "/new"}),
        );
        assert_eq!(
            decide(&new, None, &gate(&allowed)),
            Decision::Command(commands::find("new").unwrap(), String::new())
        );
    }

    #[test]
    fn group_messages_need_the_identity_and_an_address() {
        let allowed = BTreeSet::from([1]);
        let me = BotIdentity {
            id: 9,
            username: "claw_bot".into(),
        };
        let m = msg(json!({"message_id": 1, "chat": {"id": -5, "type": "group"},
            "from": {"id": 1, "first_name": "A"}, "text": "@claw_bot hi",
            "entities": [{"type": "mention", "offset": 0, "length": 9}]}));
        assert!(needs_identity(&m));
        assert_eq!(
            decide(&m, None, &gate(&allowed)),
            Decision::Ignore("the bot's identity is unknown")
        );
        assert_eq!(
            decide(&m, Some(&me), &gate(&allowed)),
            Decision::Turn("hi".into())
        );
        let chatter = msg(json!({"message_id": 1, "chat": {"id": -5, "type": "group"},
            "from": {"id": 1, "first_name": "A"}, "text": "claw_bot is nice"}));
        assert!(matches!(
            decide(&chatter, Some(&me), &gate(&allowed)),
            Decision::Ignore(_)
        ));
    }

    #[test]
    fn overlapping_or_unsorted_ranges_never_panic() {
        assert_eq!(without("abcdef", &[1..3, 2..4, 5..6]), "ade");
        assert_eq!(without("abc", &[2..3, 0..1]), "ab");
    }
}
