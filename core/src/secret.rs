//! `Secret`: a string that never shows in `Debug` or logs; `Secrets`: the assistant's own,
//! which no tool call may carry out.

use subtle::ConstantTimeEq;

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The value itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Compares with `other` in time independent of where they differ.
    pub fn matches(&self, other: &str) -> bool {
        !self.0.is_empty() && bool::from(self.0.as_bytes().ct_eq(other.as_bytes()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "Secret(<unset>)"
        } else {
            "Secret(<redacted>)"
        })
    }
}

/// The assistant's own secrets: the values of the set variables named like one (see
/// [`crate::env::Env::secrets`]). A tool call whose arguments hold one is refused before it
/// runs ([`Secrets::found_in`]), so an injected page cannot make the model put the bot token
/// in a URL, an MCP call or a message to another chat — as it is, percent-encoded or in
/// base64 (standard or URL-safe, at any alignment inside a longer base64 text). Text shaped
/// like a well-known kind of key is refused too ([`key_shaped`]), whoever's it is.
#[derive(Clone, Default)]
pub struct Secrets(std::sync::Arc<Vec<Sought>>);

/// A secret and the base64 texts that stand for it inside any base64 encoding.
#[derive(Clone, PartialEq, Eq)]
struct Sought {
    secret: Secret,
    encoded: Vec<String>,
}

impl Sought {
    fn new(secret: Secret) -> Sought {
        use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        use base64::Engine as _;
        let bytes = secret.expose().as_bytes();
        let mut encoded = Vec::new();
        // Preceded by 0, 1 or 2 other bytes, the secret's own characters start at 0, 2 or 3
        // and end before the last one that shares bits with what follows.
        for (lead, start) in [(0usize, 0usize), (1, 2), (2, 3)] {
            let mut input = vec![0u8; lead];
            input.extend_from_slice(bytes);
            let end = input.len() * 8 / 6;
            for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                let text = engine.encode(&input);
                if let Some(core) = text.get(start..end) {
                    if !encoded.iter().any(|e| e == core) {
                        encoded.push(core.to_owned());
                    }
                }
            }
        }
        Sought { secret, encoded }
    }
}

impl Secrets {
    /// Values shorter than this are not looked for: they would match ordinary text.
    pub const MIN_LEN: usize = 8;

    pub fn new(values: impl IntoIterator<Item = Secret>) -> Secrets {
        let mut kept: Vec<Secret> = values
            .into_iter()
            .filter(|s| s.0.chars().count() >= Self::MIN_LEN)
            .collect();
        kept.sort_by(|a, b| a.0.cmp(&b.0));
        kept.dedup();
        Secrets(std::sync::Arc::new(
            kept.into_iter().map(Sought::new).collect(),
        ))
    }

    /// Whether any string in `value` (at any depth, keys included) holds one of the secrets:
    /// as it is, percent-encoded in part or whole, or in base64.
    pub fn found_in(&self, value: &serde_json::Value) -> bool {
        !self.0.is_empty()
            && any_text(value, &|t| {
                self.0.iter().any(|s| {
                    t.contains(s.secret.expose())
                        || s.encoded.iter().any(|e| t.contains(e.as_str()))
                })
            })
    }
}

/// Whether any string in `value` holds text shaped like a well-known kind of key
/// ([`key_shaped`]), as it is or percent-encoded.
pub fn key_shaped_in(value: &serde_json::Value) -> bool {
    any_text(value, &key_shaped)
}

/// Whether `found` holds for a string in `value` (at any depth, keys included), as it is or
/// with its `%XX` decoded.
fn any_text(value: &serde_json::Value, found: &dyn Fn(&str) -> bool) -> bool {
    use serde_json::Value;
    let text = |s: &str| found(s) || (s.contains('%') && found(&percent_decoded(s)));
    match value {
        Value::String(s) => text(s),
        Value::Array(items) => items.iter().any(|v| any_text(v, found)),
        Value::Object(map) => map.iter().any(|(k, v)| text(k) || any_text(v, found)),
        _ => false,
    }
}

