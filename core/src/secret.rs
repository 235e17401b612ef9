//! `Secret`: a string that never shows in `Debug` or logs; `Secrets`: the assistant's own,
//! which no tool call may carry out.

use subtle::ConstantTimeEq;

mod decode;
mod forms;
mod index;

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
/// in a URL, an MCP call or a message to another chat, in any of these disguises (see
/// `secret/forms.rs` and `secret/decode.rs`): as it is or reversed or in ROT13; percent-encoded, once or
/// twice; written with `\u`, `\x` or `&#` escapes; in hex, base32 or base64 (at any
/// alignment inside a longer encoded text), or base64 twice; with spaces, dots, dashes or
/// anything but letters and digits between its characters; split over the call's
/// arguments; or half of it or more in one argument (a secret split over two calls). Text
/// shaped like a well-known kind of key is refused too ([`key_shaped`]), whoever's it is.
///
/// Not found: a secret encrypted, hashed, or encoded by any other means (say, base64 of its
/// hex), split into three parts or more over as many calls, or with letters or digits put
/// between its characters.
#[derive(Clone, Default)]
pub struct Secrets(std::sync::Arc<Sought>);

/// Every form of every secret, built once ([`forms`]).
#[derive(Default)]
struct Sought {
    /// How many secrets.
    kept: usize,
    /// The skeletons of their forms.
    index: index::Index,
    /// Forms too short to be looked for by their skeleton.
    exact: Vec<String>,
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
        let mut forms = forms::Forms::default();
        for s in &kept {
            forms.add(s.expose());
        }
        Secrets(std::sync::Arc::new(Sought {
            kept: kept.len(),
            index: index::Index::new(forms.skeletons),
            exact: forms.exact,
        }))
    }

    /// Whether `value` (its strings and numbers joined, at any depth, and its keys) holds one
    /// of the secrets in any of the forms the type names, as it is or decoded.
    pub fn found_in(&self, value: &serde_json::Value) -> bool {
        let sought = &*self.0;
        if sought.kept == 0 {
            return false;
        }
        let found = |t: &str| {
            sought.exact.iter().any(|e| t.contains(e.as_str()))
                || sought.index.found_in(&decode::skeleton(t))
        };
        decode::joined(value).iter().any(|text| {
            found(text)
                || match decode::decoded(text) {
                    std::borrow::Cow::Owned(d) => found(&d),
                    std::borrow::Cow::Borrowed(_) => false,
                }
        })
    }
}

/// Whether any string in `value` holds text shaped like a well-known kind of key
/// ([`key_shaped`]), as it is or with its escapes decoded.
pub fn key_shaped_in(value: &serde_json::Value) -> bool {
    any_text(value, &key_shaped)
}

/// Whether `found` holds for a string in `value` (at any depth, keys included), as it is or
/// decoded ([`decode::decoded`]).
fn any_text(value: &serde_json::Value, found: &dyn Fn(&str) -> bool) -> bool {
    use serde_json::Value;
    let text = |s: &str| {
        found(s)
            || match decode::decoded(s) {
                std::borrow::Cow::Owned(d) => found(&d),
                std::borrow::Cow::Borrowed(_) => false,
            }
    };
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

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} kept)", self.0.kept)
    }
}

#[cfg(test)]
mod tests;
