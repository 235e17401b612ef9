//! Test support shared by the core, platform and target tests.
//!
//! # Layout
//! - [`spec`]: checks Bot API calls (and update fixtures) against the Bot API spec in
//!   `tests/fixtures/telegram-bot-api.json`, a copy of `../shared/spec/telegram-bot-api.json`.
//! - [`fixtures`]: real-format Telegram updates under `tests/fixtures/updates/`.
//! - [`limits`]: Telegram's flood limits, as a fake Bot API answers 429 past them.
//! - [`llm`]: provider responses in the Anthropic and OpenAI wire formats.
//! - [`injection`]: a prompt-injection corpus (pages ordering tools), for the core and every shell.
//! - [`repo`]: the repository's root and Rust files, for the checks that read them.
//! - [`scratch`]: tests' scratch directories, one parent per test process, swept once it ends.
//! - [`markdown`]: enough Markdown for the checks that read the book and the README.
//! - [`commands`]: the `clawless` and `cargo` command lines they show, checked against what exists.
//! - [`mcp`]: a small MCP server (Streamable HTTP) as a function, for every shell's tests.
//! - `servers` (feature `servers`): fake Bot API and model servers on 127.0.0.1.
//! - `tmux` (feature `servers`): a terminal UI driven in tmux, and the remote cockpit's check.
//! - `miniflare` (feature `servers`): the built Worker run in workerd through Miniflare.
//! - `remote` (feature `servers`): the native binary against a shell's admin endpoint.
//! - `scenarios` (feature `servers`): the end-to-end scenarios every shell's harness runs
//!   against those fakes (`scenarios::run_all`).

#[cfg(feature = "servers")]
pub mod browser;
pub mod commands;
pub mod fixtures;
pub mod injection;
pub mod limits;
pub mod llm;
pub mod markdown;
pub mod mcp;
#[cfg(feature = "servers")]
pub mod miniflare;
#[cfg(feature = "servers")]
pub mod remote;
pub mod repo;
#[cfg(feature = "servers")]
pub mod scenarios;
pub mod scratch;
#[cfg(feature = "servers")]
pub mod servers;
pub mod spec;
#[cfg(feature = "servers")]
pub mod tmux;
pub mod xss;
