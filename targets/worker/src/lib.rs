//! The Cloudflare Worker shell: Telegram webhooks on `POST /telegram/<connector>`, the agent
//! turn after the response under `ctx.wait_until`, and the cron trigger running the scheduled
//! job (retries, leftovers, memory re-index). Storage is one D1 database (see [`d1`]); vectors go
//! to Vectorize when an index is bound as `VECTORIZE`, else to D1; memory is embedded by
//! Workers AI when it is bound as `AI`, else by the core's local embedder.
//!
//! The only places in this shell that read bindings are [`setup`] and, in the front's build
//! (feature `front`: the webhook's ack alone, handing lanes to this Worker through the queue),
//! `front`.

pub mod ai;
pub mod d1;
#[cfg(target_arch = "wasm32")]
mod inbound;
pub mod io;
#[cfg(all(target_arch = "wasm32", not(feature = "front")))]
mod log;
pub mod vectorize;

#[cfg(all(
    target_arch = "wasm32",
    feature = "test-routes",
    not(feature = "front")
))]
mod bench;
#[cfg(all(
    target_arch = "wasm32",
    feature = "test-routes",
    not(feature = "front")
))]
mod conformance;
#[cfg(all(target_arch = "wasm32", not(feature = "front")))]
mod events;
#[cfg(all(target_arch = "wasm32", feature = "front"))]
mod front;
#[cfg(all(target_arch = "wasm32", not(feature = "front")))]
mod setup;
