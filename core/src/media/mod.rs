//! What people send besides text: photos, voice notes, audio, video notes and documents.
//!
//! - [`config`]: `media:` in `main.yaml` (sizes, durations, the album wait).
//! - [`kind`]: what a message carries and which file of it to fetch.
//! - [`transcribe`]: speech to text (`Transcriber`, the OpenAI-compatible adapter).
//! - [`image`]: pictures from a prompt (`Painter`, the OpenAI-compatible adapter).
//! - [`service`]: which OpenAI-compatible speech or image service the settings name.
//! - [`speak`]: text to speech for voice replies (`Speaker`, the OpenAI-compatible adapter).
//!
//! The turn stage (`turn/media.rs`) downloads what a turn needs and builds the user's message
//! from it.

pub mod config;
pub mod image;
pub mod kind;
pub mod service;
pub mod speak;
pub mod transcribe;

pub use config::MediaConfig;
pub use kind::Media;
pub use speak::Speaker;
pub use transcribe::Transcriber;
