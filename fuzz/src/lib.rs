//! What the fuzz targets share: a checker for the HTML Telegram accepts, the invariants every
//! outgoing message part obeys, and the app on in-memory ports the webhook target drives.
//!
//! # Layout
//! - [`html`]: `check_html`, a small parser of Telegram's HTML subset (tags, attributes,
//!   entities, nesting).
//! - [`check_part`]: the invariants of one message part.
//! - [`world`]: `World`, a fresh `App` on in-memory ports with a fake Bot API that checks every
//!   call against the spec and a fake model scripted by the fuzz input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod html;
pub mod world;

use clawless_core::telegram::render::{strip_html, utf16_len, Part, MAX_MESSAGE_LEN};

/// Telegram's limit for a document caption, in UTF-16 units.
pub const MAX_CAPTION_LEN: usize = 1024;

/// One outgoing part: 1..=4096 UTF-16 units (1024 for a document's caption), something
/// visible once the HTML is parsed (Telegram refuses an empty message), and HTML Telegram can
/// parse.
pub fn check_part(part: &Part) -> Result<(), String> {
    let max = if part.document.is_some() {
        MAX_CAPTION_LEN
    } else {
        MAX_MESSAGE_LEN
    };
    let n = utf16_len(&part.text);
    if n == 0 || n > max {
        return Err(format!("part is {n} UTF-16 units; allowed 1..={max}"));
    }
    if part.html {
        html::check_html(&part.text)?;
        if strip_html(&part.text).trim().is_empty() {
            return Err(format!("HTML part shows nothing: {:?}", part.text));
        }
    } else if part.text.trim().is_empty() {
        return Err(format!("plain part is blank: {:?}", part.text));
    }
    Ok(())
}
