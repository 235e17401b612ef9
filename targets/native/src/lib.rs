//! The clawless native shell: adapters for every port on this machine, and the runners that
//! drive the core (long polling, the webhook server, the background drainer).
//!
//! # Layout
//! - [`store`]: libsql on disk: the Kv and Vectors ports.
//! - [`fs`]: the Files port over a directory.
//! - [`http`]: the Http port over reqwest (rustls).
//! - [`clock`]: the Clock port over the system clock and tokio timers.
//! - [`runner`]: drains lanes after the ack, sweeps on a timer, drains in-flight work on stop.
//! - [`server`]: the webhook server (`POST /telegram/<connector>`, `GET /healthz`).
//! - [`poll`]: long polling with `getUpdates`.
//! - [`setup`]: reading env, config and data dir into an `App`.

pub mod clock;
pub mod fs;
pub mod http;
pub mod poll;
pub mod runner;
pub mod server;
pub mod setup;
pub mod store;
