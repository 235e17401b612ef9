//! `Connector`: one Telegram bot and the agent behind it, with what a conversation on it
//! depends on: who may talk to it, whose memory a message uses, the bot's identity.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::agent::Agent;
use crate::ids::{ConnectorId, Scope};
use crate::memory::scope::{scope as memory_scope, MemoryOwner};
use crate::secret::Secret;
use crate::telegram::{BotApi, BotIdentity, Message};

/// One Telegram bot and the agent behind it.
pub struct Connector {
    pub(crate) id: ConnectorId,
    pub(crate) bot: std::sync::Arc<BotApi>,
    pub(crate) token_set: bool,
    pub(crate) token_env: String,
    pub(crate) secret: Secret,
    pub(crate) secret_env: String,
    /// Who may talk to it from the config (`owner:` included); paired people are in the Kv
    /// (see [`crate::pairing`]).
    pub(crate) allowed: BTreeSet<i64>,
    /// Who approves pairings and sees the audit trail: `owner:` in `main.yaml`, else the
    /// first allowed user (config order, then `TELEGRAM_ALLOWED_USERS`).
    pub(crate) owner: Option<i64>,
    /// What pairing codes are keyed with: the bot token and the webhook secret.
    pub(crate) pairing_key: Secret,
    /// One memory for every chat (`shared_memory: true`): for single-user deployments.
    pub(crate) shared_memory: bool,
    pub(crate) agent: Arc<Agent>,
    pub(crate) identity: Mutex<Option<BotIdentity>>,
}

/// What a log or a panic message may show of a connector: never its token or secret (the
/// `BotApi` and `Secret` print redacted).
impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("id", &self.id)
            .field("bot", &self.bot)
            .field("secret", &self.secret)
            .field("allowed_users", &self.allowed.len())
            .field("agent", &self.agent.config.id)
            .finish_non_exhaustive()
    }
}

impl Connector {
    pub fn id(&self) -> &ConnectorId {
        &self.id
    }

    /// The memory scope of `owner` for this connector's agent.
    pub fn memory_scope(&self, owner: MemoryOwner) -> Scope {
        memory_scope(&self.agent.config.id, &self.id, owner)
    }

    /// The memory scope a message reads and writes: the sender's in a private chat, the
    /// group's in a group, or the shared one when the connector is set to share.
    pub fn memory_scope_of(&self, msg: &Message) -> Scope {
        self.memory_scope(MemoryOwner::of(msg, self.shared_memory))
    }

    /// The bot's identity if this process already knows it (no I/O).
    pub(crate) fn cached_identity(&self) -> Option<BotIdentity> {
        self.identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whose memory the terminal chat, the CLI and the one-time migration use: the shared
    /// memory when the connector shares, else the owner's (its first allowed user).
    pub fn default_memory_owner(&self) -> Option<MemoryOwner> {
        if self.shared_memory {
            return Some(MemoryOwner::Shared);
        }
        self.owner.map(MemoryOwner::User)
    }
}
