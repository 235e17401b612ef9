//! `Env`: the settings and secrets a target read from its environment, handed to the core.
//! Only targets read environment variables or bindings; the core reads this map.

use std::collections::BTreeMap;

use crate::secret::Secret;

#[derive(Clone, Default)]
pub struct Env(BTreeMap<String, String>);

impl Env {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn from_pairs<I: IntoIterator<Item = (K, V)>, K: Into<String>, V: Into<String>>(
        pairs: I,
    ) -> Self {
        Self(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.insert(key.into(), value.into());
    }
    /// A non-empty value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }
    /// The names of the settings that are set (non-empty); no values.
    pub fn names_set(&self) -> std::collections::BTreeSet<String> {
        self.0
            .iter()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }
    pub fn secret(&self, key: &str) -> Secret {
        Secret::new(self.get(key).unwrap_or(""))
    }

    /// The values of every set variable named like a secret (`*_KEY`, `*_TOKEN`, `*SECRET*`,
    /// `*PASSWORD*`): the bot tokens, provider and search keys, the webhook secret, the admin
    /// token, cloud credentials.
    pub fn secrets(&self) -> crate::secret::Secrets {
        self.secrets_with(&[])
    }

    /// [`Env::secrets`] and the values of the settings `names`, whatever they are called.
    pub fn secrets_with(&self, names: &[&str]) -> crate::secret::Secrets {
        let named_like_one = |k: &str| {
            let k = k.to_ascii_uppercase();
            k.ends_with("_KEY")
                || k.ends_with("_TOKEN")
                || k.contains("SECRET")
                || k.contains("PASSWORD")
        };
        crate::secret::Secrets::new(
            self.0
                .iter()
                .filter(|(k, _)| named_like_one(k) || names.contains(&k.as_str()))
                .map(|(_, v)| Secret::new(v.trim())),
        )
    }
}

impl std::fmt::Debug for Env {
    /// Keys only: values may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Parses `TELEGRAM_ALLOWED_USERS`: comma- or space-separated user ids.
pub fn parse_user_list(v: &str) -> Result<Vec<i64>, String> {
    v.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| format!("{s:?} is not a numeric Telegram user id"))
        })
        .collect()
}
