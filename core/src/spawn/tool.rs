//! [`Spawn`]: the tool that runs a sub-agent (`spawn`, or an agent exposed as a named tool):
//! the call's checks, the child built within its parent's bounds, the run raced against its
//! timeout.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Clock, Kv};
use futures::future::{select, Either};
use serde_json::{json, Value};

use super::{spawn_tool_names, spawn_tools, Directory, Parent, SpawnDeps};
use crate::agent::{Agent, RunOptions, RunState, Step, Verdict};
use crate::config::{AgentConfig, AgentTool};
use crate::llm::{Block, ChatMessage, Role, ToolSpec};
use crate::tools::{Level, Report, Tool, ToolContext, ToolError};

/// A task is at most this many characters.
pub const MAX_TASK_CHARS: usize = 16_000;
/// A call names at most this many tools.
const MAX_NAMED_TOOLS: usize = 64;
/// At most this much of each result a stopped child found is passed to its parent.
const FOUND_CHARS: usize = 1_000;
/// At most this much of what a stopped child found, in all.
const FOUND_TOTAL: usize = 8_000;
/// How much longer than a child's timeout the agent loop waits for the tool, so the child's
/// own timeout answers first.
const MARGIN: Duration = Duration::from_secs(5);

/// Runs a sub-agent on a task: any agent its parent may run (`fixed: None`, the `spawn`
/// tool), or one agent under a name of its own.
pub struct Spawn {
    pub directory: Arc<Directory>,
    pub clock: Arc<dyn Clock>,
    /// Where a background task is kept until it runs (the reminders' store).
    pub kv: Arc<dyn Kv>,
    /// Told of each background task's due time.
    pub wake: Arc<crate::schedule::Wake>,
    pub parent: Arc<Parent>,
    pub fixed: Option<AgentTool>,
}

pub(super) fn refuse(text: impl Into<String>) -> ToolError {
    ToolError(text.into())
}

impl Spawn {
    /// The agents `spawn` may run: the parent itself, then its `spawn.agents`.
    pub(super) fn agents(&self) -> Vec<String> {
        let mut out = vec![self.parent.id.clone()];
        for a in &self.parent.spawn.agents {
            if !out.contains(a) {
                out.push(a.clone());
            }
        }
        out
    }

    /// The tools the call names, if any, checked for size.
    pub(super) fn requested(input: &Value) -> Result<Option<BTreeSet<String>>, ToolError> {
        let Some(list) = input.get("tools") else {
            return Ok(None);
        };
        let Some(list) = list.as_array().filter(|l| l.len() <= MAX_NAMED_TOOLS) else {
            return Err(refuse("`tools` is a list of tool names"));
        };
        let names: Option<BTreeSet<String>> = list
            .iter()
            .map(|v| v.as_str().filter(|s| s.len() <= 64).map(str::to_owned))
            .collect();
        names
            .map(Some)
            .ok_or_else(|| refuse("`tools` is a list of tool names"))
    }

    /// The child agent: `config`'s tools cut to what the parent allows and the call asks
    /// for, its policy under the parent's, spawn tools only above the depth limit.
    pub(super) fn child(
        &self,
        of: &Agent,
        requested: Option<BTreeSet<String>>,
        depth: u32,
    ) -> Result<Agent, ToolError> {
        let parent = &self.parent;
        let config: &AgentConfig = &of.config;
        let spawners = spawn_tool_names(config);
        let may = |t: &str| {
            parent.tools.contains(t)
                && parent
                    .spawn
                    .tools
                    .as_ref()
                    .is_none_or(|l| l.iter().any(|n| n == t))
        };
        let offered: BTreeSet<String> = of
            .tools
            .names()
            .into_iter()
            .chain(spawners.iter().cloned())
            .filter(|t| may(t))
            .collect();
        if let Some(asked) = &requested {
            if let Some(missing) = asked.iter().find(|t| !offered.contains(*t)) {
                let list: Vec<&str> = offered.iter().map(String::as_str).collect();
                return Err(refuse(format!(
                    "{missing:?} is not a tool this sub-agent may have; it may have: {}",
                    list.join(", ")
                )));
            }
        }
        let keep =
            |t: &str| offered.contains(t) && requested.as_ref().is_none_or(|r| r.contains(t));
        let mut tools = of
            .tools
            .narrowed(|t| keep(t) && !spawners.iter().any(|s| s == t));
        let policy = config.policy.under(&parent.policy);
        let max_depth = parent.max_depth.min(config.spawn.max_depth);
        // A spawn from the child would run at depth + 2.
        if depth + 1 < max_depth {
            let names: BTreeSet<String> = tools
                .names()
                .into_iter()
                .chain(spawners.iter().filter(|s| keep(s)).cloned())
                .collect();
            let below = Parent {
                id: config.id.clone(),
                spawn: config.spawn.clone(),
                tools: names.clone(),
                policy: policy.clone(),
                max_depth,
            };
            let deps = SpawnDeps {
                directory: self.directory.clone(),
                clock: self.clock.clone(),
                kv: self.kv.clone(),
                wake: self.wake.clone(),
            };
            for t in spawn_tools(config, Arc::new(below), &deps) {
                if names.contains(&t.spec().name) {
                    tools.register(t);
                }
            }
        }
        Ok(Agent {
            // A child gets no MCP server: its tools are the parent's built-ins it may have.
            mcp: Vec::new(),
            config: AgentConfig {
                policy,
                ..config.clone()
            },
            chain: of.chain.clone(),
            tools,
            clock: of.clock.clone(),
            skills: None,
            secrets: of.secrets.clone(),
        })
    }

