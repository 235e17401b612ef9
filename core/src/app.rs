//! `App`: the assistant assembled from config, env and ports, and its entry points:
//! [`App::handle_webhook`] (the ack path), [`App::accept_update`] (shared with long polling),
//! [`App::drain`] and [`App::sweep`] (the work after the ack), [`App::chat_local`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::pin::pin;

use clawless_platform::{Platform, PortError};
use futures::future::{select, Either};
use futures::StreamExt;
use serde_json::Value;

use crate::agent::{Agent, TurnOutput};
use crate::config::{Config, ConfigError, ProviderConfig, ProviderKind};
use crate::env::{parse_user_list, Env};
use crate::inbox::{Drained, Inbox, Job, Lease};
use crate::keys;
use crate::llm::chain::Link;
use crate::llm::{anthropic, openai, ChatMessage, LlmError, ModelChain, Provider};
use crate::memory::embed::{EmbeddingProvider, LocalEmbedder, OpenAiEmbeddings};
use crate::memory::lifecycle::Lifecycle;
use crate::memory::scope::{scope as memory_scope, MemoryOwner};
use crate::memory::store::{MemoryError, MemoryHit, MemoryStore};
use crate::secret::Secret;
use crate::session;
use crate::telegram::{api, BotApi, BotIdentity, Message, Update, UpdateKind};
use crate::tools::{ToolContext, ToolDeps, ToolRegistry};
use crate::turn::decide::{self, Decision, Gate};
use crate::turn::Step;

impl Connector {
    /// The memory scope of `owner` for this connector's agent.
    pub fn memory_scope(&self, owner: MemoryOwner) -> String {
        memory_scope(&self.agent.config.id, &self.id, owner)
    }

    /// The memory scope a message reads and writes: the sender's in a private chat, the
    /// group's in a group, or the shared one when the connector is set to share.
    pub fn memory_scope_of(&self, msg: &Message) -> String {
        self.memory_scope(MemoryOwner::of(msg, self.shared_memory))
    }

    /// What a decision on this connector's messages depends on.
    pub(crate) fn gate(&self, max_input_chars: usize) -> Gate<'_> {
        Gate {
            allowed: &self.allowed,
            name: self
                .agent
                .config
                .name
                .as_deref()
                .unwrap_or(&self.agent.config.id),
            max_input_chars,
        }
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

/// One Telegram bot and the agent behind it.
pub struct Connector {
    pub id: String,
    pub bot: BotApi,
    pub token_set: bool,
    pub token_env: String,
    pub secret: Secret,
    pub secret_env: String,
    pub allowed: BTreeSet<i64>,
    /// The first allowed user (config order, then `TELEGRAM_ALLOWED_USERS`).
    pub owner: Option<i64>,
    /// One memory for every chat (`shared_memory: true`): for single-user deployments.
    pub shared_memory: bool,
    pub agent: Arc<Agent>,
    pub(crate) identity: Mutex<Option<BotIdentity>>,
}

pub struct App {
    pub platform: Platform,
    pub memory: Arc<MemoryStore>,
    pub config: Arc<Config>,
    pub connectors: BTreeMap<String, Connector>,
    pub inbox: Inbox,
    instance: String,
    counter: AtomicU64,
}

/// How often a drainer renews its lease while it works (a third of the lease's life).
pub const LEASE_RENEW_EVERY: Duration = Duration::from_secs(6);

/// Lanes a sweep drains at once.
pub const SWEEP_PARALLEL: usize = 8;

/// A future that is pending once, after asking to be polled again: lets other futures of the
/// same task run, on any executor.
pub(crate) async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// What the webhook answers Telegram, and which lane now has work (the target schedules
/// [`App::drain`] for it after responding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookReply {
    pub status: u16,
    pub body: &'static str,
    pub lane: Option<String>,
}

impl WebhookReply {
    fn new(status: u16, body: &'static str) -> Self {
        Self {
            status,
            body,
            lane: None,
        }
    }
}

