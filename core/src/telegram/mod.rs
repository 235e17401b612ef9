//! Telegram: update types in, the Bot API client out, and Markdown → Telegram HTML rendering.

pub mod api;
pub mod form;
pub mod keyboard;
pub mod pace;
pub mod render;
pub mod types;

pub use api::{BotApi, TelegramError};
pub use types::{BotIdentity, Chat, ChatId, ChatKind, Message, Update, UpdateKind, User, UserId};
pub use types::{MediaFile, PhotoSize};
