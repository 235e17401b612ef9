//! OpenClaw's conversations (`agents/<agent>/sessions/`): `sessions.json` maps each session
//! key to a transcript, `<sessionId>.jsonl`, one entry a line (`{"type": "message",
//! "message": {"role", "content"}}`). A Telegram private chat's conversation comes over as
//! that chat's history here, its text only (no tool calls, no thinking), the last
//! [`MAX_MESSAGES`] messages, roles alternating from a question to an answer:
//!
//! | session key | here |
//! |---|---|
//! | `agent:<agent>:<mainKey>` (every direct chat, `session.dmScope: main`) | the owner's private chat |
//! | `agent:<agent>:telegram:dm:<user>`, `agent:<agent>:telegram:<account>:dm:<user>` | that person's private chat |
//!
//! Everything else is listed, by kind, with how many: groups (here each member of a group has
//! a conversation of their own), other channels, a `dm:<peer>` of unknown channel, cron and
//! hook runs, transcripts no key names any more (earlier days' conversations), other agents'.

use std::collections::BTreeMap;

use serde_json::Value;

use super::settings::{is_id, Settings};
use crate::llm::{ChatMessage, Role};

/// Messages kept of each conversation, at most (the import keeps the config's window of them).
pub const MAX_MESSAGES: usize = 100;
/// Characters kept of one message.
const MAX_TEXT: usize = 16_384;
/// Examples named per kind of conversation not carried.
const EXAMPLES: usize = 3;

/// Whose private chat a conversation continues in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Chat {
    /// The connector's owner (OpenClaw's main session).
    Owner,
    /// A person by Telegram user id.
    User(i64),
}

/// One conversation to carry.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Conversation {
    pub chat: Chat,
    /// The transcript and its session key, for the report.
    pub from: String,
    /// `updatedAt` of its entry (ms): of two for one chat, the later is carried.
    pub updated_ms: u64,
    pub messages: Vec<ChatMessage>,
}

/// The conversations of `settings.agent` that map, and what does not (each with why).
/// `files`: paths below OpenClaw's state directory, only those under `agents/`.
pub fn read(
    files: &BTreeMap<&str, &[u8]>,
    settings: &Settings,
) -> (Vec<Conversation>, Vec<String>) {
    let mut unmapped = Vec::new();
    let mut per_agent: BTreeMap<&str, Vec<(&str, &[u8])>> = BTreeMap::new();
    for (path, bytes) in files {
        let parts: Vec<&str> = path.splitn(4, '/').collect();
        match parts.as_slice() {
            ["agents", agent, "sessions", file] if !file.contains('/') => {
                per_agent.entry(agent).or_default().push((file, *bytes));
            }
            _ => unmapped.push(format!("{path}: no place for it here")),
        }
    }
    let mut out = Vec::new();
    for (agent, files) in per_agent {
        let dir = format!("agents/{agent}/sessions");
        let transcripts = files.iter().filter(|(f, _)| f.ends_with(".jsonl")).count();
        if agent != settings.agent {
            unmapped.push(format!("{dir}/: another OpenClaw agent's {transcripts} conversations, not carried (only those of {}, whose workspace this is)", settings.agent));
            continue;
        }
        let Some((_, index)) = files.iter().find(|(f, _)| *f == "sessions.json") else {
            unmapped.push(format!("{dir}/: {transcripts} conversations, not carried: no sessions.json says whose they are"));
            continue;
        };
        let Ok(Value::Object(index)) = serde_json::from_slice::<Value>(index) else {
            unmapped.push(format!("{dir}/sessions.json: not JSON this migration reads; its conversations are not carried"));
            continue;
        };
        let mut left: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        let mut used = Vec::new();
        for (key, entry) in &index {
            let shown: String = key.chars().filter(|c| !c.is_control()).take(80).collect();
            let id = entry["sessionId"].as_str().filter(|id| is_file_id(id));
            let file = id.map(|id| format!("{id}.jsonl"));
            let found = file.and_then(|f| files.iter().find(|(n, _)| **n == f));
            if let Some((name, _)) = found {
                used.push(*name);
            }
            let chat = match chat_of(key, agent, &settings.main_key) {
                Ok(chat) => chat,
                Err(why) => {
                    left.entry(why).or_default().push(shown);
                    continue;
                }
            };
            let Some((name, bytes)) = found else {
                left.entry("its transcript is not there")
                    .or_default()
                    .push(shown);
                continue;
            };
            let messages = transcript(bytes);
            if messages.is_empty() {
                left.entry("no text to carry").or_default().push(shown);
                continue;
            }
            out.push(Conversation {
                chat,
                from: format!("{dir}/{name} ({shown})"),
                updated_ms: entry["updatedAt"].as_u64().unwrap_or(0),
                messages,
            });
        }
        for (why, keys) in left {
            let more = keys.len().saturating_sub(EXAMPLES);
            let mut named = keys
                .into_iter()
                .take(EXAMPLES)
                .collect::<Vec<_>>()
                .join(", ");
            if more > 0 {
                named.push_str(&format!(" and {more} more"));
            }
            unmapped.push(format!("{dir}/sessions.json {named}: not carried ({why})"));
        }
        let earlier = (files.iter())
            .filter(|(f, _)| f.ends_with(".jsonl") && !used.contains(f))
            .count();
        if earlier > 0 {
            unmapped.push(format!("{dir}/: earlier conversations no session points to any more (past days' and reset ones), {earlier} of them, not carried"));
        }
        for (file, _) in files
            .iter()
            .filter(|(f, _)| *f != "sessions.json" && !f.ends_with(".jsonl"))
        {
            unmapped.push(format!("{dir}/{file}: no place for it here"));
        }
    }
    // Of two conversations of one chat, the later.
    out.sort_by_key(|c| std::cmp::Reverse(c.updated_ms));
    let mut seen = Vec::new();
    out.retain(|c| {
        let first = !seen.contains(&c.chat);
        if !first {
            unmapped.push(format!(
                "{}: an earlier conversation of the same chat, not carried",
                c.from
            ));
        }
        seen.push(c.chat);
        first
    });
    (out, unmapped)
}

