//! The web tools: `web_fetch` and `web_search` (soon), and [`guard`], which decides whether a
//! URL from outside may be fetched at all (the SSRF checks).

pub mod guard;
