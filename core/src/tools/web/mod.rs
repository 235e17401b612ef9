//! The web tools: [`fetch`] (`web_fetch`) and [`search`] (`web_search`), [`guard`], which
//! decides whether a URL from outside may be fetched at all (the SSRF checks), and [`html`],
//! which turns a page into text.

pub mod fetch;
pub mod guard;
pub mod html;
pub mod search;
