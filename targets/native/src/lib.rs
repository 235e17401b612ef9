//! The clawless native shell: adapters for every port on this machine, and the runners that
//! drive the core (long polling, the webhook server, the background drainer).
//!
//! # Layout
//! - [`store`]: libsql on disk: the database thread ([`store::Db`]) and the adapters over it,
//!   one port per file: [`store::kv`] (`clawless.db`), [`store::vectors`] and [`store::text`]
//!   (FTS5) (the memory index).
//! - [`index`]: the memory index database, `index.db`, on a thread of its own: its schema,
//!   and starting it over when the file is new.
//! - [`vecindex`]: the quantized in-memory mirror the Vectors port scans before an exact
//!   re-rank.
//! - [`fs`]: the Files port over a directory; [`exec`]: the Exec port (`/bin/sh -c` in the
//!   workspace, output capped, killed at the timeout); [`program`]: programs it starts and
//!   speaks to in lines (MCP servers run locally); [`fence`]: how both are fenced in (a PID
//!   namespace of their own where the machine allows, a scrubbed environment).
//! - Http and Clock come from `clawless_platform::native_io` (shared with the Lambda).
//! - [`runner`]: drains lanes after the ack, sweeps on a timer, drains in-flight work on stop.
//! - [`listen`]: the webhook listener: accept loop, timeouts, shutdown deadline.
//! - [`conns`]: its open connections: the cap, and idle ones giving way at it.
//! - [`server`]: the webhook service (`POST /telegram/<connector>`, `GET /healthz`): checks
//!   before it reads.
//! - [`health`]: `clawless health`, the client of `GET /healthz` (the image's HEALTHCHECK).
//! - [`poll`]: long polling with `getUpdates`.
//! - [`pairing`]: `clawless pairing list|approve|remove` as text for a terminal.
//! - [`skills`]: `clawless skills list` as text for a terminal.
//! - [`setup`]: reading env, config and data dir into an `App`.
//! - [`cli`]: the command line (every command and flag of `clawless`).
//! - [`init`]: `clawless init`, the first set-up (token, owner, provider key → `.env`).
//! - [`remote`]: the command line against a deployed Worker or Lambda (`/admin/<name>`).
//! - [`archive_cli`], [`backup`]: export, import and backups; [`openclaw_cli`]: coming over
//!   from OpenClaw.

pub mod archive_cli;
pub mod backup;
pub mod cli;
pub mod conns;
pub mod exec;
pub mod fence;
pub mod fs;
pub mod health;
pub mod index;
pub mod init;
pub mod listen;
pub mod openclaw_cli;
pub mod pairing;
pub mod poll;
pub mod program;
pub mod remote;
pub mod runner;
pub mod sandbox;
pub mod server;
pub mod setup;
pub mod skills;
pub mod store;
pub mod tui;
pub mod vecindex;
