//! `App`: the assistant assembled from config, env and ports, and its entry points:
//! [`App::handle_webhook`] (the ack path), [`App::accept_update`] (shared with long polling),
//! [`App::drain`] and [`App::sweep`] (the work after the ack), [`App::chat_local`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawless_platform::{Platform, PortError};
use serde_json::Value;

use crate::agent::{Agent, NoObserver, TurnObserver, TurnOutput};
use crate::config::{Config, ConfigError, ProviderConfig, ProviderKind};
use crate::env::{parse_user_list, Env};
use crate::handler::Step;
use crate::inbox::{Drained, Inbox, Job, Lease};
use crate::llm::chain::Link;
use crate::llm::{anthropic, openai, ChatMessage, LlmError, ModelChain, Provider};
use crate::memory::digest;
use crate::memory::embed::{EmbeddingProvider, LocalEmbedder, OpenAiEmbeddings};
use crate::memory::store::MemoryStore;
use crate::secret::Secret;
use crate::session;
use crate::telegram::{api, BotApi, BotIdentity, Update, UpdateKind};
use crate::tools::memory::note_of_day;
use crate::tools::{ToolContext, ToolDeps, ToolRegistry};

const DAY_MS: u64 = 86_400_000;
const WEEK: Duration = Duration::from_secs(7 * 86_400);

