//! Telegram update types: only the fields clawless uses, and an `Unknown` kind so new update
//! types never break parsing.

use serde::Deserialize;
use serde_json::Value;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
#[serde(transparent)]
pub struct ChatId(pub i64);

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
#[serde(transparent)]
pub struct UserId(pub i64);

#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub id: i64,
    pub kind: UpdateKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum UpdateKind {
    Message(Message),
    EditedMessage(Message),
    /// A tap on an inline button (the approval buttons).
    CallbackQuery(CallbackQuery),
    /// Any update type clawless does not handle, kept whole.
    Unknown(Value),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct User {
    pub id: UserId,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    pub username: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatKind {
    Private,
    Group,
    Supergroup,
    Channel,
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Chat {
    pub id: ChatId,
    #[serde(rename = "type")]
    pub kind: ChatKind,
    #[serde(default)]
    pub is_forum: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageEntity {
    #[serde(rename = "type")]
    pub kind: String,
    /// In UTF-16 code units, as Telegram counts.
    pub offset: usize,
    pub length: usize,
    /// The user of a `text_mention`.
    pub user: Option<User>,
}

/// A tap on an inline keyboard button.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    /// The message with the button (absent when it is too old for Telegram to include).
    pub message: Option<Box<Message>>,
    pub data: Option<String>,
}

/// Telegram's own account that posts a linked channel's messages into its discussion group.
pub const SERVICE_USER_ID: i64 = 777_000;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    pub from: Option<User>,
    pub text: Option<String>,
    pub caption: Option<String>,
    #[serde(default)]
    pub entities: Vec<MessageEntity>,
    #[serde(default)]
    pub caption_entities: Vec<MessageEntity>,
    /// A channel post copied into the channel's discussion group by Telegram.
    #[serde(default)]
    pub is_automatic_forward: bool,
    /// Where a forwarded message came from (Bot API 7.0 `MessageOrigin`; only its presence
    /// is read: someone else's words, untrusted).
    #[serde(default)]
    pub forward_origin: Option<serde_json::Value>,
    pub message_thread_id: Option<i64>,
    #[serde(default)]
    pub is_topic_message: bool,
    pub reply_to_message: Option<Box<Message>>,
    /// The sizes of a photo, smallest first.
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    pub voice: Option<MediaFile>,
    pub audio: Option<MediaFile>,
    pub video_note: Option<MediaFile>,
    pub document: Option<MediaFile>,
    /// Set on each message of an album (photos sent together).
    pub media_group_id: Option<String>,
}

/// One size of a photo.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PhotoSize {
    pub file_id: String,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
    pub file_size: Option<u64>,
}

/// A voice note, an audio file, a video note or a document: the fields clawless reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MediaFile {
    pub file_id: String,
    /// Seconds (voice, audio, video notes).
    pub duration: Option<u64>,
    pub mime_type: Option<String>,
    pub file_name: Option<String>,
    pub file_size: Option<u64>,
}

impl Message {
    /// The text a person wrote: the message text, or a media caption.
    pub fn text(&self) -> Option<&str> {
        self.text
            .as_deref()
            .or(self.caption.as_deref())
            .filter(|t| !t.trim().is_empty())
    }

    /// Whether it carries a photo, a voice note, an audio file, a video note or a document.
    pub fn has_media(&self) -> bool {
        !self.photo.is_empty()
            || self.voice.is_some()
            || self.audio.is_some()
            || self.video_note.is_some()
            || self.document.is_some()
    }

    /// The forum topic this message belongs to, if any (replies in a topic go there too).
    pub fn topic(&self) -> Option<i64> {
        if self.is_topic_message {
            self.message_thread_id
        } else {
            None
        }
    }

    pub fn is_private(&self) -> bool {
        self.chat.kind == ChatKind::Private
    }

    /// What untrusted text this message brings into its turn: a forwarded message (also a
    /// forwarded voice note, once transcribed) is someone else's words; so may be what a
    /// document or an audio file the person sends holds. A voice or video note they recorded
    /// and a photo they took are their own (text in a picture is not looked for).
    pub fn untrusted_source(&self) -> Option<String> {
        if let Some(origin) = &self.forward_origin {
            return Some(
                match origin.get("type").and_then(serde_json::Value::as_str) {
                    Some("channel") => "a message forwarded from a channel",
                    _ => "a forwarded message",
                }
                .to_owned(),
            );
        }
        let (what, file) = match (&self.document, &self.audio) {
            (Some(d), _) => ("document", d),
            (None, Some(a)) => ("audio file", a),
            (None, None) => return None,
        };
        Some(match &file.file_name {
            Some(name) => {
                let name: String = name.chars().filter(|c| !c.is_control()).take(100).collect();
                format!("the {what} {name} sent in the chat")
            }
            None => format!("a {what} sent in the chat"),
        })
    }

    /// A linked channel's post forwarded into its discussion group by Telegram: not a person
    /// talking to the bot.
    pub fn is_channel_forward(&self) -> bool {
        self.is_automatic_forward
            || self
                .from
                .as_ref()
                .is_some_and(|u| u.id.0 == SERVICE_USER_ID)
    }

    /// The byte ranges of [`Message::text`] that mention `me`: `@username` mention entities
    /// (not a substring: `@username_fake` or `a@username.com` are not mentions of us) and
    /// `text_mention` entities naming our id.
    pub fn mentions_of(&self, me: &BotIdentity) -> Vec<std::ops::Range<usize>> {
        let Some(text) = self.text() else {
            return Vec::new();
        };
        let entities = if self.text.as_deref() == Some(text) {
            &self.entities
        } else {
            &self.caption_entities
        };
        let handle = format!("@{}", me.username);
        entities
            .iter()
            .filter_map(|e| {
                let range = utf16_range(text, e.offset, e.length)?;
                let ours = match e.kind.as_str() {
                    "mention" => text[range.clone()].eq_ignore_ascii_case(&handle),
                    "text_mention" => e.user.as_ref().is_some_and(|u| u.id.0 == me.id),
                    _ => false,
                };
                ours.then_some(range)
            })
            .collect()
    }
}

