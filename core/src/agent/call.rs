//! Calling the tools: the turn's toolset (built-ins and MCP servers' tools), one call with
//! its timeout and the secret check, and results cut to [`MAX_TOOL_RESULT`].

use std::time::Duration;

use futures::future::{select, Either};
use serde_json::Value;

use super::{Agent, MAX_TOOL_RESULT};
use crate::tools::{Report, Tool, ToolContext, ToolRegistry};

impl Agent {
    /// The tools of a turn starting now: the built-ins, and the tools of each MCP server that
    /// answers its listing (one that does not is left out of this turn, not failing it).
    pub async fn toolset(&self) -> ToolRegistry {
        // The built-ins' specs are built once per agent: the clone carries them.
        self.tools.specs();
        let mut registry = self.tools.clone();
        if self.mcp.is_empty() {
            return registry;
        }
        let lists = futures::future::join_all(self.mcp.iter().map(|s| s.tools())).await;
        for (server, listed) in self.mcp.iter().zip(lists) {
            match listed {
                Ok(tools) => {
                    for t in tools {
                        // Names are unique by construction; never let one replace another.
                        let name = t.spec().name;
                        match registry.get(&name) {
                            Some(_) => {
                                tracing::warn!(tool = %name, "MCP tool left out: the name is taken")
                            }
                            None => registry.register(t),
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(server = server.name(), error = %e, "MCP server left out of this turn")
                }
            }
        }
        registry
    }

    /// Why a call of `tool` with `input` must not run because of what it would carry out: one
    /// of the bot's own secrets (to any tool), or a key-shaped text (to a tool that can send
    /// it out). Asked with the policy, before approvals, so a leak is never put to the owner
    /// either; the round refuses it as it refuses a denied call.
    pub(super) fn leak(&self, tool: &dyn Tool, name: &str, input: &Value) -> Option<String> {
        if self.secrets.found_in(input) {
            return Some(format!("Refused: the arguments of {name} hold one of the assistant's own secrets (its bot token, a key or a password), which never leave it. Do not try again with it."));
        }
        if !tool.stays_inside() && crate::secret::key_shaped_in(input) {
            return Some(format!("Refused: the arguments of {name} hold what looks like an access key or token (sk-…, AKIA…, ghp_…, a bot token, …), which is never sent out by a tool. Do not try again with it."));
        }
        None
    }

    /// How long a call of `tool` may take: its own limit, else the agent's.
    pub(super) fn timeout_of(&self, tool: Option<&std::sync::Arc<dyn Tool>>) -> Duration {
        tool.and_then(|t| t.time_limit())
            .unwrap_or(Duration::from_secs(self.config.tool_timeout_secs))
    }

    /// `work`, unless the invocation's `allowance` ends first (less its reserve): `None`
    /// then, the work dropped as an ended invocation would drop it.
    pub(super) async fn unless_out_of_time<T>(
        &self,
        allowance: Option<&crate::allowance::Allowance>,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        let Some(end) = allowance.and_then(|a| a.give_up_at()) else {
            return Some(work.await);
        };
        let left = Duration::from_millis(end.saturating_sub(self.clock.now_ms()));
        let sleep = self.clock.sleep(left);
        match select(std::pin::pin!(work), sleep).await {
            Either::Left((out, _)) => Some(out),
            Either::Right(((), _)) => None,
        }
    }

    /// Runs one tool of `tools` with the agent's timeout (or the tool's own); returns
    /// `(content, is_error)`. What it did on the turn's behalf is in `report`.
    pub(super) async fn call_tool(
        &self,
        tools: &ToolRegistry,
        ctx: &ToolContext,
        name: &str,
        input: Value,
        report: &Report,
    ) -> (String, bool) {
        let Some(tool) = tools.get(name) else {
            return (
                format!(
                    "Unknown tool {name:?}. Available: {}",
                    tools.names().join(", ")
                ),
                true,
            );
        };
        let timeout = self.timeout_of(Some(tool));
        let call = tool.call_reporting(ctx, input, report);
        let sleep = self.clock.sleep(timeout);
        match select(call, sleep).await {
            Either::Left((Ok(out), _)) => (truncate(out), false),
            Either::Left((Err(e), _)) => (truncate(e.0), true),
            Either::Right(_) => (
                format!(
                    "Tool {name} did not finish within {}s; what it did before that may have taken effect.",
                    timeout.as_secs()
                ),
                true,
            ),
        }
    }
}

/// Cuts `s` to [`MAX_TOOL_RESULT`] bytes at a character boundary, saying so.
pub fn truncate(mut s: String) -> String {
    if s.len() <= MAX_TOOL_RESULT {
        return s;
    }
    let mut end = MAX_TOOL_RESULT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let total = s.len();
    s.truncate(end);
    s.push_str(&format!(
        "\n[truncated: {total} bytes in all, first {end} shown]"
    ));
    s
}
