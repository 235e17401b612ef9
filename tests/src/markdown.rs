//! Just enough Markdown for the checks that read the book and the README (`tests/tests/book.rs`):
//! backticked spans of the prose, fenced blocks with their language, links, heading anchors as
//! mdBook makes them, and shell lines split into commands and words.

/// A fenced block: its language (`sh`, `yaml`, or empty) and its lines.
pub struct Fence {
    pub lang: String,
    pub lines: Vec<String>,
}

/// The prose of `text` (fenced blocks left out) and its fenced blocks.
pub fn split_fences(text: &str) -> (String, Vec<Fence>) {
    let mut prose = String::new();
    let mut fences = Vec::new();
    let mut open: Option<Fence> = None;
    for line in text.lines() {
        let t = line.trim_start();
        match (&mut open, t.strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some(Fence {
                    lang: lang.trim().to_owned(),
                    lines: Vec::new(),
                })
            }
            (Some(_), Some(_)) => fences.extend(open.take()),
            (Some(f), None) => f.lines.push(line.to_owned()),
            (None, None) => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    (prose, fences)
}

/// The backticked spans of the prose of `text`, each on one line (a span may wrap in the
/// source). Paragraphs are read apart, so one stray backtick cannot shift the rest.
pub fn spans(text: &str) -> Vec<String> {
    let (prose, _) = split_fences(text);
    let mut out = Vec::new();
    for paragraph in prose.split("\n\n") {
        let joined = paragraph.replace('\n', " ");
        out.extend(
            joined
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|s| s.trim().to_owned()),
        );
    }
    out
}

/// The targets of the Markdown links and images in the prose of `text`: `[a](target)`.
pub fn links(text: &str) -> Vec<String> {
    let (prose, _) = split_fences(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        out.push(rest[..end].trim().to_owned());
    }
    out
}

/// The anchors mdBook gives the headings of `text`: the heading's text (backticks dropped)
/// lower-cased, spaces as `-`, only letters, digits, `-` and `_` kept.
pub fn anchors(text: &str) -> Vec<String> {
    let (prose, _) = split_fences(text);
    prose
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .chars()
                .filter_map(|c| match c {
                    c if c.is_alphanumeric() || c == '_' || c == '-' => {
                        Some(c.to_ascii_lowercase())
                    }
                    c if c.is_whitespace() => Some('-'),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// The commands of shell text: lines joined at a trailing `\`, comments cut, split at `&&`,
/// `||`, `|`, `;` and `&`.
pub fn shell_commands(lines: &[String]) -> Vec<String> {
    let mut joined = Vec::new();
    let mut pending = String::new();
    for line in lines {
        let line = match line.find(" #") {
            Some(at) => &line[..at],
            None if line.trim_start().starts_with('#') => "",
            None => line,
        };
        match line.trim_end().strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(line);
                joined.push(std::mem::take(&mut pending));
            }
        }
    }
    joined
        .iter()
        .flat_map(|l| {
            l.split("&&")
                .flat_map(|p| p.split(['|', ';', '&']))
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// The words of one command, quotes honoured (`--features "a b"` is two words), leading
/// `NAME=value` assignments left out.
pub fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    let assignments = out
        .iter()
        .take_while(|w| w.split_once('=').is_some_and(|(k, _)| is_env_name(k)))
        .count();
    out.split_off(assignments)
}

/// Whether `s` is shaped like an environment variable: `UPPER_CASE`, with an underscore.
pub fn is_env_name(s: &str) -> bool {
    s.contains('_')
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}
