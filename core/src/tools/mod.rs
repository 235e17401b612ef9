//! Tools the model can call: the `Tool` trait, the registry, and the built-ins.
//!
//! - [`time`]: `current_time`, the date and time at a UTC offset.
//! - [`memory`]: `memory_search`, `memory_get`, `memory_write` over the scope's memory files.
//! - [`files`]: `read_file`, `write_file`, `edit_file`, `list_dir`, `delete_file` in the
//!   scope's workspace.
//! - [`web`]: the web tools and the URL guard they share.
//! - [`exec`]: `exec`, a shell command in the workspace (native only).
//! - [`message`]: `message`, a message sent now, to this chat or another person's.
//! - [`schedule`]: `schedule`, reminders and scheduled tasks in the conversation's chat.
//! - [`skill`]: `skill`, a skill's instructions (see [`crate::skills`]).
//! - [`image`]: `generate_image`, a picture sent with the answer (where an image service is set).
//!
//! `spawn` and an agent's `agent_tools` are tools too, built by [`crate::spawn`] (they run
//! other agents); a call reports their model calls and audit steps through a [`Report`].

pub mod exec;
pub mod files;
pub mod image;
pub mod memory;
pub mod message;
pub mod schedule;
pub mod skill;
pub mod time;
pub mod watch;
pub mod web;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::ids::Scope;
pub use crate::level::Level;
use crate::llm::ToolSpec;

/// Tool results longer than this are cut (at a character boundary) with a note.
pub const MAX_TOOL_RESULT: usize = 64 * 1024;

/// `tool_timeout_secs` when an agent does not set it.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 30;

/// Names of the built-in tools an agent may list.
pub const BUILTIN_TOOLS: &[&str] = &[
    "current_time",
    "memory_search",
    "memory_get",
    "memory_write",
    "web_fetch",
    "web_search",
    "exec",
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "delete_file",
    "schedule",
    "watch",
    "message",
    "skill",
    "spawn",
    "generate_image",
];

/// Built-ins offered only where something is there: (tool, what it needs).
pub const SHELL_TOOLS: &[(&str, &str)] = &[
    ("exec", "the native binary (running commands)"),
    (
        "web_search",
        "a search API: BRAVE_API_KEY, TAVILY_API_KEY or SEARXNG_URL",
    ),
    (
        "generate_image",
        "an image service: OPENAI_API_KEY, GEMINI_API_KEY or IMAGE_BASE_URL (on Cloudflare, the AI binding)",
    ),
];

/// What a tool call may depend on besides its input: whose memory and workspace it is, and
/// which tools this chat granted for a while ("Allow for 30 min").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// `<agent>/<connector>/<owner>`: the memory and workspace partition of this conversation.
    pub scope: Scope,
    /// Tools that run without asking in this chat until their grant expires.
    pub granted: std::collections::BTreeSet<String>,
    /// The Telegram chat (and topic, and person) of the conversation: where a reminder set
    /// now fires. `None` outside Telegram (the terminal chat).
    pub origin: Option<crate::schedule::Origin>,
    /// How many agents above this one spawned it: 0 for the conversation's own agent (see
    /// [`crate::spawn`]).
    pub depth: u32,
    /// What the nearest spend cap leaves for this call (`None` without caps): a sub-agent
    /// starts no model call past it.
    pub budget: Option<crate::llm::Left>,
    /// Names this call uniquely and durably (`<turn>:<round>:<call id>`), so a tool can make
    /// a call that runs again after a crash do its work once (`schedule` keys the reminder it
    /// creates by it). Empty where no turn is kept (the terminal chat, tests).
    pub call: String,
    /// The untrusted text the turn has read (`the page https://…`), set by the agent loop for
    /// each call: a sub-agent run now starts with it (see [`Tool::brings_untrusted`]). Left
    /// `None` where a context is built.
    pub tainted: Option<String>,
    /// What the invocation may still spend, set by the agent loop for each call from its run's
    /// (`None`: no limits): a sub-agent begins no model or tool call past it (see
    /// [`crate::allowance`]).
    pub allowance: Option<crate::allowance::Allowance>,
}

