//! Model Markdown → Telegram HTML, and splitting long replies into messages Telegram accepts.
//!
//! Supported: fenced code blocks, `inline code`, **bold**, *italic*, ~~strike~~, [links](url),
//! `#` headings (as bold) and `-`/`*` bullets. Everything else is escaped text, so the output
//! is always well-formed HTML with balanced tags.

/// Telegram's limit for a message text, counted (conservatively) in UTF-16 code units.
pub const MAX_MESSAGE_LEN: usize = 4096;

/// One outgoing message: its text and whether it is HTML.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Part {
    pub text: String,
    pub html: bool,
    /// Sent as a `.md` document with `text` as its caption (an answer too long for messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
    /// Sent as a voice note speaking these words (`text` is unused): spoken when it is sent,
    /// so a crash before `sendVoice` speaks it again but sends it once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// Sent as a photo: the Files path of a picture made this turn, `text` its caption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub photo: Option<String>,
    /// Inline buttons under the message, one per row: `(label, callback data ≤ 64 bytes)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<(String, String)>,
    /// Link buttons after those, one per row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkButton>,
}

/// A button that opens a page: in the browser (`url`), or as a Mini App inside Telegram
/// (`web_app`, HTTPS only, private chats only).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LinkButton {
    pub label: String,
    pub url: String,
    #[serde(default)]
    pub web_app: bool,
}

/// The caption of an answer sent as a document.
pub const DOCUMENT_CAPTION: &str = "My answer is long, so here it is as a file.";

/// A voice note speaking `words`.
pub fn voice_part(words: String) -> Part {
    Part {
        text: String::new(),
        html: false,
        document: None,
        voice: Some(words),
        photo: None,
        buttons: Vec::new(),
        links: Vec::new(),
    }
}

/// A photo: the picture at Files path `full`, with a plain `caption`.
pub fn photo_part(full: String, caption: String) -> Part {
    Part {
        text: caption,
        photo: Some(full),
        ..Part::default()
    }
}

/// An answer as one `.md` document instead of many messages.
pub fn document_part(markdown: &str) -> Part {
    Part {
        text: DOCUMENT_CAPTION.into(),
        html: false,
        document: Some(markdown.to_owned()),
        voice: None,
        photo: None,
        buttons: Vec::new(),
        links: Vec::new(),
    }
}

pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Renders a reply into the messages to send: HTML parts each within [`MAX_MESSAGE_LEN`].
/// Falls back to plain text parts by [`plain_parts`] when Telegram refuses the HTML.
pub fn render_parts(markdown: &str) -> Vec<Part> {
    let mut out = Vec::new();
    for chunk in split(markdown, 3500) {
        push_rendered(&mut out, &chunk, 3500);
    }
    if out.is_empty() {
        out.push(Part {
            text: "(empty reply)".into(),
            html: false,
            document: None,
            voice: None,
            photo: None,
            buttons: Vec::new(),
            links: Vec::new(),
        });
    }
    out
}

/// Renders `chunk`; when escaping grew it past the limit, splits it smaller and tries again.
fn push_rendered(out: &mut Vec<Part>, chunk: &str, budget: usize) {
    let html = to_html(chunk);
    // Markup alone (an empty code span or block, found by fuzzing: "``" → `<code></code>`)
    // shows nothing, and Telegram refuses an empty message: send the chunk as written.
    if strip_html(&html).trim().is_empty() {
        out.extend(plain_parts(chunk));
        return;
    }
    if utf16_len(&html) <= MAX_MESSAGE_LEN || budget <= 64 {
        out.push(Part {
            text: html,
            html: true,
            document: None,
            voice: None,
            photo: None,
            buttons: Vec::new(),
            links: Vec::new(),
        });
        return;
    }
    for small in split(chunk, budget / 2) {
        push_rendered(out, &small, budget / 2);
    }
}

/// The same text as plain messages, each within the limit.
pub fn plain_parts(text: &str) -> Vec<Part> {
    split(text, MAX_MESSAGE_LEN)
        .into_iter()
        .map(|text| Part {
            text,
            html: false,
            document: None,
            voice: None,
            photo: None,
            buttons: Vec::new(),
            links: Vec::new(),
        })
        .collect()
}

