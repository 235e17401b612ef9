//! Configuration: YAML files under `config/` into typed structs, validated as a whole with
//! errors that name the file and the field. Secrets never live here: only the names of the
//! environment variables that hold them.
//!
//! Files: `main.yaml` (connectors, sessions, inbox), `routing.yaml` (which agent answers
//! where: [`routing`]), `agents.d/*.yaml`, `providers.d/*.yaml`, `prompts/<agent>/*.md` (the
//! persona's prompt: [`persona`]), and `skills/`, kept as text for [`crate::skills`] (a skill
//! that does not parse is reported, not refused here).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::memory::store::SearchConfig;

pub mod hooks;
#[cfg(feature = "yaml")]
mod load;
pub mod mcp;
mod persona;
pub mod policy;
mod provider;
pub mod routing;
pub mod spawn;
pub mod spend;
#[cfg(feature = "yaml")]
mod validate;

pub use crate::media::MediaConfig;
pub use crate::tools::web::WebConfig;
pub use crate::watch::WatchConfig;
pub use hooks::{HookConfig, HookMode};
pub use mcp::McpServerConfig;
pub use persona::{MAX_EMOJI_BYTES, PERSONA_FILES};
pub use policy::{ApprovalConfig, AuditConfig, BackupConfig, PolicyConfig, Rule};
pub use provider::{ProviderConfig, ProviderKind};
pub use routing::{Place, Route, RouteRule, Routing};
pub use spawn::{AgentTool, SpawnConfig};
pub use spend::{Caps, Price};

/// The raw config tree: root-relative path → file text. Targets fill it from disk or from
/// files embedded at build time.
#[derive(Debug, Clone, Default)]
pub struct ConfigFiles(pub BTreeMap<String, String>);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub field: String,
    pub message: String,
}

fn err(file: &str, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        file: file.into(),
        field: field.into(),
        message: message.into(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectorConfig {
    /// Telegram user ids allowed to talk to the bot (merged with `TELEGRAM_ALLOWED_USERS`).
    #[serde(default)]
    pub allowed_users: Vec<i64>,
    /// Who approves pairings (`/pair`), manages `/users` and sees `/audit`; may always talk.
    /// Default: the first of `allowed_users` (then of `TELEGRAM_ALLOWED_USERS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<i64>,
    /// Env var holding this connector's bot token.
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// Env var holding this connector's webhook secret.
    #[serde(default = "default_secret_env")]
    pub webhook_secret_env: String,
    /// One memory for every chat of this bot instead of one per person and per group. Only
    /// for a bot that a single person uses: with it on, whatever one user tells the bot can
    /// be recalled for every other user and in groups.
    #[serde(default)]
    pub shared_memory: bool,
}

fn default_token_env() -> String {
    "TELEGRAM_BOT_TOKEN".into()
}
fn default_secret_env() -> String {
    "TELEGRAM_WEBHOOK_SECRET".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Messages of history kept and sent to the model.
    pub history_window: usize,
    /// A session idle this long starts fresh (0 = never).
    pub idle_minutes: u64,
    /// When the history passes about this many tokens (or `history_window` messages), its
    /// older turns are summarised (0 = never: the oldest are dropped).
    pub compact_tokens: u64,
    /// Messages kept word for word when a session is compacted.
    pub keep_recent: usize,
}

impl SessionConfig {
    /// `idle_minutes` in milliseconds. Saturating: a huge setting means "never idle" (found
    /// with the config fuzz target: `idle_minutes * 60_000` overflowed).
    pub fn idle_ms(&self) -> u64 {
        self.idle_minutes.saturating_mul(60_000)
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            history_window: 40,
            idle_minutes: 0,
            compact_tokens: 12_000,
            keep_recent: 10,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InboxConfig {
    /// Tries per update before the user gets an error reply.
    pub max_attempts: u32,
    /// First retry delay; doubles per attempt.
    pub backoff_secs: u64,
    /// How long a processed update id is remembered to drop re-deliveries.
    pub dedupe_hours: u64,
}

impl InboxConfig {
    /// How long a processed update id is remembered. Saturating: a huge `dedupe_hours` means
    /// "always" (found with the config fuzz target: `dedupe_hours * 3600` overflowed).
    pub fn dedupe_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.dedupe_hours.saturating_mul(3600))
    }
}

impl Default for InboxConfig {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            backoff_secs: 3,
            dedupe_hours: 48,
        }
    }
}

/// Bounds on what one message may cost: `limits:` in `main.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// A message text longer than this (characters) is cut, and the model told so. Telegram
    /// itself sends at most 4096; only a forged update is longer.
    pub max_input_chars: usize,
    /// An answer that would take more messages than this arrives as a `.md` document.
    pub max_reply_parts: usize,
    /// Spend caps in US dollars per person per UTC day, for everyone per day, and per
    /// month, checked before every model call (see [`spend`]).
    pub daily_usd_per_user: Option<f64>,
    pub daily_usd_total: Option<f64>,
    pub monthly_usd_total: Option<f64>,
}

impl LimitsConfig {
    pub fn caps(&self) -> Caps {
        Caps {
            daily_usd_per_user: self.daily_usd_per_user,
            daily_usd_total: self.daily_usd_total,
            monthly_usd_total: self.monthly_usd_total,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_input_chars: 16_384,
            max_reply_parts: 6,
            daily_usd_per_user: None,
            daily_usd_total: None,
            monthly_usd_total: None,
        }
    }
}