/// The chat a session key of `agent` continues in here, or why it does not map.
fn chat_of(key: &str, agent: &str, main_key: &str) -> Result<Chat, &'static str> {
    let parts: Vec<&str> = key.split(':').collect();
    let rest = match parts.as_slice() {
        ["agent", a, rest @ ..] if *a == agent => rest,
        _ => return Err("a key of another form"),
    };
    let user = |peer: &str| match peer.parse::<i64>() {
        Ok(id) if id > 0 => Ok(Chat::User(id)),
        _ => Err("not a Telegram user id"),
    };
    match rest {
        [only] if *only == main_key => Ok(Chat::Owner),
        ["telegram", "dm", peer] | ["telegram", _, "dm", peer] => user(peer),
        ["telegram", ..] if rest.contains(&"group") || rest.contains(&"channel") => {
            Err("a group's: here each member of a group has a conversation of their own")
        }
        ["telegram", ..] => Err("a Telegram conversation of another kind"),
        ["dm", ..] => Err("a direct chat whose channel the key does not say"),
        ["cron", ..] | ["hook", ..] | ["subagent", ..] => {
            Err("a scheduled, hook or sub-agent run, not a chat")
        }
        _ => Err("another channel's or kind's (this assistant talks on Telegram)"),
    }
}

/// A session id that is a file name: letters, digits, `-`, `_`, `.`, not starting with a dot.
fn is_file_id(id: &str) -> bool {
    !id.starts_with('.') && is_id(&id.replace('.', "_"))
}

/// The text of a transcript's messages, alternating from a question to an answer, the last
/// [`MAX_MESSAGES`]. Lines that do not read (the cut first line of a tail) are passed over.
fn transcript(bytes: &[u8]) -> Vec<ChatMessage> {
    let mut turns: Vec<(Role, String)> = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(entry) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if entry["type"] != "message" {
            continue;
        }
        let message = &entry["message"];
        let role = match message["role"].as_str() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => continue,
        };
        let text = match &message["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => (blocks.iter())
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => continue,
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, held)) if *last == role => {
                if held.len() < MAX_TEXT {
                    held.push_str("\n\n");
                    held.push_str(text);
                }
            }
            _ => turns.push((role, text.to_owned())),
        }
    }
    while turns.last().is_some_and(|(r, _)| *r == Role::User) {
        turns.pop();
    }
    let start = turns.len().saturating_sub(MAX_MESSAGES);
    let mut kept = &turns[start..];
    while kept.first().is_some_and(|(r, _)| *r == Role::Assistant) {
        kept = &kept[1..];
    }
    kept.iter()
        .map(|(role, text)| {
            let text = cut(text);
            match role {
                Role::User => ChatMessage::user_text(text),
                Role::Assistant => ChatMessage::assistant_text(text),
            }
        })
        .collect()
}

/// `text` cut to [`MAX_TEXT`] bytes at a character boundary.
fn cut(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_chats_map_and_everything_else_is_counted() {
        let line = |role: &str, text: &str| {
            serde_json::json!({"type": "message", "message": {"role": role, "content": [{"type": "text", "text": text}, {"type": "thinking", "thinking": "hmm"}]}}).to_string()
        };
        let transcript = [
            "{\"cut\": tru".to_owned(),
            line("assistant", "an answer cut from its question"),
            line("user", "What is my bike lock code?"),
            line("assistant", "It is 7391."),
            r#"{"type":"message","message":{"role":"toolResult","content":[]}}"#.to_owned(),
            line("user", "thanks"),
            line("user", "and?"),
            line("assistant", "You're welcome."),
            line("user", "unanswered"),
        ]
        .join("\n");
        let index = serde_json::json!({
            "agent:main:main": {"sessionId": "s-1", "updatedAt": 5},
            "agent:main:telegram:dm:222": {"sessionId": "s-2", "updatedAt": 4},
            "agent:main:telegram:group:-100123": {"sessionId": "s-3"},
            "agent:main:whatsapp:dm:+1555": {"sessionId": "s-4"},
            "agent:main:telegram:dm:333": {"sessionId": "../../etc/passwd"},
        });
        let mut files = BTreeMap::new();
        let dir = "agents/main/sessions";
        files.insert(
            format!("{dir}/sessions.json"),
            index.to_string().into_bytes(),
        );
        for id in ["s-1", "s-2", "s-3", "old"] {
            files.insert(format!("{dir}/{id}.jsonl"), transcript.clone().into_bytes());
        }
        files.insert("agents/work/sessions/x.jsonl".into(), Vec::new());
        let files = files
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        let (carried, unmapped) = read(&files, &Settings::default());
        assert_eq!(carried.len(), 2, "{carried:?}");
        assert_eq!(carried[0].chat, Chat::Owner);
        assert_eq!(carried[1].chat, Chat::User(222));
        let texts: Vec<String> = carried[0].messages.iter().map(|m| m.text()).collect();
        assert_eq!(
            texts,
            [
                "What is my bike lock code?",
                "It is 7391.",
                "thanks\n\nand?",
                "You're welcome."
            ]
        );
        let said = unmapped.join("\n");
        for named in [
            "group",
            "whatsapp",
            "telegram:dm:333",
            "earlier conversations no session points to any more (past days' and reset ones), 1 of them",
            "another OpenClaw agent",
        ] {
            assert!(said.contains(named), "{named}: {said}");
        }
    }
}
