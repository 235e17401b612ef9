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
/// in a URL, an MCP call or a message to another chat.
#[derive(Clone, Default)]
pub struct Secrets(std::sync::Arc<Vec<Secret>>);

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
        Secrets(std::sync::Arc::new(kept))
    }

    /// Whether any string in `value` (at any depth, keys included) holds one of the secrets,
    /// as it is or percent-encoded (in part or whole).
    pub fn found_in(&self, value: &serde_json::Value) -> bool {
        use serde_json::Value;
        if self.0.is_empty() {
            return false;
        }
        match value {
            Value::String(s) => self.in_text(s),
            Value::Array(items) => items.iter().any(|v| self.found_in(v)),
            Value::Object(map) => map.iter().any(|(k, v)| self.in_text(k) || self.found_in(v)),
            _ => false,
        }
    }

    fn in_text(&self, text: &str) -> bool {
        let decoded = text.contains('%').then(|| percent_decoded(text));
        self.0.iter().any(|s| {
            text.contains(s.expose()) || decoded.as_deref().is_some_and(|d| d.contains(s.expose()))
        })
    }
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
}