    /// Runs agent `id` on `task` with the `requested` tools: the depth limit checked, the
    /// child built, run against its timeout; its spend and steps passed to `report`.
    pub(super) async fn run_task(
        &self,
        ctx: &ToolContext,
        id: &str,
        task: &str,
        requested: Option<BTreeSet<String>>,
        report: &Report,
    ) -> Result<String, ToolError> {
        let max = self.parent.max_depth;
        if ctx.depth >= max {
            return Err(refuse(format!(
                "No sub-agent can run here: the limit of {max} levels of sub-agents is reached. Do the task yourself."
            )));
        }
        let Some(agent) = self.directory.get(id) else {
            return Err(refuse(format!("the agent {id} is not available")));
        };
        let child = self.child(&agent, requested, ctx.depth)?;
        self.run(&child, task, ctx, report).await
    }

    /// Runs `child` on `task` against the timeout, passing its spend and steps to `report`.
    async fn run(
        &self,
        child: &Agent,
        task: &str,
        ctx: &ToolContext,
        report: &Report,
    ) -> Result<String, ToolError> {
        let id = &child.config.id;
        let spawn = &self.parent.spawn;
        let mut state = child.begin(ChatMessage::user_text(task), "", "");
        state.closing = Some(Verdict::Unattended);
        // The task may be the untrusted text's words: what the parent's turn read taints it.
        state.tainted = ctx.tainted.clone();
        let own = Report::default();
        let opts = RunOptions {
            report: Some(&own),
            max_tokens: Some(spawn.max_tokens),
            budget: ctx.budget,
            // The invocation's allowance holds for the child's steps as for its parent's.
            allowance: ctx.allowance.as_ref(),
            ..Default::default()
        };
        let ctx = ToolContext {
            depth: ctx.depth + 1,
            ..ctx.clone()
        };
        let timeout = Duration::from_secs(spawn.timeout_secs);
        let run = std::pin::pin!(child.run(&[], state, &ctx, opts));
        let outcome = select(run, self.clock.sleep(timeout)).await;
        let reported = own.take();
        report.spend(reported.usage);
        for (at, step) in reported.steps {
            report.step(at, step.by_agent(id));
        }
        match outcome {
            Either::Left((Ok(Step::Done(out)), _)) => Ok(out.reply),
            // Unreachable with `closing` set; refuse rather than panic.
            Either::Left((Ok(Step::Ask { .. }), _)) => Err(refuse(format!(
                "The sub-agent {id} stopped for an approval nobody can give here."
            ))),
            Either::Left((Ok(Step::Pause(state)), _)) => Err(refuse(paused(id, &state))),
            // A sub-agent's run is not kept between steps: nothing can take it over.
            Either::Left((Ok(Step::Lost), _)) => Err(refuse(format!(
                "The sub-agent {id} was stopped."
            ))),
            Either::Left((Err(failed), _)) => Err(refuse(format!(
                "The sub-agent {id} failed: {}",
                failed.error.for_user(None)
            ))),
            Either::Right(_) => Err(refuse(format!(
                "The sub-agent {id} timed out after {}s without an answer; what it did before that may have taken effect.",
                timeout.as_secs()
            ))),
        }
    }
}

