//! `App`: the assistant, and the one door every shell goes through. Its entry points, each
//! in the module of its stage:
//! - [`App::new`] (in [`crate::assemble`]): config + env + ports → the app.
//! - [`App::handle_webhook`], [`App::accept_update`] (in [`crate::ingress`]): the ack path.
//! - [`App::drain`], [`App::sweep`] (in [`crate::drain`]): the work after the ack.
//! - [`App::scheduled`] (here), [`App::chat_local`] (in [`crate::local`]), [`App::fire_due`]
//!   (in [`crate::fire`]),
//!   and the command line's calls (in [`crate::admin`]).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use clawless_platform::Platform;

use crate::config::Config;
use crate::ids::ConnectorId;
use crate::inbox::Inbox;
use crate::memory::lifecycle::Lifecycle;
use crate::memory::store::MemoryStore;

use crate::connector::Connector;

/// The operator's handle on the app ([`Admin::serve`]): the command line's and the admin
/// endpoint's calls (here and in `admin_http.rs`), `doctor`, the cockpit's views (`observe`)
/// and the bot menus. `impl App` keeps only the entry points of the update path.
#[derive(Clone, Copy)]
pub struct Admin<'a> {
    pub(crate) app: &'a App,
}

/// The control panel's handle on the app ([`Panel::serve`], `core/src/panel`).
#[derive(Clone, Copy)]
pub struct Panel<'a> {
    pub(crate) app: &'a App,
}

/// The assistant: its ports, config, connectors and inbox. Built by [`App::new`].
pub struct App {
    pub(crate) platform: Platform,
    pub(crate) memory: Arc<MemoryStore>,
    pub(crate) config: Arc<Config>,
    pub(crate) connectors: BTreeMap<ConnectorId, Connector>,
    pub(crate) inbox: Inbox,
    /// Names this process or invocation in leases.
    pub(crate) instance: String,
    /// Numbers the drains of this instance.
    pub(crate) counter: AtomicU64,
    /// `CLAWLESS_ADMIN_TOKEN`: empty when the admin endpoint does not exist.
    pub(crate) admin_token: crate::secret::Secret,
    /// `CLAWLESS_PUBLIC_URL`: where the panel's links point (else the webhook's origin).
    pub(crate) public_url: Option<String>,
    /// Every configured agent: what the spawn tools' directory refers to (weakly).
    pub(crate) agents: BTreeMap<String, Arc<crate::agent::Agent>>,
    /// What a background sub-agent runs with (see [`crate::spawn`]).
    pub(crate) spawn: crate::spawn::SpawnDeps,
    /// Speech to text for voice notes, when a service is set.
    pub(crate) transcriber: Option<Arc<dyn crate::media::Transcriber>>,
    /// Voice replies: text to speech, when a service is set.
    pub(crate) speaker: Option<Arc<dyn crate::media::Speaker>>,
    /// `/imagine` and `generate_image`: pictures from prompts, when a service is set.
    pub(crate) painter: Option<Arc<dyn crate::media::image::Painter>>,
    /// Whether this instance's first scheduled run checked the command menus.
    pub(crate) menus_checked: std::sync::atomic::AtomicBool,
    /// Where what happens is published (see [`crate::events`]).
    pub(crate) events: Arc<crate::events::Bus>,
    /// The counts this instance last kept in the Kv (see `observe/`).
    pub(crate) metrics_kept: std::sync::Mutex<Option<crate::events::metrics::Snapshot>>,
    /// The usage counters this instance wrote last (see [`crate::usage::Written`]).
    pub(crate) usage_written: crate::usage::Written,
    /// The events not yet written to the journal (`observe/journal.rs`), and its batches.
    pub(crate) journal: Arc<crate::events::Subscription>,
    pub(crate) journal_seq: AtomicU64,
    /// Outbound requests sent so far (see [`crate::allowance`]).
    pub(crate) outbound: Arc<AtomicU64>,
    /// Storage calls made so far (see [`crate::allowance`]).
    pub(crate) stored: Arc<AtomicU64>,
    /// The earliest reminder written since the runner last asked (see [`App::due_written`]).
    pub(crate) wake: Arc<crate::schedule::Wake>,
    /// The incoming webhooks, by name (see [`crate::hooks`]).
    pub(crate) hooks: BTreeMap<String, crate::hooks::Hook>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("connectors", &self.connectors.values().collect::<Vec<_>>())
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// What tests and benchmarks outside the crate reach below the entry points (the `testing`
/// feature; shells never enable it).
#[cfg(feature = "testing")]
impl App {
    pub fn memory_store(&self) -> &MemoryStore {
        &self.memory
    }

