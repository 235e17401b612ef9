//! `hooks:` in `main.yaml`: incoming webhooks, each a URL
//! (`POST /hooks/<name>`) that puts a message or a turn in one chat (see [`crate::hooks`]).
//! `watches:` ([`crate::watch::WatchConfig`]) lives beside the watches.

use serde::{Deserialize, Serialize};

/// The most hooks one bot has.
pub const MAX_HOOKS: usize = 50;
/// The longest template (characters).
pub const MAX_TEMPLATE_CHARS: usize = 4_000;
/// Deliveries a hook takes per minute when it does not say.
pub const DEFAULT_PER_MINUTE: u32 = 30;

/// One incoming webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// Its URL's last part: `POST /hooks/<name>`.
    pub name: String,
    /// The setting (environment variable, secret binding) holding the token a caller sends
    /// as `Authorization: Bearer <token>`.
    pub secret_env: String,
    /// Where deliveries land: a person's id (their private chat) or a group's id.
    pub chat: i64,
    /// `message`: the template, filled in, is sent as it is, no model call. `turn`: the
    /// delivery is a turn in the chat's conversation, as untrusted text.
    #[serde(default)]
    pub mode: HookMode,
    /// `{{field}}` and `{{field.sub}}` (`{{items.0.name}}`) from a JSON body, `{{body}}` for
    /// the whole body. Absent: `{{body}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The agent that answers a `turn` (default: the chat's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The bot (connector) whose chat it is; default: the only one, else `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector: Option<String>,
    /// Deliveries taken per minute; past it 429.
    #[serde(default = "default_per_minute")]
    pub per_minute: u32,
}

fn default_per_minute() -> u32 {
    DEFAULT_PER_MINUTE
}

/// What a delivery becomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookMode {
    #[default]
    Message,
    Turn,
}

impl HookMode {
    pub fn name(self) -> &'static str {
        match self {
            HookMode::Message => "message",
            HookMode::Turn => "turn",
        }
    }
}

impl HookConfig {
    /// The template, `{{body}}` when none is set.
    pub fn template(&self) -> &str {
        self.template.as_deref().unwrap_or("{{body}}")
    }

    /// What is wrong with it on its own, as (field, why); `i` is its place in the list.
    pub fn problem(&self, i: usize) -> Option<(String, String)> {
        let at = |f: &str| format!("hooks[{i}].{f}");
        let name_ok = (1..=64).contains(&self.name.len())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Some((at("name"), "1 to 64 letters, digits, _ and -".into()));
        }
        let env_ok = (1..=128).contains(&self.secret_env.len())
            && self
                .secret_env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !env_ok {
            return Some((
                at("secret_env"),
                "the name of a setting: letters, digits and _ (e.g. HOOK_DEPLOYS_SECRET)".into(),
            ));
        }
        if self.chat == 0 {
            return Some((
                at("chat"),
                "a person's Telegram id or a group's (negative) id".into(),
            ));
        }
        if !(1..=6_000).contains(&self.per_minute) {
            return Some((at("per_minute"), "must be between 1 and 6000".into()));
        }
        let template = self.template();
        if template.chars().count() > MAX_TEMPLATE_CHARS {
            return Some((
                at("template"),
                format!("at most {MAX_TEMPLATE_CHARS} characters"),
            ));
        }
        if template.trim().is_empty() {
            return Some((at("template"), "is empty".into()));
        }
        if let Err(why) = crate::template::check(template) {
            return Some((at("template"), why));
        }
        None
    }
}
