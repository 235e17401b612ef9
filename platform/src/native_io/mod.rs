//! Adapters shared by the shells that run on a normal OS with tokio (native, Lambda): the
//! Http port over reqwest with rustls, the Clock port over the system clock, a config
//! directory read from disk, and the log filter. Behind the
//! `native-io` feature, so the wasm32 build of this crate never sees them.

mod config_dir;
mod log_filter;
mod reqwest_http;
mod tokio_clock;

pub use config_dir::read_config_dir;
pub use log_filter::log_filter;
pub use reqwest_http::ReqwestHttp;
pub use tokio_clock::SystemClock;