/// A context for unit tests: the owner's scope, nothing granted, no chat.
#[cfg(test)]
pub(crate) fn tests_ctx() -> ToolContext {
    ToolContext {
        scope: Scope::new("assistant/main/u1"),
        granted: Default::default(),
        origin: None,
        depth: 0,
        budget: None,
        call: String::new(),
        tainted: None,
        allowance: None,
    }
}

/// What the built-in tools are built from.
#[derive(Clone)]
pub struct ToolDeps {
    pub clock: Arc<dyn clawless_platform::Clock>,
    pub memory: Arc<crate::memory::store::MemoryStore>,
    pub http: Arc<dyn clawless_platform::Http>,
    /// `web:` of `main.yaml`.
    pub web: web::WebConfig,
    /// Where `web_search` searches, when the environment names one.
    pub search: Option<web::search::SearchBackend>,
    /// Running commands: only on native.
    pub exec: Option<Arc<dyn clawless_platform::Exec>>,
    /// The workspace the file tools work in (the same port as memory's files).
    pub files: Arc<dyn clawless_platform::Files>,
    /// Where reminders are kept.
    pub kv: Arc<dyn clawless_platform::Kv>,
    /// Told of each reminder's due time (see [`crate::schedule::Wake`]).
    pub wake: Arc<crate::schedule::Wake>,
    /// The bots `message` sends through, by connector.
    pub bots: Arc<BTreeMap<crate::ids::ConnectorId, message::Outbound>>,
    /// Where `generate_image` has pictures made, when a service is set.
    pub painter: Option<Arc<dyn crate::media::image::Painter>>,
    /// `watches:` of `main.yaml`.
    pub watches: crate::watch::WatchConfig,
}

/// What a tool returns to the model on failure: the message is shown to the model as a tool
/// error, so it can correct its call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    /// What the tool can affect; every tool says so.
    fn level(&self) -> Level;
    /// What this call can affect, when it depends on the arguments (`message` to another chat
    /// is Unsafe, to this one Guarded). The policy is applied to this.
    fn level_for(&self, _ctx: &ToolContext, _input: &Value) -> Level {
        self.level()
    }
    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError>;
    /// [`Tool::call`] for a tool that does work on the turn's behalf, which it reports to
    /// `report` as it goes (a sub-agent's model calls and steps). Others keep this default.
    async fn call_reporting(
        &self,
        ctx: &ToolContext,
        input: Value,
        _report: &Report,
    ) -> Result<String, ToolError> {
        self.call(ctx, input).await
    }
    /// How long a call may take, when the agent's `tool_timeout_secs` does not fit (a
    /// sub-agent has its own, longer timeout).
    fn time_limit(&self) -> Option<std::time::Duration> {
        None
    }
    /// Whether this call may simply run again when a crash left its outcome unknown (it
    /// began, and the turn resumed without its result): a read, a write that finds what it
    /// would write, or a write keyed by [`ToolContext::call`]. Any other is not run again:
    /// the model is told its outcome is unknown and decides. Default: the tools that only
    /// read (level Safe).
    fn rerunnable(&self, _input: &Value) -> bool {
        self.level() == Level::Safe
    }
    /// Whether what it is given stays inside the assistant (its memory, workspace,
    /// reminders): then text shaped like someone's key may pass (a person may keep a note of
    /// theirs); to a tool that can send it out, it may not
    /// ([`crate::secret::key_shaped`]). The bot's own secrets pass to none.
    fn stays_inside(&self) -> bool {
        false
    }
    /// What untrusted text this call brings into the turn (`the page https://…`), if any: a
    /// fetched page, a search result, an MCP server's answer, a file, a command's output.
    /// After it the turn is tainted, and so is its conversation until the person writes
    /// again: unsafe calls, and calls that act beyond the turn ([`Tool::acts_beyond`]), ask
    /// even under a grant (`policy.ask_after_untrusted`); a sub-agent run then is tainted too.
    fn brings_untrusted(&self, _input: &Value) -> Option<String> {
        None
    }
    /// Whether this call's effect goes beyond the turn's answer in a way text the turn read
    /// must not order without the person (a tainted turn asks about it): it acts later or
    /// elsewhere on its own (a reminder or scheduled task, a background sub-agent), changes
    /// what later turns are told as the assistant's own (memory, a workspace skill), or
    /// destroys what the person keeps (a file deleted, a reminder cancelled). Not so: writing
    /// or editing an ordinary workspace file (reading a file, then changing it, is what those
    /// tools are for; a tap on each would be their every use), and a `message` to the
    /// conversation's own chat (it says nothing the answer could not say, where the answer
    /// goes).
    fn acts_beyond(&self, _input: &Value) -> bool {
        false
    }
}

