//! A hook's template (see [`crate::hooks`]): text with `{{path}}` placeholders filled from the delivery. `{{body}}`
//! is the whole body (a JSON body as compact JSON); `{{a.b.0.c}}` walks a JSON body's
//! objects and arrays. A path that leads nowhere fills in as nothing; a string fills in as
//! itself, anything else as compact JSON. Nothing else is interpreted: no loops, no filters,
//! so a template costs one pass over it and the output is bounded by [`MAX_OUTPUT_CHARS`].

use serde_json::Value;

/// The most characters a filled-in template keeps; more is cut with "…".
pub const MAX_OUTPUT_CHARS: usize = 16_000;
/// The longest placeholder path.
const MAX_PATH: usize = 200;

/// What a template fills in from.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    Json(Value),
    Text(String),
}

impl Payload {
    /// The whole body as text: compact JSON, or the text itself.
    pub fn whole(&self) -> String {
        match self {
            Payload::Json(v) => v.to_string(),
            Payload::Text(t) => t.clone(),
        }
    }
}

/// Why `template` cannot be used: a `{{` not closed, or a path that is not words joined by
/// dots.
pub fn check(template: &str) -> Result<(), String> {
    pieces(template).try_for_each(|p| match p {
        Piece::Text(_) => Ok(()),
        Piece::Path(path) if valid_path(path) => Ok(()),
        Piece::Path(path) => Err(format!(
            "{{{{{path}}}}} is not a field path (words of letters, digits, _ and - joined by dots)"
        )),
        Piece::Unclosed => Err("a {{ is not closed with }}".into()),
    })
}

/// `template` filled in from `payload`, at most [`MAX_OUTPUT_CHARS`] characters.
pub fn render(template: &str, payload: &Payload) -> String {
    let mut out = String::new();
    for piece in pieces(template) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Path("body") => out.push_str(&payload.whole()),
            Piece::Path(path) => {
                if let Payload::Json(v) = payload {
                    out.push_str(&lookup(v, path));
                }
            }
            Piece::Unclosed => {}
        }
        if out.len() > MAX_OUTPUT_CHARS * 4 {
            break; // far past the cap already: the rest is cut anyway
        }
    }
    cut(out)
}

/// `text` cut to [`MAX_OUTPUT_CHARS`] characters, "…" marking the cut.
pub fn cut(text: String) -> String {
    match text.char_indices().nth(MAX_OUTPUT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// What `path` names in `v`, as text.
fn lookup(v: &Value, path: &str) -> String {
    let mut at = v;
    for seg in path.split('.') {
        let next = match at {
            Value::Object(o) => o.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
            Some(n) => at = n,
            None => return String::new(),
        }
    }
    match at {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn valid_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_PATH
        && path.split('.').all(|seg| {
            !seg.is_empty()
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

enum Piece<'a> {
    Text(&'a str),
    Path(&'a str),
    Unclosed,
}

/// The template as text and placeholders, in order.
fn pieces(template: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = template;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match rest.find("{{") {
            Some(0) => match rest[2..].find("}}") {
                Some(end) => {
                    let path = rest[2..2 + end].trim();
                    rest = &rest[2 + end + 2..];
                    Some(Piece::Path(path))
                }
                None => {
                    rest = "";
                    Some(Piece::Unclosed)
                }
            },
            Some(at) => {
                let text = &rest[..at];
                rest = &rest[at..];
                Some(Piece::Text(text))
            }
            None => {
                let text = rest;
                rest = "";
                Some(Piece::Text(text))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_in_fields_paths_and_the_body() {
        let p = Payload::Json(json!({
            "status": "failed", "repo": {"name": "clawless"}, "n": 3, "ok": false,
            "items": [{"name": "a"}, {"name": "b"}], "none": null
        }));
        assert_eq!(
            render("Deploy {{status}} for {{ repo.name }} ({{n}}, {{ok}})", &p),
            "Deploy failed for clawless (3, false)"
        );
        assert_eq!(
            render(
                "{{items.1.name}}|{{items.9.name}}|{{none}}|{{missing.x}}",
                &p
            ),
            "b|||"
        );
        assert_eq!(render("{{repo}}", &p), r#"{"name":"clawless"}"#);
        let t = Payload::Text("hello\nworld".into());
        assert_eq!(render("got: {{body}} {{field}}", &t), "got: hello\nworld ");
        assert_eq!(
            render("{{body}}", &Payload::Json(json!({"a": 1}))),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn refuses_broken_templates_and_bounds_the_output() {
        assert!(check("ok {{a.b}} {{ c }}").is_ok());
        assert!(check("no {{ end").unwrap_err().contains("not closed"));
        assert!(check("{{a..b}}").unwrap_err().contains("field path"));
        assert!(check("{{}}").is_err());
        assert!(check("{{a b}}").is_err());
        let big = Payload::Text("x".repeat(MAX_OUTPUT_CHARS * 10));
        let out = render("{{body}}{{body}}", &big);
        assert_eq!(out.chars().count(), MAX_OUTPUT_CHARS + 1);
        assert!(out.ends_with('…'));
    }
}