impl Connector {
    /// The tool context of conversations on this connector: memory scope `<agent>/<connector>`.
    pub fn tool_context(&self) -> ToolContext {
        ToolContext {
            scope: format!("{}/{}", self.agent.config.id, self.id),
        }
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
        if !conn.allowed.contains(&from.id.0)
            && self
                .platform
                .kv
                .get(&stranger_key(connector, from.id.0))
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
            match self.process(&key, job, lease).await? {
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

    /// Drains every lane with pending work (at start-up, and on a timer or cron). Returns
    /// the earliest instant a waiting job should be tried again.
    pub async fn sweep(&self) -> Result<Option<u64>, PortError> {
        let mut next: Option<u64> = None;
        for lane in self.inbox.lanes(1000).await? {
            if let Drained::RetryAt(at) = self.drain(&lane).await? {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        Ok(next)
    }

    /// The scheduled job every shell runs (native timer, Lambda schedule, Worker cron): the
    /// [`App::sweep`], then memory files edited by hand are re-indexed for every agent's scope,
    /// then (once a day) [`App::consolidate`].
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
            let scope = c.tool_context().scope;
            if let Err(e) = self.memory.reindex(&scope).await {
                tracing::warn!(scope, error = %e, "memory reindex failed");
            }
        }
        self.consolidate().await;
        next
    }

    /// A session ended (`/new`, or idle past `idle_minutes`): unless the model saved something
    /// during it, a short summary goes to today's daily note. Once per session, even when the
    /// job around it is retried; failures are logged, never in the user's way.
    pub(crate) async fn end_session(&self, conn: &Connector, key: &str, s: &session::Session) {
        if s.messages.is_empty() || digest::wrote_memory(&s.messages) {
            return;
        }
        let kv = &*self.platform.kv;
        let marker = format!("summarized/{key}/{}", s.last_update_id);
        match kv.put_if_absent(&marker, b"1", Some(WEEK)).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "session summary skipped");
                return;
            }
        }
        let summary = match digest::ask(
            &conn.agent.chain,
            digest::SUMMARY_PROMPT,
            digest::transcript(&s.messages),
        )
        .await
        {
            Ok(summary) => summary,
            Err(e) => {
                tracing::warn!(error = %e, "session summary by the model failed; writing the topics");
                digest::fallback_summary(&s.messages)
            }
        };
        let Some(summary) = summary else {
            return;
        };
        let scope = conn.tool_context().scope;
        let note = note_of_day((self.platform.clock.now_ms() / DAY_MS) as i64);
        let text = format!("## Session summary\n{summary}");
        if let Err(e) = self.memory.append(&scope, &note, &text).await {
            tracing::warn!(scope, error = %e, "could not write the session summary");
        }
    }

    /// Once a day per scope: the durable points of the daily notes of the past week that were
    /// not consolidated yet are appended to `MEMORY.md` (the agent's model picks them). Two
    /// schedulers never do the same note: each is claimed with a put-if-absent.
    pub async fn consolidate(&self) {
        let kv = &*self.platform.kv;
        let today = (self.platform.clock.now_ms() / DAY_MS) as i64;
        for conn in self.connectors.values() {
            if conn.agent.chain.links.is_empty() {
                continue;
            }
            let scope = conn.tool_context().scope;
            let ran = format!("consolidation/{scope}");
            if kv.get(&ran).await.ok().flatten().as_deref() == Some(today.to_string().as_bytes()) {
                continue;
            }
            let mut complete = true;
            for day in (today - 7..today).rev() {
                match self.consolidate_note(conn, &scope, day).await {
                    Ok(()) => {}
                    Err(e) => {
                        complete = false;
                        tracing::warn!(scope, day, error = %e, "consolidation failed; retried later");
                    }
                }
            }
            if complete {
                if let Err(e) = kv.put(&ran, today.to_string().as_bytes(), Some(WEEK)).await {
                    tracing::warn!(scope, error = %e, "could not record the consolidation");
                }
            }
        }
    }

    async fn consolidate_note(
        &self,
        conn: &Connector,
        scope: &str,
        day: i64,
    ) -> Result<(), String> {
        let kv = &*self.platform.kv;
        let rel = note_of_day(day);
        let done = format!("consolidated/{scope}/{rel}");
        if kv.get(&done).await.map_err(|e| e.to_string())?.is_some() {
            return Ok(());
        }
        let Some(note) = self
            .memory
            .read(scope, &rel)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        let claim = format!("consolidating/{scope}/{rel}");
        if !kv
            .put_if_absent(&claim, b"1", Some(Duration::from_secs(1800)))
            .await
            .map_err(|e| e.to_string())?
        {
            return Ok(());
        }
        let current = self
            .memory
            .read(scope, "MEMORY.md")
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let input = format!(
            "# MEMORY.md\n{}\n\n# Daily note {rel}\n{}",
            digest::tail(&current, digest::MAX_INPUT_CHARS / 2),
            digest::tail(&note, digest::MAX_INPUT_CHARS / 2)
        );
        let points = digest::ask(&conn.agent.chain, digest::CONSOLIDATE_PROMPT, input)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(points) = points {
            let date = rel.trim_start_matches("memory/").trim_end_matches(".md");
            self.memory
                .append(
                    scope,
                    "MEMORY.md",
                    &format!("\n## From the notes of {date}\n{points}"),
                )
                .await
                .map_err(|e| e.to_string())?;
        }
        kv.put(&done, b"1", Some(2 * WEEK))
            .await
            .map_err(|e| e.to_string())
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
        let out = self
            .agent_turn(conn, &s.messages, text, &NoObserver)
            .await?;
        s.messages.extend(out.messages);
        session::trim(&mut s.messages, self.config.session.history_window);
        s.updated_ms = self.platform.clock.now_ms();
        session::save(kv, session_key, &s)
            .await
            .map_err(LlmError::from)?;
        Ok(out.reply)
    }

    /// One agent turn for `conn`: the memories relevant to `text` recalled, then the model ↔
    /// tools loop with the conversation's tool context.
    pub(crate) async fn agent_turn(
        &self,
        conn: &Connector,
        history: &[ChatMessage],
        text: &str,
        observer: &dyn TurnObserver,
    ) -> Result<TurnOutput, LlmError> {
        let ctx = conn.tool_context();
        let recall = self.recall(&ctx.scope, text).await;
        conn.agent
            .run_turn(
                history,
                ChatMessage::user_text(text),
                &ctx,
                &recall,
                observer,
            )
            .await
    }

    /// Memories relevant to `text` in `scope`, formatted for the system prompt; empty when
    /// there are none or memory search failed (logged: a turn never fails for lack of recall).
    pub async fn recall(&self, scope: &str, text: &str) -> String {
        match self.memory.search(scope, text).await {
            Ok(hits) => {
                let prefix = format!("{}/", crate::memory::store::root(scope));
                hits.iter()
                    .map(|h| {
                        format!(
                            "[{}:{}-{}] {}",
                            h.path.trim_start_matches(&prefix),
                            h.start_line,
                            h.end_line,
                            h.text
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            Err(e) => {
                tracing::warn!(scope, error = %e, "memory recall failed");
                String::new()
            }
        }
    }
}

pub(crate) fn stranger_key(connector: &str, user: i64) -> String {
    format!("stranger/{connector}/{user}")
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
