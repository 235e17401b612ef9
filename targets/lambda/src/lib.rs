//! The clawless AWS Lambda shell: one function behind a Function URL that acknowledges
//! Telegram webhooks, drains chats in an asynchronous self-invocation, and sweeps on a
//! schedule; state in one DynamoDB table.
//!
//! # Layout
//! - [`dynamo`]: the Kv, Vectors, TextIndex and Files ports over one DynamoDB table, one port
//!   per file.
//! - [`events`]: dispatch of the three event kinds (Function URL, drain, schedule).
//! - [`invoke`]: the asynchronous self-invocation that runs the work after the ack.
//! - [`setup`]: environment → `App` (the only place that reads env vars).

pub mod dynamo;
pub mod events;
pub mod invoke;
pub mod setup;