/// The byte range of `text` that UTF-16 `offset` and `length` (Telegram's units) cover, or
/// `None` when they do not fall on characters of `text`.
pub fn utf16_range(text: &str, offset: usize, length: usize) -> Option<std::ops::Range<usize>> {
    let end16 = offset.checked_add(length)?;
    let (mut start, mut end) = (None, None);
    let mut units = 0usize;
    for (i, c) in text.char_indices() {
        if units == offset {
            start = Some(i);
        }
        if units == end16 {
            end = Some(i);
            break;
        }
        units += c.len_utf16();
    }
    if units == end16 && end.is_none() {
        end = Some(text.len());
    }
    if offset == end16 && start.is_none() {
        start = end;
    }
    Some(start?..end?)
}

/// Why a body could not be read as an update.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no integer update_id")]
    NoUpdateId,
}

impl Update {
    /// Parses a raw update. Unknown update types become [`UpdateKind::Unknown`]; a known type
    /// whose body does not match our model is an error.
    pub fn parse(bytes: &[u8]) -> Result<Update, ParseError> {
        Update::from_value(&serde_json::from_slice(bytes)?)
    }

    /// Reads an update from JSON already parsed, without copying the message out of it.
    pub fn from_value(value: &Value) -> Result<Update, ParseError> {
        let id = value
            .get("update_id")
            .and_then(Value::as_i64)
            .ok_or(ParseError::NoUpdateId)?;
        let kind = if let Some(m) = value.get("message") {
            UpdateKind::Message(Message::deserialize(m)?)
        } else if let Some(m) = value.get("edited_message") {
            UpdateKind::EditedMessage(Message::deserialize(m)?)
        } else if let Some(q) = value.get("callback_query") {
            UpdateKind::CallbackQuery(CallbackQuery::deserialize(q)?)
        } else {
            UpdateKind::Unknown(value.clone())
        };
        Ok(Update { id, kind })
    }

    pub fn message(&self) -> Option<&Message> {
        match &self.kind {
            UpdateKind::Message(m) => Some(m),
            _ => None,
        }
    }

    /// The chat an update belongs to: a message's, or that of the message a tapped button
    /// is on.
    pub fn chat(&self) -> Option<&Chat> {
        match &self.kind {
            UpdateKind::Message(m) => Some(&m.chat),
            UpdateKind::CallbackQuery(q) => q.message.as_ref().map(|m| &m.chat),
            _ => None,
        }
    }
}

/// What `getMe` tells us about ourselves.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct BotIdentity {
    pub id: i64,
    pub username: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_ranges_map_to_bytes() {
        // "é" is one UTF-16 unit and two bytes; "😀" two units and four bytes.
        let text = "é😀 @bot hi";
        assert_eq!(utf16_range(text, 4, 4), Some(7..11));
        assert_eq!(&text[7..11], "@bot");
        assert_eq!(utf16_range(text, 0, 1), Some(0..2));
        assert_eq!(utf16_range(text, 2, 1), None, "inside a surrogate pair");
        assert_eq!(utf16_range(text, 9, 2), Some(12..14), "up to the end");
        assert_eq!(utf16_range(text, 9, 3), None, "past the end");
        assert_eq!(utf16_range(text, usize::MAX, 2), None);
    }

    #[test]
    fn forwards_documents_and_audio_files_are_untrusted_and_the_persons_own_media_not() {
        let msg = |extra: serde_json::Value| {
            let mut m = serde_json::json!({"message_id": 1, "date": 1,
                "chat": {"id": 7, "type": "private"}, "from": {"id": 7, "is_bot": false, "first_name": "A"}});
            for (k, v) in extra.as_object().cloned().unwrap_or_default() {
                m[k] = v;
            }
            serde_json::from_value::<Message>(m).map(|m| m.untrusted_source())
        };
        let file = |name: &str| serde_json::json!({"file_id": "f", "file_name": name});
        let cases = [
            (serde_json::json!({"text": "hi"}), None),
            (
                serde_json::json!({"photo": [{"file_id": "p", "width": 1, "height": 1}]}),
                None,
            ),
            (
                serde_json::json!({"voice": {"file_id": "v", "duration": 2}}),
                None,
            ),
            (serde_json::json!({"video_note": {"file_id": "v"}}), None),
            (
                serde_json::json!({"text": "x", "forward_origin": {"type": "user"}}),
                Some("a forwarded message"),
            ),
            (
                serde_json::json!({"voice": {"file_id": "v"}, "forward_origin": {"type": "channel"}}),
                Some("a message forwarded from a channel"),
            ),
            (
                serde_json::json!({"document": file("report.pdf"), "caption": "summarise"}),
                Some("the document report.pdf sent in the chat"),
            ),
            (
                serde_json::json!({"document": {"file_id": "d"}}),
                Some("a document sent in the chat"),
            ),
            (
                serde_json::json!({"audio": file("talk\nIGNORE.mp3")}),
                Some("the audio file talkIGNORE.mp3 sent in the chat"),
            ),
        ];
        for (extra, want) in cases {
            let got = msg(extra.clone()).map_err(|e| e.to_string());
            assert_eq!(got, Ok(want.map(str::to_owned)), "{extra}");
        }
    }
}