/// Splits `text` into chunks of at most `max` UTF-16 units, preferring paragraph breaks, then
/// line breaks, then spaces. A code fence cut in two is closed and reopened so each chunk
/// renders on its own. Blank-only chunks are dropped.
pub fn split(text: &str, max: usize) -> Vec<String> {
    let max = max.max(16);
    let mut chunks = Vec::new();
    let mut rest = text.trim();
    let mut reopen: Option<String> = None;
    while !rest.is_empty() {
        let prefix = reopen
            .take()
            .map(|fence| format!("{fence}\n"))
            .unwrap_or_default();
        let budget = max.saturating_sub(utf16_len(&prefix) + 4);
        let (head, tail) = if utf16_len(rest) <= budget {
            (rest, "")
        } else {
            cut(rest, budget)
        };
        let mut chunk = format!("{prefix}{head}");
        if let Some(fence) = open_fence(&chunk) {
            if !tail.trim().is_empty() {
                chunk.push_str("\n```");
                // Reopened with its language only when the fence line is short: a long one
                // (found by fuzzing) left no room for text after it, and the loop never
                // advanced, pushing chunks until memory ran out.
                reopen = Some(if utf16_len(&fence) <= max / 4 {
                    fence
                } else {
                    "```".into()
                });
            }
        }
        if !chunk.trim().is_empty() {
            chunks.push(chunk.trim_end().to_owned());
        }
        rest = tail
            .strip_prefix(' ')
            .unwrap_or(tail)
            .trim_start_matches('\n');
    }
    chunks
}

/// Cuts at the best boundary within `budget` UTF-16 units.
fn cut(s: &str, budget: usize) -> (&str, &str) {
    let mut end = 0;
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > budget {
            break;
        }
        end = i + c.len_utf8();
    }
    let window = &s[..end];
    let at = ["\n\n", "\n", " "]
        .iter()
        .find_map(|sep| window.rfind(sep).filter(|&p| p > end / 3))
        .unwrap_or(end);
    (&s[..at], &s[at..])
}

/// The opening fence line (```` ```lang ````) left open at the end of `s`, if any.
fn open_fence(s: &str) -> Option<String> {
    let mut open = None;
    for line in s.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            open = if open.is_some() {
                None
            } else {
                Some(t.to_owned())
            };
        }
    }
    open
}

/// Converts Markdown to Telegram HTML.
pub fn to_html(md: &str) -> String {
    let mut out = String::with_capacity(md.len() + 32);
    let mut lines = md.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            let mut code = String::new();
            for l in lines.by_ref() {
                if l.trim_start().starts_with("```") {
                    break;
                }
                code.push_str(l);
                code.push('\n');
            }
            let lang = lang.trim();
            if lang.is_empty()
                || !lang
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-')
            {
                out.push_str(&format!(
                    "<pre>{}</pre>",
                    escape(code.trim_end_matches('\n'))
                ));
            } else {
                out.push_str(&format!(
                    "<pre><code class=\"language-{lang}\">{}</code></pre>",
                    escape(code.trim_end_matches('\n'))
                ));
            }
        } else if let Some(h) = heading(trimmed) {
            out.push_str(&format!("<b>{}</b>", inline(h)));
        } else if let Some(item) = trimmed
            .strip_prefix("- ")
            .or_else(|| trimmed.strip_prefix("* "))
        {
            let indent = &line[..line.len() - trimmed.len()];
            out.push_str(indent);
            out.push_str("• ");
            out.push_str(&inline(item));
        } else {
            out.push_str(&inline(line));
        }
        if lines.peek().is_some() {
            out.push('\n');
        }
    }
    out
}

fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) {
        line[hashes..].strip_prefix(' ').map(str::trim)
    } else {
        None
    }
}

/// Inline Markdown on one line. A delimiter without its closing twin stays literal text.
fn inline(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if let Some((html, used)) = inline_token(rest) {
            out.push_str(&html);
            i += used;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push_str(&escape(c.encode_utf8(&mut [0; 4])));
            i += c.len_utf8();
        }
    }
    out
}

/// Tries to read one inline token at the start of `s`: returns its HTML and bytes used.
fn inline_token(s: &str) -> Option<(String, usize)> {
    if let Some(body) = s.strip_prefix('`') {
        let end = body.find('`')?;
        return Some((format!("<code>{}</code>", escape(&body[..end])), end + 2));
    }
    for (delim, tag) in [("**", "b"), ("__", "b"), ("~~", "s"), ("*", "i")] {
        if let Some(body) = s.strip_prefix(delim) {
            if body.starts_with(' ') || body.is_empty() {
                return None;
            }
            let end = body.find(delim)?;
            if end == 0 || body[..end].ends_with(' ') {
                return None;
            }
            return Some((
                format!("<{tag}>{}</{tag}>", inline(&body[..end])),
                end + 2 * delim.len(),
            ));
        }
    }
    if let Some(body) = s.strip_prefix('[') {
        let close = body.find("](")?;
        let url_start = close + 2;
        let url_end = body[url_start..].find(')')? + url_start;
        let url = &body[url_start..url_end];
        if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("tg://"))
        {
            return None;
        }
        let text = inline(&body[..close]);
        return Some((
            format!("<a href=\"{}\">{text}</a>", escape(url)),
            url_end + 2,
        ));
    }
    None
}

#[cfg(test)]
mod tests;

/// The visible text of our own HTML: tags dropped, entities decoded.
pub fn strip_html(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}
