//! `Connector`: one Telegram bot and the agents behind it, with what a conversation on it
//! depends on: who may talk to it, which agent answers where (`routing.yaml`), whose memory
//! a message uses, the bot's identity. [`Routed`] is a connector with the agent that answers
//! one conversation: what the turn works with.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::agent::Agent;
use crate::config::{Place, Route, Routing};
use crate::ids::{ConnectorId, Scope};
use crate::memory::scope::{scope as memory_scope, MemoryOwner};
use crate::secret::Secret;
use crate::telegram::{BotApi, BotIdentity, Message};

/// One Telegram bot and the agents behind it.
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
    /// What the panel checks launch data and signs links and cookies with.
    pub(crate) panel_keys: crate::signing::PanelKeys,
    /// One memory for every chat (`shared_memory: true`): for single-user deployments.
    pub(crate) shared_memory: bool,
    /// Every agent of the config, by id (shared by the connectors).
    pub(crate) agents: Arc<BTreeMap<String, Arc<Agent>>>,
    /// Which agent answers where (shared by the connectors).
    pub(crate) routing: Arc<Routing>,
    /// Where no message says otherwise ([`Routing::connector_route`]).
    pub(crate) entry: Route,
    /// The agent of `entry`: what answers where no message says otherwise (the terminal
    /// chat, the command line).
    pub(crate) default: Arc<Agent>,
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
            .field("agent", &self.default.config.id)
            .finish_non_exhaustive()
    }
}

impl Connector {
    pub fn id(&self) -> &ConnectorId {
        &self.id
    }

    /// The memory scope of `owner` for this connector's default agent (the terminal chat
    /// and the command line; a message's is [`Routed::memory_scope_of`]).
    pub fn memory_scope(&self, owner: MemoryOwner) -> Scope {
        memory_scope(&self.default.config.id, &self.id, owner)
    }

    /// The agent that answers where no message says otherwise.
    pub fn default_agent(&self) -> &Arc<Agent> {
        &self.default
    }

    /// The route of a message at `place` (None: this connector's entry).
    pub fn route(&self, place: Option<&Place>) -> &Route {
        place
            .and_then(|p| self.routing.route(self.id.as_str(), p))
            .unwrap_or(&self.entry)
    }

    /// The agent `id`, when the config has it.
    pub fn agent(&self, id: &str) -> Option<&Arc<Agent>> {
        self.agents.get(id)
    }

    /// Every agent that may answer on this connector (routed to or switched to), the
    /// default first: what background work (consolidation, re-indexing) goes through.
    pub fn agents_used(&self) -> Vec<&Arc<Agent>> {
        let ids = self.routing.agents_of(self.id.as_str());
        let mut out = vec![&self.default];
        for a in ids.iter().filter_map(|id| self.agents.get(*id)) {
            if !out.iter().any(|o| Arc::ptr_eq(o, a)) {
                out.push(a);
            }
        }
        out
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

/// Where `msg` was written, as routing reads it.
pub fn place_of(msg: &Message) -> Place {
    Place {
        chat: msg.chat.id.0,
        topic: msg.topic(),
        private: msg.is_private(),
    }
}

/// A connector with the agent that answers one conversation (see
/// [`routed`](crate::turn)): derefs to the connector.
pub struct Routed<'a> {
    pub(crate) conn: &'a Connector,
    pub(crate) agent: Arc<Agent>,
}

impl std::ops::Deref for Routed<'_> {
    type Target = Connector;
    fn deref(&self) -> &Connector {
        self.conn
    }
}

impl Routed<'_> {
    /// The memory scope a message reads and writes, under this agent: the sender's in a
    /// private chat, the group's in a group, or the shared one when the connector is set to
    /// share.
    pub fn memory_scope_of(&self, msg: &Message) -> Scope {
        memory_scope(
            &self.agent.config.id,
            &self.conn.id,
            MemoryOwner::of(msg, self.conn.shared_memory),
        )
    }
}