impl App {
    /// Assembles the app, memory embedded as `memory.embedder` says. `instance` names this
    /// process or invocation in leases.
    pub fn new(
        platform: Platform,
        config: Config,
        env: &Env,
        instance: impl Into<String>,
    ) -> Result<App, ConfigError> {
        let embedder = embedder_from_config(&platform, &config, env)?;
        Self::with_embedder(platform, config, env, instance, embedder)
    }

    /// [`App::new`] with the shell's own embedder (the Worker's Workers AI). Memory files
    /// indexed by another embedder are re-indexed as they are met (their manifests name it).
    pub fn with_embedder(
        platform: Platform,
        config: Config,
        env: &Env,
        instance: impl Into<String>,
        embedder: Arc<dyn EmbeddingProvider>,
    ) -> Result<App, ConfigError> {
        let env_err = |field: &str, message: String| ConfigError {
            file: "environment".into(),
            field: field.into(),
            message,
        };
        let mut extra_users = Vec::new();
        if let Some(v) = env.get("TELEGRAM_ALLOWED_USERS") {
            extra_users = parse_user_list(v).map_err(|m| env_err("TELEGRAM_ALLOWED_USERS", m))?;
        }
        let api_base = env
            .get("TELEGRAM_API_BASE")
            .unwrap_or(api::DEFAULT_API_BASE)
            .to_owned();
        let memory = Arc::new(MemoryStore {
            files: platform.files.clone(),
            kv: platform.kv.clone(),
            vectors: platform.vectors.clone(),
            text: platform.text.clone(),
            embedder,
            config: config.memory.clone(),
        });
        let deps = ToolDeps {
            clock: platform.clock.clone(),
            memory: memory.clone(),
        };
        let mut agents: BTreeMap<String, Arc<Agent>> = BTreeMap::new();
        for (id, agent) in &config.agents {
            let tools = ToolRegistry::builtins(&agent.tools, &deps).map_err(|m| ConfigError {
                file: format!("agents.d/{id}.yaml"),
                field: "tools".into(),
                message: m,
            })?;
            let chain = ModelChain {
                links: links(&platform, &config, &agent.models, env),
                clock: platform.clock.clone(),
                base_backoff: Duration::from_secs(1),
                max_wait: Duration::from_secs(30),
            };
            agents.insert(
                id.clone(),
                Arc::new(Agent {
                    config: agent.clone(),
                    chain,
                    tools,
                    clock: platform.clock.clone(),
                }),
            );
        }
        let mut connectors = BTreeMap::new();
        for (id, c) in &config.connectors {
            let agent_id = config.routing.get(id).cloned().unwrap_or_default();
            let agent = agents
                .get(&agent_id)
                .cloned()
                .ok_or_else(|| env_err("routing", format!("no agent for connector {id}")))?;
            let token = env.secret(&c.token_env);
            connectors.insert(
                id.clone(),
                Connector {
                    id: id.clone(),
                    token_set: !token.is_empty(),
                    bot: BotApi::new(platform.http.clone(), &api_base, token),
                    token_env: c.token_env.clone(),
                    secret: env.secret(&c.webhook_secret_env),
                    secret_env: c.webhook_secret_env.clone(),
                    allowed: c
                        .allowed_users
                        .iter()
                        .chain(&extra_users)
                        .copied()
                        .collect(),
                    owner: c.allowed_users.iter().chain(&extra_users).copied().next(),
                    shared_memory: c.shared_memory,
                    agent,
                    identity: Mutex::new(None),
                },
            );
        }
        let inbox = Inbox {
            kv: platform.kv.clone(),
            clock: platform.clock.clone(),
            config: config.inbox.clone(),
        };
        Ok(App {
            platform,
            memory,
            config: Arc::new(config),
            connectors,
            inbox,
            instance: instance.into(),
            counter: AtomicU64::new(0),
        })
    }

