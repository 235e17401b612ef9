//! [`Level`]: what a tool can affect. A leaf, so the tools, the policy and the audit trail
//! can all name it without importing each other.

/// What a tool can affect, which decides what it needs before it runs (see
/// [`crate::config::policy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Reads only the assistant's own data; no outside effect.
    Safe,
    /// Writes the assistant's own data, or reads the network.
    Guarded,
    /// Has effects outside the assistant (commands, messages to other chats, MCP tools).
    Unsafe,
}

impl Level {
    /// As the config and the audit trail write it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Safe => "safe",
            Level::Guarded => "guarded",
            Level::Unsafe => "unsafe",
        }
    }
}
