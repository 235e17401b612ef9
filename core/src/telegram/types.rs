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
    pub offset: usize,
    pub length: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    pub from: Option<User>,
    pub text: Option<String>,
    pub caption: Option<String>,
    #[serde(default)]
    pub entities: Vec<MessageEntity>,
    pub message_thread_id: Option<i64>,
    #[serde(default)]
    pub is_topic_message: bool,
    pub reply_to_message: Option<Box<Message>>,
    pub photo: Option<Value>,
}

impl Message {
    /// The text a person wrote: the message text, or a media caption.
    pub fn text(&self) -> Option<&str> {
        self.text
            .as_deref()
            .or(self.caption.as_deref())
            .filter(|t| !t.trim().is_empty())
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
}

/// What `getMe` tells us about ourselves.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct BotIdentity {
    pub id: i64,
    pub username: String,
}
