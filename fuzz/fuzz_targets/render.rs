//! Markdown → Telegram HTML and splitting: `render_parts`, `plain_parts`, `split` and `to_html`
//! on any text. Every part is within Telegram's limit, shows something, and (HTML) parses as
//! Telegram HTML; splitting loses no visible character.
//!
//! Input: one byte for `split`'s size (16 + 32 × byte UTF-16 units, at least a sixteenth of
//! the text), then the text.

#![no_main]

use clawless_core::telegram::render::{plain_parts, render_parts, split, to_html, utf16_len};
use clawless_fuzz::{check_part, html::check_html};
use libfuzzer_sys::fuzz_target;

/// Whether every non-whitespace character of `text` appears, in order, in `chunks`.
fn keeps_text(text: &str, chunks: &[String]) -> bool {
    let mut out = chunks.iter().flat_map(|c| c.chars());
    text.chars()
        .filter(|c| !c.is_whitespace())
        .all(|c| out.any(|o| o == c))
}

fuzz_target!(|data: &[u8]| {
    let Some((size, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text);

    // Small sizes stress the fence handling; at most about 16 chunks keep a run linear.
    let max = (16 + 32 * usize::from(*size)).max(text.len() / 16);
    let chunks = split(&text, max);
    for c in &chunks {
        assert!(utf16_len(c) <= max.max(16), "chunk over {max}: {c:?}");
        assert!(!c.trim().is_empty(), "blank chunk");
    }
    assert!(keeps_text(&text, &chunks), "split lost text");

    for part in render_parts(&text) {
        if let Err(e) = check_part(&part) {
            panic!("{e}\nrendered from {text:?}");
        }
    }
    let plain = plain_parts(&text);
    for part in &plain {
        if let Err(e) = check_part(part) {
            panic!("{e}\nplain from {text:?}");
        }
    }
    if let Err(e) = check_html(&to_html(&text)) {
        panic!("{e}\nto_html of {text:?}");
    }
});
