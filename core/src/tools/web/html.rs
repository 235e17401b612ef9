//! HTML → readable text for `web_fetch`: the page's main content (its `<main>` or `<article>`
//! when it has one, else the body without navigation, headers, footers, forms and asides) as
//! Markdown-ish text: headings as `#`, list items as `-`, links as `[text](url)`, paragraphs
//! apart, `<pre>` kept as it is. Scripts, styles and everything invisible are dropped.
//!
//! Built on html5gum's tokenizer (no tree, no dependencies): good enough for text, and small in
//! the wasm.

use html5gum::{DefaultEmitter, Token, Tokenizer};

/// Elements whose content is never text the reader sees.
const HIDDEN: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "math", "head", "iframe", "object", "canvas",
    "select", "button",
];
/// Page furniture, left out when the page has no `<main>` or `<article>`.
const FURNITURE: &[&str] = &["nav", "header", "footer", "aside", "form", "menu"];
/// The deepest nesting tracked inside a skipped element (deeper tags are not tracked, so a
/// page of endless nesting cannot make each end tag search a long stack), and the most tokens
/// read of a page (about a few hundred KB of markup; the rest is not converted).
const MAX_HIDDEN_DEPTH: usize = 256;
const MAX_TOKENS: usize = 200_000;

/// Elements that end a line of text.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "figure",
    "figcaption",
    "hr",
    "address",
    "details",
    "summary",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "body",
    "caption",
    "fieldset",
    "legend",
];

/// A page as text: its title and its content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    pub title: String,
    pub text: String,
}

/// Converts `html` to text; relative links are made absolute against `base` (the page's URL).
pub fn to_text(html: &str, base: &str) -> Page {
    let tokens = tokens(html);
    let focus = ["main", "article"].into_iter().find(|f| {
        tokens
            .iter()
            .any(|t| matches!(t, Tok::Start(n, _) if n == f))
    });
    let mut out = Writer::default();
    let mut title = String::new();
    let mut in_title = false;
    // Depths of the elements being skipped or focused on, by tag name.
    let mut hidden: Vec<String> = Vec::new();
    let mut focus_depth = 0usize;
    let mut pre = 0usize;
    let mut links: Vec<Option<String>> = Vec::new();
    for t in &tokens {
        match t {
            Tok::Start(name, attrs) => {
                let name = name.as_str();
                if name == "title" {
                    in_title = true;
                }
                if !hidden.is_empty() || HIDDEN.contains(&name) || attrs.hidden {
                    if !VOID.contains(&name) && hidden.len() < MAX_HIDDEN_DEPTH {
                        hidden.push(name.to_owned());
                    }
                    continue;
                }
                if Some(name) == focus {
                    focus_depth += 1;
                }
                let outside_focus = focus.is_some() && focus_depth == 0;
                if outside_focus || (focus.is_none() && FURNITURE.contains(&name)) {
                    if focus.is_none() && !VOID.contains(&name) && hidden.len() < MAX_HIDDEN_DEPTH {
                        hidden.push(name.to_owned());
                    }
                    continue;
                }
                match name {
                    "br" => out.newline(),
                    "hr" => out.paragraph_with("---"),
                    "pre" => {
                        out.paragraph();
                        pre += 1;
                    }
                    "li" => out.line_with("- "),
                    "a" => {
                        links.push(attrs.href.as_deref().and_then(|h| absolute(h, base)));
                        out.word_start("[");
                    }
                    "img" => {
                        if let Some(alt) = attrs.alt.as_deref().filter(|a| !a.trim().is_empty()) {
                            out.text(&format!("[image: {}]", alt.trim()), false);
                        }
                    }
                    "td" | "th" => out.cell(),
                    h if heading(h).is_some() => {
                        out.paragraph();
                        out.word_start(&format!("{} ", "#".repeat(heading(h).unwrap_or(1))));
                    }
                    b if BLOCKS.contains(&b) => out.paragraph(),
                    _ => {}
                }
            }
            Tok::End(name) => {
                let name = name.as_str();
                if name == "title" {
                    in_title = false;
                }
                if let Some(pos) = hidden.iter().rposition(|h| h == name) {
                    hidden.truncate(pos);
                    continue;
                }
                if !hidden.is_empty() {
                    continue;
                }
                if focus.is_some() && focus_depth == 0 {
                    continue;
                }
                if Some(name) == focus {
                    focus_depth = focus_depth.saturating_sub(1);
                }
                match name {
                    "pre" => {
                        pre = pre.saturating_sub(1);
                        out.paragraph();
                    }
                    "li" | "tr" => out.newline(),
                    "a" => match links.pop().flatten() {
                        Some(href) => out.word_end(&format!("]({href})")),
                        None => out.word_end("]"),
                    },
                    b if BLOCKS.contains(&b) || heading(b).is_some() => out.paragraph(),
                    _ => {}
                }
            }
            Tok::Text(text) => {
                if in_title {
                    title.push_str(text);
                }
                if hidden.is_empty() && !(focus.is_some() && focus_depth == 0) {
                    out.text(text, pre > 0);
                }
            }
        }
    }
    Page {
        title: collapse(&title),
        text: out.finish(),
    }
}

/// Elements without content (no end tag follows).
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

fn heading(name: &str) -> Option<usize> {
    match name.as_bytes() {
        [b'h', d @ b'1'..=b'6'] => Some(usize::from(d - b'0')),
        _ => None,
    }
}

