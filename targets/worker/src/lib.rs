//! The Cloudflare Worker shell: Telegram webhooks on `POST /telegram/<connector>`, the agent
//! turn after the response under `ctx.wait_until`, and the cron trigger running the scheduled
//! job (retries, leftovers, memory re-index). Storage is one D1 database (see [`d1`]); vectors go
//! to Vectorize when an index is bound as `VECTORIZE`, else to D1; memory is embedded by
//! Workers AI when it is bound as `AI`, else by the core's local embedder.
//!
//! The only place in this shell that reads bindings is [`setup`].

pub mod ai;
pub mod d1;
pub mod io;
#[cfg(target_arch = "wasm32")]
mod log;
pub mod vectorize;

#[cfg(all(target_arch = "wasm32", feature = "test-routes"))]
mod bench;
#[cfg(all(target_arch = "wasm32", feature = "test-routes"))]
mod conformance;
#[cfg(target_arch = "wasm32")]
mod events;
#[cfg(target_arch = "wasm32")]
mod setup;
