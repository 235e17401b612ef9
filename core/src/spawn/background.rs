//! Sub-agents in the background: a task that would hold the turn too long runs as a job of
//! its own and posts its answer to the chat. It reuses the reminders' path rather than a
//! queue of its own: the task is kept as a one-off reminder due at once
//! ([`crate::schedule::What::Spawn`]), which the next scheduler run (native: at once; the
//! serverless shells: within a minute) puts in the chat's task lane as an inbox job, exactly
//! once, on every shell, so the chat is answered meanwhile. The turn stage
//! (`turn/background.rs`) then runs it here, as a child of the chat's agent at depth 0, and
//! posts the answer.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::tool::refuse;
use super::{Parent, Spawn, SpawnDeps};
use crate::agent::Agent;
use crate::config::AgentTool;
use crate::schedule::when::First;
use crate::schedule::{Schedules, What};
use crate::tools::{Report, Reported, ToolContext, ToolError};

impl Spawn {
    /// Keeps `task` for agent `id` as a one-off due now; the tool's answer says so.
    pub(super) async fn start(
        &self,
        ctx: &ToolContext,
        id: &str,
        task: &str,
        requested: Option<BTreeSet<String>>,
    ) -> Result<String, ToolError> {
        if !self.parent.spawn.background {
            return Err(refuse(
                "background tasks are not enabled for this agent (spawn.background); run it now instead",
            ));
        }
        if ctx.depth > 0 {
            return Err(refuse(
                "only the conversation's own agent can start a background task",
            ));
        }
        let Some(origin) = ctx.origin.clone() else {
            return Err(refuse(
                "a background task posts to a Telegram chat; there is none here",
            ));
        };
        // The tools asked for are checked now, so a mistake is the model's to fix.
        let Some(agent) = self.directory.get(id) else {
            return Err(refuse(format!("the agent {id} is not available")));
        };
        self.child(&agent, requested.clone(), ctx.depth)?;
        let store = Schedules {
            kv: &*self.kv,
            clock: &*self.clock,
            wake: Some(&self.wake),
        };
        let storage = |e: clawless_platform::PortError| {
            refuse(format!("the task could not be kept (storage): {e}"))
        };
        let zone = store
            .zone_of(&origin.connector, origin.chat)
            .await
            .map_err(storage)?;
        let what = What::Spawn {
            agent: id.to_owned(),
            task: task.to_owned(),
            tools: requested.map(|r| r.into_iter().collect()),
        };
        let first = First {
            next_ms: self.clock.now_ms() / 1000 * 1000,
            cron: None,
        };
        let r = store
            .create(origin, what, first, &zone)
            .await
            .map_err(storage)?
            .map_err(refuse)?;
        Ok(format!(
            "Started: {id} works on it in the background (task #{}); its answer will be posted in this chat when it is done. Tell the user so; do not wait for it.",
            r.id
        ))
    }
}

/// Runs a background task that fired: agent `id` on `task` as a child of `root` (the
/// chat's agent), within `root`'s tools, policy and `spawn:` bounds. Returns the answer or
/// the error, and the child's spend and steps.
pub async fn run_fired(
    root: &Agent,
    deps: &SpawnDeps,
    ctx: &ToolContext,
    id: &str,
    task: &str,
    tools: Option<Vec<String>>,
) -> (Result<String, ToolError>, Reported) {
    let config = &root.config;
    let may = id == config.id
        || config.spawn.agents.iter().any(|a| a == id)
        || config.agent_tools.iter().any(|t| t.agent == id);
    let report = Report::default();
    if !may {
        let text = format!("{} may no longer run {id}", config.id);
        return (Err(refuse(text)), report.take());
    }
    let parent = Parent {
        id: config.id.clone(),
        spawn: config.spawn.clone(),
        tools: root.tools.names().into_iter().collect(),
        policy: config.policy.clone(),
        max_depth: config.spawn.max_depth,
    };
    let spawn = Spawn {
        directory: deps.directory.clone(),
        clock: deps.clock.clone(),
        kv: deps.kv.clone(),
        wake: deps.wake.clone(),
        parent: Arc::new(parent),
        // Fixed: which agents it may run was checked above.
        fixed: Some(AgentTool {
            agent: id.to_owned(),
            name: super::SPAWN_TOOL.to_owned(),
            description: String::new(),
        }),
    };
    let requested = tools.map(|t| t.into_iter().collect());
    let answer = spawn.run_task(ctx, id, task, requested, &report).await;
    (answer, report.take())
}
