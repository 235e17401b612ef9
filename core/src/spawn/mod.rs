//! Sub-agents: an agent hands a task to another configured agent, or to itself with fewer
//! tools, and gets its answer back as a tool result. Two kinds of tool do it: `spawn` (the
//! model picks the agent and may narrow the tools) and an agent exposed as a tool of its own
//! name (`agent_tools:`), a `spawn` with a fixed agent. Config: [`crate::config::spawn`].
//!
//! What a child gets, and why it can never get more than its parent:
//! - tools: the child agent's ∩ the parent's ∩ `spawn.tools` ∩ what the call asks for. The
//!   child's own `spawn` and agent tools pass the same filter, and are not offered at all
//!   once the depth limit (`spawn.max_depth`, the smallest along the chain) is reached.
//! - policy: per call, the stricter of the child's rule and every ancestor's (deny > ask >
//!   allow, [`crate::config::PolicyConfig::under`]). Nobody can be asked from inside a child:
//!   a call that would ask runs only if the chat granted the tool, else it is refused
//!   ([`crate::agent::Verdict::Unattended`], the same `closing` path the terminal chat uses).
//! - context: a fresh history holding only the task; the conversation's memory scope,
//!   workspace, chat and grants; its depth one more ([`crate::tools::ToolContext::depth`]).
//! - bounds: `spawn.timeout_secs` (raced against the Clock port), `spawn.max_tokens` (no
//!   model call starts once spent: the child answers with what it has and a note), and its
//!   own `max_rounds`.
//! - the invocation: the child's model and tool calls ask the parent's run's
//!   [`crate::allowance::Allowance`] (it comes in [`crate::tools::ToolContext::allowance`]).
//!   A child that cannot begin its next step stops, and its parent is told what it found; the
//!   parent's turn then pauses at its own next step, kept in its job, and goes on in a fresh
//!   invocation, whose model may run the task again.
//!
//! The child's model calls and audit steps are reported as they happen ([`crate::tools::Report`])
//! into the parent's run, so spend caps, `/usage` and the audit trail see them (its steps
//! marked with its agent id), also when it timed out.
//!
//! Agents are built in one loop and a tool that spawns needs the others: a [`Directory`] is
//! filled once all are built, holding `Weak` references (the `App` holds the agents), so an
//! agent's tools never keep agents alive in a cycle.

mod background;
mod tool;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock, Weak};

use clawless_platform::{Clock, Kv};

use crate::agent::Agent;
use crate::config::{AgentConfig, PolicyConfig, SpawnConfig};
use crate::tools::Tool;
pub use background::run_fired;
pub use tool::Spawn;

/// The name of the tool that runs a sub-agent.
pub const SPAWN_TOOL: &str = "spawn";

/// Every configured agent by id, filled once after assembly.
#[derive(Default)]
pub struct Directory(OnceLock<BTreeMap<String, Weak<Agent>>>);

impl Directory {
    /// Fills the directory (once; a second call is ignored).
    pub fn fill(&self, agents: &BTreeMap<String, Arc<Agent>>) {
        let weak = agents
            .iter()
            .map(|(id, a)| (id.clone(), Arc::downgrade(a)))
            .collect();
        if self.0.set(weak).is_err() {
            tracing::warn!("the agent directory was filled twice; the first is kept");
        }
    }

    /// The agent `id`, while the app holds it.
    pub fn get(&self, id: &str) -> Option<Arc<Agent>> {
        self.0.get()?.get(id)?.upgrade()
    }
}

/// The agent a spawn tool runs in, as far as its children are concerned: what they may have
/// at most.
#[derive(Debug, Clone)]
pub struct Parent {
    pub id: String,
    /// Its `spawn:` settings (whom it may run, the bounds of a run).
    pub spawn: SpawnConfig,
    /// The tools it has, the spawn tools included.
    pub tools: BTreeSet<String>,
    /// Its policy, over its own ancestors'.
    pub policy: PolicyConfig,
    /// The deepest level a sub-agent may run at: the smallest `max_depth` along the chain.
    pub max_depth: u32,
}

/// The names of the tools that run other agents which `config` lists.
pub fn spawn_tool_names(config: &AgentConfig) -> Vec<String> {
    let spawn = config.tools.iter().any(|t| t == SPAWN_TOOL);
    spawn
        .then(|| SPAWN_TOOL.to_owned())
        .into_iter()
        .chain(config.agent_tools.iter().map(|t| t.name.clone()))
        .collect()
}

/// What a spawn tool is built from besides its parent.
#[derive(Clone)]
pub struct SpawnDeps {
    pub directory: Arc<Directory>,
    pub clock: Arc<dyn Clock>,
    pub kv: Arc<dyn Kv>,
    pub wake: Arc<crate::schedule::Wake>,
}

/// The spawn tools of a configured agent whose other tools are `others`.
pub fn tools_for(config: &AgentConfig, others: &[String], deps: &SpawnDeps) -> Vec<Arc<dyn Tool>> {
    let parent = Parent {
        id: config.id.clone(),
        spawn: config.spawn.clone(),
        tools: others
            .iter()
            .cloned()
            .chain(spawn_tool_names(config))
            .collect(),
        policy: config.policy.clone(),
        max_depth: config.spawn.max_depth,
    };
    spawn_tools(config, Arc::new(parent), deps)
}

/// The spawn tools `config` lists, running in `parent`.
fn spawn_tools(config: &AgentConfig, parent: Arc<Parent>, deps: &SpawnDeps) -> Vec<Arc<dyn Tool>> {
    let tool = |fixed| -> Arc<dyn Tool> {
        Arc::new(Spawn {
            directory: deps.directory.clone(),
            clock: deps.clock.clone(),
            kv: deps.kv.clone(),
            wake: deps.wake.clone(),
            parent: parent.clone(),
            fixed,
        })
    };
    let spawn = config.tools.iter().any(|t| t == SPAWN_TOOL);
    spawn
        .then(|| tool(None))
        .into_iter()
        .chain(config.agent_tools.iter().map(|t| tool(Some(t.clone()))))
        .collect()
}