    pub fn platform(&self) -> &Platform {
        &self.platform
    }
}

impl App {
    /// The operator's calls: the command line, the admin endpoint, `doctor`, the cockpit.
    pub fn admin(&self) -> Admin<'_> {
        Admin { app: self }
    }

    /// The control panel: `/app/...` and `/api/...` of every shell.
    pub fn panel(&self) -> Panel<'_> {
        Panel { app: self }
    }

    /// The pairing store over this app's ports.
    pub(crate) fn pairings(&self) -> crate::pairing::Pairings<'_> {
        crate::pairing::Pairings {
            kv: &*self.platform.kv,
            clock: &*self.platform.clock,
        }
    }

    /// The reminders and scheduled tasks over this app's ports.
    pub(crate) fn schedules(&self) -> crate::schedule::Schedules<'_> {
        crate::schedule::Schedules {
            kv: &*self.platform.kv,
            clock: &*self.platform.clock,
            wake: Some(&self.wake),
        }
    }

    /// Outbound requests this app has sent so far (every Http port call).
    pub fn outbound_requests(&self) -> u64 {
        self.outbound.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Storage calls this app has made so far (every Kv, Files, Vectors and TextIndex call).
    pub fn storage_calls(&self) -> u64 {
        self.stored.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What an invocation with `limits` may spend from now (see [`crate::allowance`]).
    pub fn allowance(&self, limits: crate::allowance::Limits) -> crate::allowance::Allowance {
        crate::allowance::Allowance::new(limits, self.platform.clock.now_ms(), &self.outbound)
            .counting_storage(&self.stored)
    }

    /// The event bus: subscribe to see what happens (see [`crate::events`]).
    pub fn events(&self) -> &Arc<crate::events::Bus> {
        &self.events
    }

    /// Publishes `event` of the job traced `trace` (`<connector>/<update id>`), stamped now.
    pub(crate) fn emit(&self, trace: &str, event: crate::events::Event) {
        self.events
            .publish(self.platform.clock.now_ms(), trace, event);
    }

    /// What must still be set before the bot can answer in Telegram: env var names, with why.
    pub fn missing_settings(&self) -> Vec<String> {
        let mut missing = Vec::new();
        for c in self.connectors.values() {
            if !c.token_set {
                missing.push(format!("{} (the bot token from @BotFather)", c.token_env));
            }
            for agent in c.agents_used() {
                if agent.chain.links.is_empty() {
                    let mut vars: Vec<&str> = Vec::new();
                    for m in &agent.config.models {
                        let provider = m
                            .split_once('/')
                            .and_then(|(pid, _)| self.config.providers.get(pid));
                        if let Some(var) = provider.and_then(|p| p.setting()) {
                            if !vars.contains(&var) {
                                vars.push(var);
                            }
                        }
                    }
                    missing.push(format!(
                        "an LLM key for agent {:?}, any one of: {}",
                        agent.config.id,
                        if vars.is_empty() {
                            "(its models: name provider/model entries of providers.d)".to_owned()
                        } else {
                            vars.join(", ")
                        }
                    ));
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        missing.retain(|m| seen.insert(m.clone()));
        missing
    }

    /// Which model answers for each agent a connector uses, then its fallbacks: one line per
    /// agent, e.g. `agent "assistant" answers with gemini/gemini-2.5-flash`. Said at start and
    /// by `config check`.
    pub fn answering_models(&self) -> Vec<String> {
        let mut out = Vec::new();
        for agent in self.connectors.values().flat_map(|c| c.agents_used()) {
            let labels: Vec<&str> = agent.chain.links.iter().map(|l| l.label.as_str()).collect();
            let line = match labels.split_first() {
                None => format!("agent {:?}: no model has its key set", agent.config.id),
                Some((first, [])) => format!("agent {:?} answers with {first}", agent.config.id),
                Some((first, rest)) => format!(
                    "agent {:?} answers with {first}, falling back to {}",
                    agent.config.id,
                    rest.join(", ")
                ),
            };
            out.push(line);
        }
        out.sort();
        out.dedup();
        out
    }

    /// What hears and speaks voice and draws pictures here, as sentences (`config check`,
    /// start-up logs).
    pub fn voice_services(&self) -> Vec<String> {
        let heard = match &self.transcriber {
            Some(t) => format!("voice notes are transcribed by {}", t.name()),
            None => "voice notes are not transcribed: set GROQ_API_KEY, OPENAI_API_KEY or TRANSCRIBE_BASE_URL".into(),
        };
        let spoken = match (self.speaks(), self.config.media.voice_replies) {
            (None, _) => format!(
                "voice replies are off: {}",
                crate::media::speak::NO_SPEECH.trim_start_matches("No speech service is set: ")
            ),
            (Some(s), mode) => format!(
                "voice replies are spoken by {s}; chats without /voice: {}",
                mode.name()
            ),
        };
        let drawn = match &self.painter {
            Some(p) => format!("pictures are drawn by {} ({})", p.name(), p.model()),
            None => format!(
                "pictures are off: {}",
                crate::media::image::NO_IMAGES.trim_start_matches("No image service is set: ")
            ),
        };
        vec![heard, spoken, drawn]
    }

    /// Starts every local MCP program (`command:`) the agents use and reads its tool list,
    /// each waiting up to `wait`, all at once: what a program does at its first start (`npx
    /// -y` downloading its package) is done before the first turn, which waits only
    /// [`crate::mcp::LIST_WAIT`]. One line per program: its tools, or why it did not start.
    pub async fn warm_programs(&self, wait: std::time::Duration) -> Vec<String> {
        let mut servers = self.mcp_servers();
        servers.retain(|s| s.is_program());
        let warmed = futures::future::join_all(servers.iter().map(|s| s.warm(wait))).await;
        servers
            .iter()
            .zip(warmed)
            .map(|(s, warmed)| match warmed {
                Ok(n) => format!("MCP program {}: started, {n} tools", s.name()),
                Err(e) => format!("MCP program {}: did not start: {e}", s.name()),
            })
            .collect()
    }

    /// The MCP servers the agents use and this shell offers, each once.
    pub(crate) fn mcp_servers(&self) -> Vec<&Arc<crate::mcp::McpServer>> {
        let mut servers: Vec<&Arc<crate::mcp::McpServer>> = Vec::new();
        for agent in self.connectors.values().flat_map(|c| c.agents_used()) {
            for server in &agent.mcp {
                let new = !servers.iter().any(|s| Arc::ptr_eq(s, server));
                if new && server.unavailable().is_none() {
                    servers.push(server);
                }
            }
        }
        servers
    }

    /// Tools an agent lists that are not offered here (`exec` off native, `web_search` without
    /// a search API), as sentences.
    pub fn unoffered_tools(&self) -> Vec<String> {
        let mut out = Vec::new();
        for agent in self.connectors.values().flat_map(|c| c.agents_used()) {
            for (tool, needs) in crate::tools::SHELL_TOOLS {
                let listed = agent.config.tools.iter().any(|t| t == tool);
                if listed && agent.tools.get(tool).is_none() {
                    out.push(format!(
                        "agent {:?} lists {tool}, which needs {needs}: not offered here",
                        agent.config.id
                    ));
                }
            }
            for server in &agent.mcp {
                if let Some(why) = server.unavailable() {
                    out.push(format!(
                        "agent {:?}: the MCP server {} is not offered: {why}",
                        agent.config.id,
                        server.name()
                    ));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The scheduled job every shell runs (native timer, Lambda schedule, Worker cron): expired
    /// Kv rows purged through the port
    /// ([`Kv::purge_expired`](clawless_platform::Kv::purge_expired)), due reminders put in
    /// the inbox (see [`crate::schedule`]), the [`App::sweep`] (which delivers them), then
    /// memory files edited by hand are re-indexed in every scope (after the one-time move of
    /// memory from before it was per person), then (once a day) [`App::consolidate`].
    /// Errors are logged, not returned: one failing part does not stop the others. Returns
    /// the earliest of the next retry and the next reminder (ms). The first run of an instance
    /// also sets the command menus where they changed ([`Admin::register_menus`]).
    pub async fn scheduled(&self) -> Option<u64> {
        self.scheduled_within(crate::allowance::Limits::default())
            .await
            .next
    }

    /// [`App::scheduled`] within an invocation's `limits` (a Worker's cron): lanes whose
    /// work did not fit are handed on (see [`crate::allowance`]).
    pub async fn scheduled_within(&self, limits: crate::allowance::Limits) -> crate::inbox::Swept {
        let allowance = self.allowance(limits);
        match self.platform.kv.purge_expired().await {
            Ok(0) => {}
            Ok(rows) => tracing::debug!(rows, "purged expired Kv rows"),
            Err(e) => tracing::warn!(error = %e, "purging expired Kv rows failed"),
        }
        self.enqueue_due().await;
        let swept = match self.sweep_with(&allowance).await {
            Ok(swept) => swept,
            Err(e) => {
                tracing::warn!(error = %e, "sweep failed");
                crate::inbox::Swept::default()
            }
        };
        for c in self.connectors.values() {
            if let Err(e) = self.admin().reindex_memory(&c.id).await {
                tracing::warn!(connector = %c.id, error = %e, "memory reindex failed");
            }
        }
        self.consolidate().await;
        // Last: pending work first, the menu is bookkeeping.
        if !self
            .menus_checked
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            self.admin().register_menus().await;
        }
        self.admin().keep_observations().await;
        let next = match (swept.next, self.next_due().await) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        crate::inbox::Swept {
            next,
            handed_on: swept.handed_on,
        }
    }

    /// The usage counters over this app's ports.
    pub(crate) fn ledger(&self) -> crate::usage::Ledger<'_> {
        crate::usage::Ledger {
            kv: &*self.platform.kv,
            clock: &*self.platform.clock,
            written: &self.usage_written,
        }
    }

    /// Memory's lifecycle over this app's ports.
    pub(crate) fn lifecycle(&self) -> Lifecycle<'_> {
        Lifecycle {
            memory: &self.memory,
            kv: &*self.platform.kv,
            clock: &*self.platform.clock,
        }
    }

    /// Once a day per memory scope of every connector and agent: past daily notes into
    /// `MEMORY.md` (see [`Lifecycle::consolidate`]). A scope is one agent's
    /// (`<agent>/<connector>/<owner>`), so that agent's model consolidates it: the one that
    /// wrote the notes.
    pub async fn consolidate(&self) {
        let life = self.lifecycle();
        for conn in self.connectors.values() {
            for agent in conn.agents_used() {
                if agent.chain.links.is_empty() {
                    continue;
                }
                let scopes = match life.scopes(&agent.config.id, &conn.id).await {
                    Ok(scopes) => scopes,
                    Err(e) => {
                        tracing::warn!(connector = %conn.id, error = %e, "could not list memory scopes");
                        continue;
                    }
                };
                for scope in scopes {
                    life.consolidate(&agent.chain, &scope).await;
                }
            }
        }
    }
}