    /// What must still be set before the bot can answer in Telegram: env var names, with why.
    pub fn missing_settings(&self) -> Vec<String> {
        let mut missing = Vec::new();
        for c in self.connectors.values() {
            if !c.token_set {
                missing.push(format!("{} (the bot token from @BotFather)", c.token_env));
            }
            if c.agent.chain.links.is_empty() {
                missing.push(format!(
                    "an LLM key for agent {:?}: ANTHROPIC_API_KEY or OPENAI_API_KEY",
                    c.agent.config.id
                ));
            }
        }
        missing.dedup();
        missing
    }

    /// The webhook: [`App::authorize_webhook`], the size cap, then [`App::accept_update`].
    ///
    /// Unknown connector → 404; wrong or missing secret → 401 and nothing else happens; a
    /// body over [`crate::shell::MAX_UPDATE_BYTES`] → 413; an
    /// update we cannot read or do not handle → 200 (so Telegram stops re-sending) and a log
    /// line; a storage failure → 500 so Telegram re-delivers.
    pub async fn handle_webhook(
        &self,
        connector: &str,
        secret: Option<&str>,
        body: &[u8],
    ) -> WebhookReply {
        if let Err(refused) = self.authorize_webhook(connector, secret) {
            return refused;
        }
        if body.len() > crate::shell::MAX_UPDATE_BYTES {
            tracing::warn!(
                connector,
                bytes = body.len(),
                "webhook body over the cap; refused"
            );
            return WebhookReply::new(413, "payload too large");
        }
        match self.accept_update(connector, body).await {
            Ok(lane) => WebhookReply {
                status: 200,
                body: "ok",
                lane,
            },
            Err(e) => {
                tracing::error!(connector, error = %e, "could not store update");
                WebhookReply::new(500, "storage unavailable")
            }
        }
    }

    /// The check a shell makes before it reads a webhook body: the connector exists and the
    /// secret matches (constant time). `Err` is the reply to send at once (404 or 401),
    /// without reading the body.
    pub fn authorize_webhook(
        &self,
        connector: &str,
        secret: Option<&str>,
    ) -> Result<(), WebhookReply> {
        let Some(conn) = self.connectors.get(connector) else {
            return Err(WebhookReply::new(404, "unknown connector"));
        };
        if !conn.secret.matches(secret.unwrap_or("")) {
            tracing::debug!(connector, "webhook refused: wrong or missing secret");
            return Err(WebhookReply::new(401, "unauthorized"));
        }
        Ok(())
    }

