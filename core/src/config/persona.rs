//! A persona: an agent's identity (`name:`, `emoji:` in its `agents.d` file) and its prompt
//! files, composed into the one system prompt the model reads: an identity line, then
//! `prompts/<agent>/system.md` (required), `style.md` and `safety.md` (each when present),
//! in that order, separated by blank lines.

use super::AgentConfig;
#[cfg(feature = "yaml")]
use super::{err, ConfigError, ConfigFiles};

/// The prompt files after `system.md`, in the order they are composed.
pub const PERSONA_FILES: &[&str] = &["style.md", "safety.md"];

/// The longest `emoji:` (bytes): a flag or a family of several code points fits.
pub const MAX_EMOJI_BYTES: usize = 32;

impl AgentConfig {
    /// What people see of the agent: `🦊 Fox`, or its name (else id) without an emoji.
    pub fn display_name(&self) -> String {
        let name = self.name.as_deref().unwrap_or(&self.id);
        match &self.emoji {
            Some(e) => format!("{e} {name}"),
            None => name.to_owned(),
        }
    }

    /// The line the system prompt opens with, when the agent has a name or an emoji.
    #[cfg(feature = "yaml")]
    fn identity_line(&self) -> Option<String> {
        (self.name.is_some() || self.emoji.is_some())
            .then(|| format!("You are {}.", self.display_name()))
    }
}

/// Whether `emoji` is a usable `emoji:`: not empty, short, no space or control character.
#[cfg(feature = "yaml")]
pub(super) fn valid_emoji(emoji: &str) -> bool {
    !emoji.is_empty()
        && emoji.len() <= MAX_EMOJI_BYTES
        && !emoji.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The composed system prompt of `agent` (see the module docs).
#[cfg(feature = "yaml")]
pub(super) fn compose(files: &ConfigFiles, agent: &AgentConfig) -> Result<String, ConfigError> {
    let dir = format!("prompts/{}/", agent.id);
    let system_path = format!("{dir}system.md");
    let system = files
        .0
        .get(&system_path)
        .ok_or_else(|| err(&system_path, "-", "system prompt file is missing"))?;
    let rest = PERSONA_FILES
        .iter()
        .filter_map(|name| files.0.get(&format!("{dir}{name}")));
    let parts: Vec<&str> = std::iter::once(system)
        .chain(rest)
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
        .collect();
    let identity = agent.identity_line();
    Ok(identity
        .as_deref()
        .into_iter()
        .chain(parts)
        .collect::<Vec<_>>()
        .join("\n\n"))
}