/// What the converter needs of a start tag.
#[derive(Debug, Default)]
struct Attrs {
    href: Option<String>,
    alt: Option<String>,
    hidden: bool,
}

#[derive(Debug)]
enum Tok {
    Start(String, Attrs),
    End(String),
    Text(String),
}

fn tokens(html: &str) -> Vec<Tok> {
    let mut emitter = DefaultEmitter::default();
    // Script and style contents are raw text, not markup.
    emitter.naively_switch_states(true);
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut out = Vec::new();
    for token in Tokenizer::new_with_emitter(html, emitter)
        .flatten()
        .take(MAX_TOKENS)
    {
        match token {
            Token::StartTag(tag) => {
                let attr = |name: &str| {
                    tag.attributes
                        .iter()
                        .find(|(k, _)| k.0 == name.as_bytes())
                        .map(|(_, v)| lossy(&v.value.0))
                };
                let hidden = attr("hidden").is_some()
                    || attr("aria-hidden").is_some_and(|v| v == "true")
                    || attr("style").is_some_and(|s| {
                        let s = s.replace(' ', "").to_ascii_lowercase();
                        s.contains("display:none") || s.contains("visibility:hidden")
                    });
                let attrs = Attrs {
                    href: attr("href"),
                    alt: attr("alt"),
                    hidden,
                };
                let name = lossy(&tag.name.0).to_ascii_lowercase();
                let void = tag.self_closing || VOID.contains(&name.as_str());
                out.push(Tok::Start(name.clone(), attrs));
                if void && !VOID.contains(&name.as_str()) {
                    out.push(Tok::End(name));
                }
            }
            Token::EndTag(tag) => out.push(Tok::End(lossy(&tag.name.0).to_ascii_lowercase())),
            Token::String(s) => out.push(Tok::Text(lossy(&s.value.0))),
            _ => {}
        }
    }
    out
}

/// `href` as an absolute http(s) URL, or `None` (fragments, `javascript:`, `mailto:` …).
fn absolute(href: &str, base: &str) -> Option<String> {
    let href = href.trim();
    let lower = href.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Some(href.to_owned());
    }
    if href.is_empty() || href.starts_with('#') || lower.contains(':') && !href.starts_with('/') {
        return None;
    }
    let scheme_end = base.find("://")? + 3;
    let origin_end = base[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(base.len(), |i| scheme_end + i);
    if let Some(rest) = href.strip_prefix("//") {
        return Some(format!("{}{rest}", &base[..scheme_end]));
    }
    if href.starts_with('/') {
        return Some(format!("{}{href}", &base[..origin_end]));
    }
    // Relative to the base's directory.
    let path_end = base[origin_end..]
        .find(['?', '#'])
        .map_or(base.len(), |i| origin_end + i);
    let dir_end = base[origin_end..path_end]
        .rfind('/')
        .map_or(origin_end, |i| origin_end + i + 1);
    let dir = &base[..dir_end];
    let sep = if dir.ends_with('/') { "" } else { "/" };
    Some(format!("{dir}{sep}{href}"))
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Builds the text: collapses whitespace outside `<pre>`, at most one blank line in a row.
#[derive(Default)]
struct Writer {
    out: String,
    /// A space is owed before the next word.
    space: bool,
}

impl Writer {
    fn text(&mut self, text: &str, pre: bool) {
        if pre {
            self.out.push_str(text);
            self.space = false;
            return;
        }
        if text.starts_with(char::is_whitespace) {
            self.space = true;
        }
        for (i, word) in text.split_whitespace().enumerate() {
            if i > 0 || self.space {
                self.separate();
            }
            self.out.push_str(word);
            self.space = false;
        }
        if text.ends_with(char::is_whitespace) {
            self.space = true;
        }
    }
    fn separate(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with(['\n', ' ', '[']) {
            self.out.push(' ');
        }
    }
    fn word_start(&mut self, s: &str) {
        if self.space {
            self.separate();
        }
        self.out.push_str(s);
        self.space = false;
    }
    fn word_end(&mut self, s: &str) {
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        self.out.push_str(s);
    }
    /// A table cell: `| ` at the start of a line, ` | ` after another cell.
    fn cell(&mut self) {
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        if self.out.is_empty() || self.out.ends_with('\n') {
            self.out.push_str("| ");
        } else {
            self.out.push_str(" | ");
        }
        self.space = false;
    }
    fn newline(&mut self) {
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
        self.space = false;
    }
    fn line_with(&mut self, prefix: &str) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.newline();
        }
        self.out.push_str(prefix);
        self.space = false;
    }
    fn paragraph(&mut self) {
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        if self.out.is_empty() || self.out.ends_with("\n\n") {
            return;
        }
        self.out.push_str(if self.out.ends_with('\n') {
            "\n"
        } else {
            "\n\n"
        });
        self.space = false;
    }
    fn paragraph_with(&mut self, s: &str) {
        self.paragraph();
        self.out.push_str(s);
        self.paragraph();
    }
    fn finish(self) -> String {
        // Lines that are only list markers or table bars carry nothing.
        let lines: Vec<&str> = self
            .out
            .lines()
            .map(str::trim_end)
            .filter(|l| !matches!(l.trim(), "-" | "|"))
            .collect();
        let mut text = String::new();
        let mut blank = true;
        for l in lines {
            if l.trim().is_empty() {
                if !blank {
                    text.push('\n');
                }
                blank = true;
                continue;
            }
            text.push_str(l);
            text.push('\n');
            blank = false;
        }
        text.trim_end().to_owned()
    }
}

#[cfg(test)]
mod tests;