/// Whether `text` holds something shaped like a well-known kind of credential: a Telegram
/// bot token (`<digits>:<35 characters>`), an OpenAI or Anthropic key (`sk-…`), an AWS
/// access key id (`AKIA…`), a GitHub token (`ghp_…`, `github_pat_…`), a Google API key
/// (`AIza…`), a Slack token (`xoxb-…`).
pub fn key_shaped(text: &str) -> bool {
    let token_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    // Each word of key characters, with what came before it.
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !token_char(bytes[i] as char) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && token_char(bytes[i] as char) {
            i += 1;
        }
        let word = &text[start..i];
        let long_rest = |prefix: &str, min: usize| {
            word.strip_prefix(prefix)
                .is_some_and(|rest| rest.len() >= min)
        };
        let upper_rest = |prefix: &str, n: usize| {
            word.strip_prefix(prefix).is_some_and(|rest| {
                rest.len() == n
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            })
        };
        if long_rest("sk-", 20)
            || upper_rest("AKIA", 16)
            || ["ghp_", "gho_", "ghs_", "ghu_", "github_pat_"]
                .iter()
                .any(|p| long_rest(p, 30))
            || word.starts_with("AIza") && word.len() == 39
            || ["xoxb-", "xoxp-", "xoxa-", "xoxr-"]
                .iter()
                .any(|p| long_rest(p, 20))
        {
            return true;
        }
        // A bot token: 6 to 12 digits, ':' and 35 key characters.
        if word.len() == 35 && start > 0 && bytes[start - 1] == b':' {
            let digits = text[..start - 1]
                .bytes()
                .rev()
                .take_while(u8::is_ascii_digit)
                .count();
            if (6..=12).contains(&digits) {
                return true;
            }
        }
    }
    false
}

/// `text` with every `%XX` turned back into its byte (however much of it was encoded).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} kept)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secret_is_found_anywhere_in_the_arguments() {
        let s = Secrets::new([Secret::new("123456:ABC-token"), Secret::new("short")]);
        assert!(s.found_in(&json!({"url": "https://x.example/?t=123456:ABC-token"})));
        assert!(s.found_in(&json!({"url": "https://x.example/?t=123456%3AABC-token"})));
        assert!(s.found_in(&json!({"url": "https://x.example/?t=%31%32%33456:ABC%2dtoken"})));
        assert!(s.found_in(&json!({"a": [{"b": "x 123456:ABC-token y"}]})));
        assert!(s.found_in(&json!({"123456:ABC-token": 1})));
        assert!(!s.found_in(&json!({"text": "a short note", "n": 123456})));
        assert!(!Secrets::default().found_in(&json!("123456:ABC-token")));
        assert_eq!(format!("{s:?}"), "Secrets(1 kept)");
    }

    #[test]
    fn a_secret_in_base64_is_found_at_any_alignment_in_either_alphabet() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        use base64::Engine as _;
        let secret = "7731:AAE-webhook?secret>>";
        let s = Secrets::new([Secret::new(secret)]);
        for lead in ["", "a", "ab", "abc", "{\"token\": \""] {
            for tail in ["", "x", "\"}", "yz"] {
                let plain = format!("{lead}{secret}{tail}");
                for engine in [&STANDARD, &URL_SAFE] {
                    let text = engine.encode(&plain);
                    assert!(
                        s.found_in(&json!({"body": format!("data={text}")})),
                        "{lead:?} {tail:?} {text}"
                    );
                }
            }
        }
        let other = STANDARD.encode("nothing to see here, just a long enough text");
        assert!(!s.found_in(&json!({ "body": other })));
    }

    #[test]
    fn text_shaped_like_a_known_key_is_found() {
        for leak in [
            "https://x.example/?k=sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "sk-ant-api03-abcdefghijklmnopqrstuvwx",
            "id AKIAIOSFODNN7EXAMPLE here",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "key=AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
            "xoxb-1234567890-abcdefghijkl",
            "bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ/getMe",
            "bot123456789%3AAAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
        ] {
            assert!(key_shaped_in(&json!({ "url": leak })), "{leak}");
        }
        for fine in [
            "ask-me-anything about tasks",
            "the meeting is at 12:30",
            "AKIA is a prefix",
            "time 123456789:short",
            "sk-short",
        ] {
            assert!(!key_shaped_in(&json!({ "text": fine })), "{fine}");
        }
    }
}
