//! The web tools: [`fetch`] (`web_fetch`) and [`search`] (`web_search`), [`guard`], which
//! decides whether a URL from outside may be fetched at all (the SSRF checks), and [`html`],
//! which turns a page into text. [`config`] is `web:` of `main.yaml` (re-exported by
//! `crate::config`, which depends on the tools, not the other way round).

pub mod config;
pub mod fetch;
pub mod guard;
pub mod html;
pub mod search;

pub use config::WebConfig;

/// `text` cut to `max` characters, saying so (URLs, titles and snippets in what the web tools
/// return).
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}