/// What the parent is told of a child that could not begin its next step within the
/// invocation's allowance (see [`crate::allowance`]): that it did not finish, and what it
/// found so far. Its spend and steps are in the parent's books already; its state is not
/// kept: the parent's own turn pauses at its next step, is kept in its job and goes on in a
/// fresh invocation, where its model sees this and may run the task again.
fn paused(id: &str, state: &RunState) -> String {
    let mut out = format!(
        "The sub-agent {id} did not finish: what this invocation may spend (time, requests, storage calls) ran out after its {} model calls, so it stopped before its next step. What it did took effect; to go on, run it again with what it found.",
        state.round
    );
    let names: std::collections::BTreeMap<&str, &str> = state
        .messages
        .iter()
        .flat_map(|m| m.tool_uses().map(|(id, name, _)| (id, name)))
        .collect();
    let kept = state.messages.iter().flat_map(|m| &m.content);
    let mut found = String::new();
    for block in kept.chain(&state.results) {
        let Block::ToolResult {
            tool_use_id,
            content,
            is_error: false,
        } = block
        else {
            continue;
        };
        let name = names.get(tool_use_id.as_str()).copied().unwrap_or("a tool");
        let cut: String = content.chars().take(FOUND_CHARS).collect();
        found.push_str(&format!("\n- {name}: {cut}"));
    }
    let said = state
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.text().trim().is_empty())
        .map(ChatMessage::text);
    if let Some(said) = said {
        let cut: String = said.chars().take(FOUND_CHARS).collect();
        found.push_str(&format!("\n- its last words: {cut}"));
    }
    if !found.is_empty() {
        out.push_str("\nWhat it found so far:");
        out.extend(found.chars().take(FOUND_TOTAL));
    }
    out
}

#[async_trait]
impl Tool for Spawn {
    fn level(&self) -> Level {
        // It acts only through the child's tools, each under the policy.
        Level::Guarded
    }

    fn time_limit(&self) -> Option<Duration> {
        Some(Duration::from_secs(self.parent.spawn.timeout_secs) + MARGIN)
    }

    /// A background task runs later, on its own. (A sub-agent run now starts with the
    /// turn's untrusted text, so its own risky calls are refused: nobody can be asked.)
    fn acts_beyond(&self, input: &Value) -> bool {
        input.get("background").and_then(Value::as_bool) == Some(true)
    }

    fn spec(&self) -> ToolSpec {
        let task = json!({"type": "string", "description": "the task, with everything the sub-agent needs to know: it sees nothing of this conversation"});
        if let Some(fixed) = &self.fixed {
            return ToolSpec {
                name: fixed.name.clone(),
                description: fixed.description.clone(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"task": task},
                    "required": ["task"],
                    "additionalProperties": false
                }),
            };
        }
        let agents = self.agents();
        let mut properties = json!({
            "task": task,
            "agent": {"type": "string", "enum": agents},
            "tools": {"type": "array", "items": {"type": "string"}}
        });
        if self.parent.spawn.background {
            properties["background"] = json!({"type": "boolean", "description": "run it as a job of its own and post its answer in this chat when done; you get no answer now"});
        }
        ToolSpec {
            name: super::SPAWN_TOOL.into(),
            description: format!(
                "Hands a task to a sub-agent, which works on it alone, in a fresh conversation, and returns its answer. `agent`: one of {} (default: {}, yourself). `tools`: the tools it may use, fewer than yours (default: all it may have). It cannot ask the user for approvals.",
                agents.join(", "),
                self.parent.id
            ),
            input_schema: json!({
                "type": "object",
                "properties": properties,
                "required": ["task"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        self.call_reporting(ctx, input, &Report::default()).await
    }

    async fn call_reporting(
        &self,
        ctx: &ToolContext,
        input: Value,
        report: &Report,
    ) -> Result<String, ToolError> {
        let task = input
            .get("task")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| refuse("`task` is required: what the sub-agent should do"))?;
        if task.chars().count() > MAX_TASK_CHARS {
            return Err(refuse(format!(
                "`task` is longer than {MAX_TASK_CHARS} characters; shorten it"
            )));
        }
        let id = match (&self.fixed, input.get("agent").and_then(Value::as_str)) {
            (Some(fixed), _) => fixed.agent.clone(),
            (None, Some(id)) => id.to_owned(),
            (None, None) => self.parent.id.clone(),
        };
        if self.fixed.is_none() && !self.agents().contains(&id) {
            return Err(refuse(format!(
                "{id:?} is not an agent you may run; you may run: {}",
                self.agents().join(", ")
            )));
        }
        let requested = Self::requested(&input)?;
        if input.get("background").and_then(Value::as_bool) == Some(true) {
            return self.start(ctx, &id, task, requested).await;
        }
        self.run_task(ctx, &id, task, requested, report).await
    }
}