    /// Stores an update in the inbox; returns the lane to drain when there is new work.
    pub async fn accept_update(
        &self,
        connector: &str,
        body: &[u8],
    ) -> Result<Option<String>, PortError> {
        let Some(conn) = self.connectors.get(connector) else {
            return Ok(None);
        };
        let raw: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(connector, error = %e, "update is not JSON; dropped");
                return Ok(None);
            }
        };
        let update = match Update::from_value(&raw) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(connector, error = %e, "update unreadable; dropped");
                return Ok(None);
            }
        };
        let msg = match &update.kind {
            UpdateKind::Message(m) => m,
            UpdateKind::EditedMessage(_) => {
                tracing::info!(
                    connector,
                    update_id = update.id,
                    "edited message: not answered again"
                );
                return Ok(None);
            }
            UpdateKind::Unknown(_) => {
                tracing::info!(
                    connector,
                    update_id = update.id,
                    "unhandled update type; dropped"
                );
                return Ok(None);
            }
        };
        let Some(from) = &msg.from else {
            tracing::info!(
                connector,
                update_id = update.id,
                "message without sender; dropped"
            );
            return Ok(None);
        };
        // What the turn would ignore (group chatter, bots, channels) costs no job when it can
        // be told here: always in private chats, in groups once the bot knows who it is.
        let me = conn.cached_identity();
        if !decide::needs_identity(msg) || me.is_some() {
            let gate = conn.gate(self.config.limits.max_input_chars);
            if let Decision::Ignore(why) = decide::decide(msg, me.as_ref(), &gate) {
                tracing::debug!(connector, update_id = update.id, why, "dropped at the ack");
                return Ok(None);
            }
        }
        if !conn.allowed.contains(&from.id.0)
            && self
                .platform
                .kv
                .get(&keys::stranger(connector, from.id.0))
                .await?
                .is_some()
        {
            return Ok(None); // already told once
        }
        let lane = format!("{connector}:{}", msg.chat.id.0);
        let job = Job {
            connector: connector.to_owned(),
            update_id: update.id,
            update: raw,
            attempts: 0,
            not_before_ms: 0,
            checkpoint: None,
        };
        if !self.inbox.accept(&lane, &job).await? {
            tracing::info!(
                connector,
                update_id = update.id,
                "duplicate delivery dropped"
            );
            return Ok(None);
        }
        Ok(Some(lane))
    }

    fn owner(&self) -> String {
        format!(
            "{}-{}",
            self.instance,
            self.counter.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Processes a lane's jobs in order until it is empty or its head must wait.
    pub async fn drain(&self, lane: &str) -> Result<Drained, PortError> {
        let owner = self.owner();
        loop {
            if !self.inbox.try_lease(lane, &owner).await? {
                return Ok(Drained::Busy);
            }
            let outcome = self.drain_leased(lane, &owner).await;
            self.inbox.release(lane, &owner).await?;
            match outcome? {
                // A job accepted while we released would find the lease still held: look again.
                Drained::Idle if self.inbox.head(lane).await?.is_some() => continue,
                other => return Ok(other),
            }
        }
    }

    async fn drain_leased(&self, lane: &str, owner: &str) -> Result<Drained, PortError> {
        while let Some((key, job)) = self.inbox.head(lane).await? {
            if job.not_before_ms > self.platform.clock.now_ms() {
                return Ok(Drained::RetryAt(job.not_before_ms));
            }
            let lease = Lease { lane, owner };
            let step = match select(
                pin!(self.process(&key, job, lease)),
                pin!(self.keep_lease(lease)),
            )
            .await
            {
                Either::Left((step, _)) => step,
                Either::Right((never, _)) => match never {},
            };
            match step? {
                Step::Done => {}
                Step::RetryAt(at) => return Ok(Drained::RetryAt(at)),
                Step::LostLease => return Ok(Drained::Busy),
            }
            if !self.inbox.hold(lease).await? {
                return Ok(Drained::Busy);
            }
        }
        Ok(Drained::Idle)
    }

    /// Renews `lease` every [`LEASE_RENEW_EVERY`] for as long as it is polled, beside the
    /// work it covers, so a live drainer keeps its lane through a slow model call and a dead
    /// one's lease lapses within [`crate::inbox::LEASE_TTL`]. It never ends: a lost lease is
    /// only logged here; the fencing checks before each write act on it.
    async fn keep_lease(&self, lease: Lease<'_>) -> std::convert::Infallible {
        loop {
            // Give the work its turn first: with a clock whose sleeps end at once (tests),
            // this loop must still wait for the work between renewals.
            yield_now().await;
            self.platform.clock.sleep(LEASE_RENEW_EVERY).await;
            match self.inbox.hold(lease).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(lane = lease.lane, "lease lost to another drainer"),
                Err(e) => tracing::warn!(lane = lease.lane, error = %e, "lease renewal failed"),
            }
        }
    }

    /// Drains every lane with pending work (at start-up, and on a timer or cron), up to
    /// [`SWEEP_PARALLEL`] lanes at once, so one chat's slow backlog does not hold up the
    /// others. Returns the earliest instant a waiting job should be tried again.
    pub async fn sweep(&self) -> Result<Option<u64>, PortError> {
        let lanes = self.inbox.lanes(1000).await?;
        // Each future owns its lane (a closure over borrowed lanes would not be `Send` for
        // every lifetime, which spawning shells need).
        let drains = lanes
            .into_iter()
            .map(|lane| async move { self.drain(&lane).await });
        let results: Vec<Result<Drained, PortError>> = futures::stream::iter(drains)
            .buffer_unordered(SWEEP_PARALLEL)
            .collect()
            .await;
        let mut next: Option<u64> = None;
        for r in results {
            if let Drained::RetryAt(at) = r? {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        Ok(next)
    }

    /// The scheduled job every shell runs (native timer, Lambda schedule, Worker cron): the
    /// [`App::sweep`], then memory files edited by hand are re-indexed in every scope (after
    /// the one-time move of memory from before it was per person), then (once a day)
    /// [`App::consolidate`].
    /// Errors are logged, not returned: one failing part does not stop the others.
    pub async fn scheduled(&self) -> Option<u64> {
        let next = match self.sweep().await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "sweep failed");
                None
            }
        };
        for c in self.connectors.values() {
            if let Err(e) = self.reindex_memory(&c.id).await {
                tracing::warn!(connector = %c.id, error = %e, "memory reindex failed");
            }
        }
        self.consolidate().await;
        next
    }

    /// Memory's lifecycle over this app's ports.
    pub(crate) fn lifecycle(&self) -> Lifecycle<'_> {
        Lifecycle {
            memory: &self.memory,
            kv: &*self.platform.kv,
            clock: &*self.platform.clock,
        }
    }

    /// Once a day per memory scope of every connector: past daily notes into `MEMORY.md`
    /// (see [`Lifecycle::consolidate`]).
    pub async fn consolidate(&self) {
        let life = self.lifecycle();
        for conn in self.connectors.values() {
            if conn.agent.chain.links.is_empty() {
                continue;
            }
            let scopes = match life.scopes(&conn.agent.config.id, &conn.id).await {
                Ok(scopes) => scopes,
                Err(e) => {
                    tracing::warn!(connector = %conn.id, error = %e, "could not list memory scopes");
                    continue;
                }
            };
            for scope in scopes {
                life.consolidate(&conn.agent.chain, &scope).await;
            }
        }
    }

    /// A terminal conversation with the agent of `connector`, no Telegram involved.
    pub async fn chat_local(
        &self,
        connector: &str,
        session_key: &str,
        text: &str,
    ) -> Result<String, LlmError> {
        let conn = self
            .connectors
            .get(connector)
            .ok_or_else(|| LlmError::NotConfigured(format!("no connector {connector}")))?;
        let kv = &*self.platform.kv;
        let mut s = session::load(kv, session_key)
            .await
            .map_err(LlmError::from)?;
        // The terminal is the owner's: their memory (or the shared one).
        let scope = conn.memory_scope(conn.default_memory_owner().unwrap_or(MemoryOwner::Shared));
        let out = self.agent_turn(conn, &scope, &s.messages, text).await?;
        s.messages.extend(out.messages);
        session::trim(&mut s.messages, self.config.session.history_window);
        s.updated_ms = self.platform.clock.now_ms();
        session::save(kv, session_key, &s)
            .await
            .map_err(LlmError::from)?;
        Ok(out.reply)
    }

    /// One agent turn for `conn` in the memory `scope` of the conversation: the memories
    /// relevant to `text` recalled, then the model ↔ tools loop.
    pub(crate) async fn agent_turn(
        &self,
        conn: &Connector,
        scope: &str,
        history: &[ChatMessage],
        text: &str,
    ) -> Result<TurnOutput, LlmError> {
        let recall = self.lifecycle().recall(scope, text).await;
        let ctx = ToolContext {
            scope: scope.to_owned(),
        };
        conn.agent
            .run_turn(history, ChatMessage::user_text(text), &ctx, &recall)
            .await
    }

    /// Re-indexes the changed memory files of every scope of `connector`, after moving the
    /// memory from before it was per person to its owner (once). Returns how many files
    /// were (re)indexed.
    pub async fn reindex_memory(&self, connector: &str) -> Result<usize, MemoryError> {
        let Some(conn) = self.connectors.get(connector) else {
            return Ok(0);
        };
        let life = self.lifecycle();
        let agent = &conn.agent.config.id;
        life.migrate_legacy(agent, &conn.id, conn.default_memory_owner())
            .await?;
        let mut changed = 0;
        for scope in life.scopes(agent, &conn.id).await? {
            changed += self.memory.reindex(&scope).await?;
        }
        Ok(changed)
    }

    /// Searches the memory of `owner` (default: the connector's owner, or the shared memory)
    /// on `connector`, after re-indexing it.
    pub async fn search_memory(
        &self,
        connector: &str,
        owner: Option<MemoryOwner>,
        query: &str,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let Some(conn) = self.connectors.get(connector) else {
            return Ok(Vec::new());
        };
        let Some(owner) = owner.or(conn.default_memory_owner()) else {
            return Ok(Vec::new());
        };
        let scope = conn.memory_scope(owner);
        self.memory.reindex(&scope).await?;
        self.memory.search(&scope, query).await
    }
}