/// `value`'s string field `key`, cut to 100 characters, for a sentence naming a source.
pub fn named(input: &Value, key: &str) -> String {
    let text = input.get(key).and_then(Value::as_str).unwrap_or("?");
    match text.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// What a tool call did on the turn's behalf beside its result: the model calls and audit
/// steps of a sub-agent it ran. The agent loop hands one to each call and adds what it holds
/// to the turn's spend and audit trail afterwards, also when the call timed out (what was
/// reported by then counts). Steps are kept up to [`crate::audit::MAX_STEPS_PER_TURN`].
#[derive(Debug, Default)]
pub struct Report(std::sync::Mutex<Reported>);

/// What a [`Report`] holds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reported {
    pub usage: crate::llm::Tally,
    pub steps: Vec<(u64, crate::audit::Step)>,
}

impl Report {
    /// One model call's spend.
    pub fn spend(&self, tally: crate::llm::Tally) {
        self.lock().usage.add(tally);
    }
    /// One step, kept while there is room.
    pub fn step(&self, at_ms: u64, step: crate::audit::Step) {
        let mut r = self.lock();
        if r.steps.len() < crate::audit::MAX_STEPS_PER_TURN {
            r.steps.push((at_ms, step));
        }
    }
    /// Everything reported so far, leaving it empty.
    pub fn take(&self) -> Reported {
        std::mem::take(&mut *self.lock())
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Reported> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Tools by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Their specs, built once (a tool's spec does not change; the schemas are the costly
    /// part of a turn's request), forgotten when a tool joins.
    specs: std::sync::OnceLock<Arc<[ToolSpec]>>,
}

impl ToolRegistry {
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name, tool);
        self.specs = std::sync::OnceLock::new();
    }
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }
    /// Every tool's spec, in name order; built on the first call, shared after.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs
            .get_or_init(|| self.tools.values().map(|t| t.spec()).collect())
            .clone()
    }
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }
    /// The tools whose name `keep` accepts (a sub-agent's narrower set).
    pub fn narrowed(&self, keep: impl Fn(&str) -> bool) -> ToolRegistry {
        let tools = self
            .tools
            .iter()
            .filter(|(name, _)| keep(name))
            .map(|(name, tool)| (name.clone(), tool.clone()))
            .collect();
        ToolRegistry {
            tools,
            specs: Default::default(),
        }
    }
    /// The built-ins an agent lists, fitted to its limits (`memory_write` indexes within a
    /// budget under the agent's tool timeout).
    pub fn for_agent(
        names: &[String],
        tool_timeout_secs: u64,
        sandbox: exec::SandboxConfig,
        deps: &ToolDeps,
    ) -> Result<ToolRegistry, String> {
        let timeout = std::time::Duration::from_secs(tool_timeout_secs);
        Self::with_tool_timeout(names, deps, timeout, sandbox)
    }

    /// A registry holding only the named built-ins, for the default tool timeout; unknown
    /// names are returned as errors.
    pub fn builtins(names: &[String], deps: &ToolDeps) -> Result<ToolRegistry, String> {
        let timeout = std::time::Duration::from_secs(DEFAULT_TOOL_TIMEOUT_SECS);
        Self::with_tool_timeout(names, deps, timeout, exec::SandboxConfig::default())
    }

    fn with_tool_timeout(
        names: &[String],
        deps: &ToolDeps,
        timeout: std::time::Duration,
        sandbox: exec::SandboxConfig,
    ) -> Result<ToolRegistry, String> {
        let mut reg = ToolRegistry::default();
        let workspace = files::Workspace::new(deps.files.clone());
        for name in names {
            match name.as_str() {
                "current_time" => reg.register(Arc::new(time::CurrentTime {
                    clock: deps.clock.clone(),
                })),
                "memory_search" => {
                    reg.register(Arc::new(memory::MemorySearch(deps.memory.clone())))
                }
                "memory_get" => reg.register(Arc::new(memory::MemoryGet(deps.memory.clone()))),
                "memory_write" => reg.register(Arc::new(memory::MemoryWrite {
                    memory: deps.memory.clone(),
                    clock: deps.clock.clone(),
                    index_budget: memory::index_budget(timeout),
                })),
                "message" => reg.register(Arc::new(message::MessageTool {
                    bots: deps.bots.clone(),
                })),
                "web_fetch" => reg.register(Arc::new(web::fetch::WebFetch {
                    http: deps.http.clone(),
                    config: deps.web.clone(),
                })),
                // Not offered where the shell cannot run commands (see `App::unoffered_tools`).
                "exec" => {
                    if let Some(exec) = &deps.exec {
                        reg.register(Arc::new(exec::ExecTool {
                            exec: exec.clone(),
                            sandbox,
                        }))
                    }
                }
                // Offered once a search API is set up (see `App::unoffered_tools`).
                "web_search" => {
                    if let Some(backend) = &deps.search {
                        reg.register(Arc::new(web::search::WebSearch {
                            http: deps.http.clone(),
                            config: deps.web.clone(),
                            backend: Some(backend.clone()),
                        }))
                    }
                }
                // Offered once an image service is set (see `App::unoffered_tools`).
                "generate_image" => {
                    if let Some(painter) = &deps.painter {
                        reg.register(Arc::new(image::GenerateImage::new(
                            painter.clone(),
                            deps.files.clone(),
                            deps.clock.clone(),
                        )))
                    }
                }
                "read_file" => reg.register(Arc::new(files::ReadFile(workspace.clone()))),
                "write_file" => reg.register(Arc::new(files::WriteFile(workspace.clone()))),
                "edit_file" => reg.register(Arc::new(files::EditFile(workspace.clone()))),
                "list_dir" => reg.register(Arc::new(files::ListDir(workspace.clone()))),
                "delete_file" => reg.register(Arc::new(files::DeleteFile(workspace.clone()))),
                "schedule" => reg.register(Arc::new(schedule::Schedule {
                    kv: deps.kv.clone(),
                    clock: deps.clock.clone(),
                    wake: deps.wake.clone(),
                })),
                "watch" => reg.register(Arc::new(watch::Watch {
                    kv: deps.kv.clone(),
                    clock: deps.clock.clone(),
                    wake: deps.wake.clone(),
                    web: deps.web.clone(),
                    bounds: deps.watches.clone(),
                })),
                // Registered by the assembly, which knows the agent's other tools (a skill's
                // requirements are checked against them).
                "skill" => {}
                // Registered by the assembly, which knows the other agents (see
                // [`crate::spawn`]).
                "spawn" => {}
                other => {
                    return Err(format!(
                        "unknown tool {other:?} (built-ins: {})",
                        BUILTIN_TOOLS.join(", ")
                    ))
                }
            }
        }
        Ok(reg)
    }
}