/// `streaming:` in `main.yaml`: how a reply shows while the model writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamingConfig {
    /// In private chats the reply shows as it is written (`sendMessageDraft`), then arrives
    /// as a message. Groups see only the finished message.
    pub private: bool,
    /// At most one draft update this often (ms), after the first, which goes out at once.
    pub draft_every_ms: u64,
    /// In groups the reply shows in a placeholder message, edited as it is written and then
    /// to the finished answer. Off: groups see only the finished message.
    pub groups: bool,
    /// At most one placeholder edit this often (ms).
    pub edit_every_ms: u64,
}

impl Default for StreamingConfig {
    fn default() -> Self {
        Self {
            private: true,
            draft_every_ms: 500,
            groups: false,
            edit_every_ms: 1500,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub id: String,
    /// The persona's name, shown by `/agent` and `/start` and told to the model.
    #[serde(default)]
    pub name: Option<String>,
    /// The persona's emoji, shown beside its name (see [`persona`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// `provider/model` in order of preference; links whose provider has no key are skipped.
    pub models: Vec<String>,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "default_tool_timeout")]
    pub tool_timeout_secs: u64,
    /// What each tool may do without asking (see [`policy`]).
    #[serde(default)]
    pub policy: PolicyConfig,
    /// The skills this agent may be offered, by name; absent: every skill (see
    /// [`crate::skills`]). Needs the `skill` tool in `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// MCP servers whose tools it is offered (see [`crate::mcp`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<McpServerConfig>,
    /// Composed from `prompts/<id>/`: identity, `system.md`, `style.md`, `safety.md`.
    /// The agents it may run below it, and their bounds; agents offered as tools of their
    /// own (see [`spawn`]).
    #[serde(default)]
    pub spawn: SpawnConfig,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_tools: Vec<AgentTool>,
    /// How its commands are fenced in (`exec`; see [`crate::tools::exec::SandboxConfig`]).
    #[serde(default)]
    pub sandbox: crate::tools::exec::SandboxConfig,
    #[serde(skip)]
    pub system_prompt: String,
}

fn default_max_rounds() -> u32 {
    8
}
fn default_max_tokens() -> u32 {
    2048
}
/// `tool_timeout_secs` when an agent does not set it.
pub use crate::tools::DEFAULT_TOOL_TIMEOUT_SECS;

fn default_tool_timeout() -> u64 {
    DEFAULT_TOOL_TIMEOUT_SECS
}

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub connectors: BTreeMap<String, ConnectorConfig>,
    pub session: SessionConfig,
    pub inbox: InboxConfig,
    /// Memory search and chunking.
    #[serde(default)]
    pub memory: SearchConfig,
    /// Input and output bounds per message.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// How long approvals wait and grants last.
    #[serde(default)]
    pub approvals: ApprovalConfig,
    /// How long the audit trail is kept.
    #[serde(default)]
    pub audit: AuditConfig,
    /// What the web tools may reach and read.
    #[serde(default)]
    pub web: WebConfig,
    /// How large photos, voice notes and documents may be.
    #[serde(default)]
    pub media: MediaConfig,
    /// How replies show while they are written.
    #[serde(default)]
    pub streaming: StreamingConfig,
    /// Archives of the store on a schedule (native).
    #[serde(default)]
    pub backup: BackupConfig,
    /// The bounds of watches.
    #[serde(default)]
    pub watches: WatchConfig,
    /// Incoming webhooks (`POST /hooks/<name>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookConfig>,
    /// Which agent answers where (`routing.yaml`).
    pub routing: Routing,
    pub agents: BTreeMap<String, AgentConfig>,
    pub providers: BTreeMap<String, ProviderConfig>,
    /// The files under `skills/`, by path below it (`daily-note/SKILL.md`).
    #[serde(default)]
    pub skills: BTreeMap<String, String>,
}

/// `text` of `file` as YAML, an error naming the file and the line.
#[cfg(feature = "yaml")]
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    file: &str,
    text: &str,
) -> Result<T, ConfigError> {
    serde_yaml::from_str(text).map_err(|e| {
        let field = e
            .location()
            .map(|l| format!("line {} column {}", l.line(), l.column()))
            .unwrap_or_default();
        let message = e.to_string();
        err(file, field, message)
    })
}

impl Config {
    /// The validated config as JSON, system prompts included: what a shell embeds when it
    /// should not parse YAML at start-up (the Worker: smaller wasm, less CPU per isolate).
    pub fn to_json(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        let prompts: BTreeMap<&str, &str> = self
            .agents
            .iter()
            .map(|(id, a)| (id.as_str(), a.system_prompt.as_str()))
            .collect();
        value["system_prompts"] = serde_json::json!(prompts);
        value.to_string()
    }

    /// Reads what [`Config::to_json`] wrote.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let bad = |e: serde_json::Error| err("config.json", "-", e.to_string());
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(bad)?;
        let prompts: BTreeMap<String, String> = value
            .as_object_mut()
            .and_then(|o| o.remove("system_prompts"))
            .map(serde_json::from_value)
            .transpose()
            .map_err(bad)?
            .unwrap_or_default();
        let mut config: Config = serde_json::from_value(value).map_err(bad)?;
        for (id, agent) in &mut config.agents {
            agent.system_prompt = prompts.get(id).cloned().unwrap_or_default();
        }
        Ok(config)
    }
}

/// The longest connector or agent id. Both go into storage keys and memory paths (twice in a
/// memory index key), which the Kv port caps at 512 bytes.
pub const MAX_ID_LEN: usize = 64;

#[cfg(feature = "yaml")]
#[cfg(test)]
mod tests;

/// The config tree embedded at build time (`core/build.rs`): `CLAWLESS_EMBED_CONFIG` when it
/// was set for the build, else the repository's `config/`, every file. What a target uses when it has
/// no config directory of its own.
pub fn embedded() -> ConfigFiles {
    let files: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/config_files.rs"));
    ConfigFiles(
        files
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}
