//! Test support shared by the core, platform and target tests.
//!
//! # Layout
//! - [`spec`]: checks Bot API calls (and update fixtures) against the Bot API spec in
//!   `tests/fixtures/telegram-bot-api.json`, a copy of `../shared/spec/telegram-bot-api.json`.
//! - [`fixtures`]: real-format Telegram updates under `tests/fixtures/updates/`.
//! - [`llm`]: provider responses in the Anthropic and OpenAI wire formats.

pub mod fixtures;
pub mod llm;
pub mod spec;
