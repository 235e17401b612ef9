//! What an agent may hand to other agents: `spawn:` and `agent_tools:` in `agents.d/*.yaml`
//! (see [`crate::spawn`]), and their checks.
//!
//! ```yaml
//! tools: [web_fetch, memory_search, spawn]
//! spawn:
//!   agents: [researcher]   # besides itself (always: the same agent with fewer tools)
//!   max_depth: 2           # agents below the conversation's own
//!   timeout_secs: 120
//!   max_tokens: 60000      # input + output tokens of one sub-agent run
//!   tools: [web_fetch]     # what a sub-agent may have at most (default: what this one has)
//!   background: false      # may a long task run as its own job, posting when done
//! agent_tools:
//!   - agent: researcher
//!     name: research
//!     description: Researches a question on the web and answers with sources.
//! ```

#[cfg(feature = "yaml")]
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "yaml")]
use super::{err, AgentConfig, ConfigError};

/// The deepest `max_depth` allowed.
pub const MAX_DEPTH: u32 = 4;
/// The longest `timeout_secs` allowed (a sub-agent holds its parent's turn that long).
pub const MAX_TIMEOUT_SECS: u64 = 900;
/// At most this many `agent_tools` per agent.
pub const MAX_AGENT_TOOLS: usize = 16;
/// An agent tool's description is at most this many characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;

/// `spawn:` of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpawnConfig {
    /// The other agents it may run, by id; it may always run itself.
    pub agents: Vec<String>,
    /// How many levels of agents may run below the conversation's own.
    pub max_depth: u32,
    /// A sub-agent run stops after this long; its parent is told it timed out.
    pub timeout_secs: u64,
    /// Input and output tokens one sub-agent run may use; then it starts no model call.
    pub max_tokens: u64,
    /// The tools a sub-agent may have at most; absent: what this agent has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Whether a task may run as its own job, its answer posted to the chat when done.
    pub background: bool,
}

impl Default for SpawnConfig {
    fn default() -> Self {
        Self {
            agents: Vec::new(),
            max_depth: 2,
            timeout_secs: 120,
            max_tokens: 60_000,
            tools: None,
            background: false,
        }
    }
}

/// An agent exposed to this one as a tool of its own name: a `spawn` of that agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentTool {
    pub agent: String,
    /// The tool's name, as the model calls it.
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
}

#[cfg(feature = "yaml")]
/// A tool name the model providers accept: 1 to 64 letters, digits, `_` and `-`.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(feature = "yaml")]
/// The checks of one agent's `spawn:` and `agent_tools:` that need no other file.
pub(super) fn check_agent(path: &str, a: &AgentConfig) -> Result<(), ConfigError> {
    let s = &a.spawn;
    if !(1..=MAX_DEPTH).contains(&s.max_depth) {
        let message = format!("must be 1 to {MAX_DEPTH}");
        return Err(err(path, "spawn.max_depth", message));
    }
    if !(1..=MAX_TIMEOUT_SECS).contains(&s.timeout_secs) {
        let message = format!("must be 1 to {MAX_TIMEOUT_SECS} seconds");
        return Err(err(path, "spawn.timeout_secs", message));
    }
    if s.max_tokens < 1000 {
        return Err(err(path, "spawn.max_tokens", "must be at least 1000"));
    }
    for (i, t) in s.tools.iter().flatten().enumerate() {
        if !a.tools.contains(t) {
            let message = format!("{t:?} is not in this agent's tools");
            return Err(err(path, format!("spawn.tools[{i}]"), message));
        }
    }
    if a.agent_tools.len() > MAX_AGENT_TOOLS {
        let message = format!("at most {MAX_AGENT_TOOLS}");
        return Err(err(path, "agent_tools", message));
    }
    for (i, t) in a.agent_tools.iter().enumerate() {
        let field = |f: &str| format!("agent_tools[{i}].{f}");
        let taken = crate::tools::BUILTIN_TOOLS.contains(&t.name.as_str())
            || a.agent_tools[..i].iter().any(|o| o.name == t.name);
        if !valid_tool_name(&t.name) || taken {
            let message = format!(
                "{:?} must be 1 to 64 letters, digits, _ and -, and not another tool's name",
                t.name
            );
            return Err(err(path, field("name"), message));
        }
        let chars = t.description.chars().count();
        if chars == 0 || chars > MAX_DESCRIPTION_CHARS {
            let message = format!("1 to {MAX_DESCRIPTION_CHARS} characters");
            return Err(err(path, field("description"), message));
        }
    }
    Ok(())
}

#[cfg(feature = "yaml")]
/// The checks across agents: every agent named in `spawn.agents` and `agent_tools` exists.
/// `paths` holds each agent's file.
pub(super) fn check_links(
    agents: &BTreeMap<String, AgentConfig>,
    paths: &BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (id, a) in agents {
        let path = paths.get(id).map_or("agents.d/", String::as_str);
        let named = a
            .spawn
            .agents
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("spawn.agents[{i}]"), n));
        let tools = a
            .agent_tools
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("agent_tools[{i}].agent"), &t.agent));
        for (field, name) in named.chain(tools) {
            if !agents.contains_key(name) {
                return Err(err(path, field, format!("unknown agent {name:?}")));
            }
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "yaml"))]
mod tests;