/// The embedder `memory.embedder` names: the built-in one, or OpenAI-compatible embeddings
/// (384 dimensions, so indexes stay interchangeable with the local embedder and Vectorize).
fn embedder_from_config(
    platform: &Platform,
    config: &Config,
    env: &Env,
) -> Result<Arc<dyn EmbeddingProvider>, ConfigError> {
    if config.memory.embedder != "openai" {
        return Ok(Arc::new(LocalEmbedder::default()));
    }
    let api_key = env.secret("OPENAI_API_KEY");
    if api_key.is_empty() {
        return Err(ConfigError {
            file: "main.yaml".into(),
            field: "memory.embedder".into(),
            message: "openai embeddings need OPENAI_API_KEY".into(),
        });
    }
    Ok(Arc::new(OpenAiEmbeddings {
        http: platform.http.clone(),
        base_url: env
            .get("OPENAI_BASE_URL")
            .unwrap_or("https://api.openai.com/v1")
            .to_owned(),
        api_key,
        model: config.memory.embedding_model.clone(),
        dims: 384,
    }))
}

/// The chain of an agent: its `provider/model` entries whose provider has a key.
fn links(platform: &Platform, config: &Config, models: &[String], env: &Env) -> Vec<Link> {
    let mut out = Vec::new();
    for m in models {
        let Some((pid, model)) = m.split_once('/') else {
            continue;
        };
        let Some(p) = config.providers.get(pid) else {
            continue;
        };
        let key = p.api_key_env.as_deref().map(|k| env.secret(k));
        if matches!(&key, Some(k) if k.is_empty()) {
            continue; // no key: skip this provider
        }
        out.push(Link {
            label: m.clone(),
            provider: provider(platform, p, key.unwrap_or_default(), env),
            model: model.to_owned(),
            attempts: p.attempts,
        });
    }
    out
}

fn provider(platform: &Platform, p: &ProviderConfig, key: Secret, env: &Env) -> Arc<dyn Provider> {
    let timeout = Duration::from_secs(p.timeout_secs);
    let http = platform.http.clone();
    let base = p
        .base_url_env
        .as_deref()
        .and_then(|e| env.get(e))
        .map(str::to_owned)
        .or_else(|| p.base_url.clone());
    match p.kind {
        ProviderKind::Anthropic => Arc::new(anthropic::Anthropic {
            http,
            base_url: base.unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.into()),
            api_key: key,
            timeout,
        }),
        ProviderKind::Openai => Arc::new(openai::OpenAi {
            http,
            base_url: base.unwrap_or_else(|| openai::DEFAULT_BASE_URL.into()),
            api_key: key,
            timeout,
        }),
    }
}
