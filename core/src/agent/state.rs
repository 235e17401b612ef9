//! A turn's state between model calls: [`RunState`], serialisable so a turn waiting for an
//! approval can resume in another process; the [`PendingCall`] it waits on and the
//! [`Verdict`] that answers it; where a run stops ([`Step`], [`Failed`]) and what keeps it
//! between steps ([`Saver`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::Step as AuditStep;
use crate::llm::{Block, ChatMessage, LlmError, Role};
use crate::tools::{Level, Report};
use crate::usage::{Left, Tally};

/// What became of a call that needed an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approved,
    Denied,
    /// Nobody answered within the expiry.
    Expired,
    /// A new message arrived in the chat first.
    Superseded,
    /// Nobody can be asked: a sub-agent's call that needs an approval its chat did not grant.
    Unattended,
}

impl Verdict {
    /// What the model is told instead of the tool's result; `None` when the call runs.
    pub(super) fn refusal(self, tool: &str) -> Option<String> {
        match self {
            Verdict::Approved => None,
            Verdict::Denied => Some(format!("The user denied {tool}; it was not run. Do not ask for it again in this answer; say what you would have done instead.")),
            Verdict::Expired => Some(format!("Nobody approved {tool} in time; it was not run. Finish your answer without it.")),
            Verdict::Superseded => Some(format!("The user sent a new message before approving {tool}; it was not run. Finish this answer briefly without it.")),
            Verdict::Unattended => Some(format!("{tool} needs the user's approval, which a sub-agent cannot ask for; it was not run. Do without it, or say in your answer that it is needed.")),
        }
    }
}

/// A turn in progress, serialisable so it can wait for an approval in storage and resume in
/// another process (the `RunState` of the OpenAI Agents SDK; Cloudflare's `waitForApproval`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The system prompt, with the skills offered (a turn kept by an earlier release has the
    /// memories it recalled here too).
    pub system: String,
    /// The memories recalled at the start of the turn: sent after the newest message of each
    /// request ([`crate::llm::ChatRequest::context`]), not in `system`, whose bytes each
    /// request repeats for the prompt cache.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recall: String,
    /// This turn's messages so far, the user's first. The history before it is the session's.
    pub messages: Vec<ChatMessage>,
    /// Model calls made.
    pub round: u32,
    /// `tool\0input` → calls so far (repeat detection).
    #[serde(default)]
    pub seen: BTreeMap<String, usize>,
    /// Tool-use id → the answer to its approval.
    #[serde(default)]
    pub verdicts: BTreeMap<String, Verdict>,
    /// Once set (expired, superseded), every further call that would ask is refused so.
    #[serde(default)]
    pub closing: Option<Verdict>,
    /// The turn's model calls so far, and what of it was already added to the counters.
    #[serde(default)]
    pub usage: Tally,
    #[serde(default)]
    pub recorded: Tally,
    /// Audit steps not written yet, and how many of the turn's steps were written.
    #[serde(default)]
    pub log: Vec<(u64, AuditStep)>,
    #[serde(default)]
    pub logged: u32,
    /// The results of this round's calls so far, in call order: a round resumed after a
    /// crash runs none of them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<Block>,
    /// The call that began and has no result in `results` yet (kept only for calls that are
    /// not run twice, see [`crate::tools::Tool::rerunnable`]): resumed after a crash, its
    /// outcome is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// Tools a crash left a call of with an unknown outcome this turn: an unsafe call of one
    /// asks the user again, even under a grant.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub unsure: BTreeSet<String>,
    /// The first untrusted text this turn read (`the page https://…`, `a forwarded message`),
    /// once it has, or the one its conversation read since the person last wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tainted: Option<String>,
    /// `tainted` was read in an earlier turn (see [`RunState::carry`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tainted_earlier: bool,
}

impl RunState {
    /// Begins a turn the person did not start (a scheduled task firing) with the untrusted
    /// text its conversation read since they last wrote: that text is still in the history
    /// the model reads.
    pub fn carry(&mut self, tainted: Option<String>) {
        if self.tainted.is_none() && tainted.is_some() {
            self.tainted = tainted;
            self.tainted_earlier = true;
        }
    }

    /// Why a call that acts outside or beyond the turn asks, when the turn is tainted.
    pub(super) fn why_tainted(&self) -> Option<String> {
        let source = self.tainted.as_deref()?;
        Some(match self.tainted_earlier {
            false => format!("this turn read {source}, which may say anything"),
            true => format!("an earlier turn read {source}, which may say anything, and nobody has written since"),
        })
    }

    /// The result kept for call `id` of the current round, if it ran.
    pub fn result_of(&self, id: &str) -> Option<&Block> {
        self.results
            .iter()
            .find(|b| matches!(b, Block::ToolResult { tool_use_id, .. } if tool_use_id == id))
    }

    /// The round's results in the order of its calls, leaving none kept (results of calls the
    /// round does not hold are dropped).
    pub(super) fn round_results(&mut self) -> Vec<Block> {
        let mut kept = std::mem::take(&mut self.results);
        let order: Vec<String> = self
            .messages
            .last()
            .map(|m| m.tool_uses().map(|(id, _, _)| id.to_owned()).collect())
            .unwrap_or_default();
        let mut out = Vec::with_capacity(order.len());
        for id in order {
            if let Some(i) = kept.iter().position(
                |b| matches!(b, Block::ToolResult { tool_use_id, .. } if *tool_use_id == id),
            ) {
                out.push(kept.swap_remove(i));
            }
        }
        out
    }

    /// The turn ended by the assistant saying `reply` (no model call).
    pub(super) fn closed_with(mut self, reply: String) -> TurnOutput {
        self.messages
            .push(ChatMessage::assistant_text(reply.clone()));
        TurnOutput {
            reply,
            messages: self.messages,
            usage: self.usage,
            log: self.log,
            tainted: self.tainted,
        }
    }

    /// Keeps an audit step, up to [`crate::audit::MAX_STEPS_PER_TURN`] per turn, and
    /// passes it on to `report` (a sub-agent's run).
    pub(super) fn record(&mut self, at_ms: u64, step: AuditStep, report: Option<&Report>) {
        if let Some(r) = report {
            r.step(at_ms, step.clone());
        }
        if self.log.len() < crate::audit::MAX_STEPS_PER_TURN {
            self.log.push((at_ms, step));
        }
    }

    /// Adds spend to the run's, passing it on to `report`.
    pub(super) fn spend(&mut self, tally: Tally, report: Option<&Report>) {
        if let Some(r) = report {
            r.spend(tally);
        }
        self.usage.add(tally);
    }

    /// What a tool call reported (a sub-agent's work) added to the run's books.
    pub(super) fn absorb(
        &mut self,
        report: &Report,
        outer: Option<&Report>,
        on_step: Option<super::OnStep<'_>>,
    ) {
        let reported = report.take();
        self.spend(reported.usage, outer);
        for (at, step) in reported.steps {
            if let Some(f) = on_step {
                f(at, &step);
            }
            self.record(at, step, outer);
        }
    }

    /// What `left` (the cap's room when the run started) leaves after the run's unrecorded
    /// spend.
    pub(super) fn left_of(&self, left: Left) -> Left {
        let spent = self.usage.since(&self.recorded).cost_micros;
        Left {
            micros: left.micros.saturating_sub(spent),
            ..left
        }
    }

    /// The end of a run whose token budget is used: the last thing the model said, and why
    /// it stops there.
    pub(super) fn out_of_tokens(self, max: u64) -> TurnOutput {
        let said = self
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(ChatMessage::text)
            .unwrap_or_default();
        let note = format!("[Stopped: the token budget of this run ({max}) is used up.]");
        let reply = match said.trim() {
            "" => note,
            said => format!("{said}\n\n{note}"),
        };
        self.closed_with(reply)
    }
}

/// A tool call waiting for an approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    pub input: Value,
    pub level: Level,
    /// Why it asks although a grant or the policy would have let it run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl super::Agent {
    /// Ends a turn without another model call (`/stop`): every call still waiting is closed
    /// with `why`, which is also the reply.
    pub fn cancel(mut state: RunState, why: &str) -> TurnOutput {
        state.running = None;
        let open: Vec<String> = match state.messages.last() {
            Some(m) if m.role == Role::Assistant => {
                m.tool_uses().map(|(id, _, _)| id.to_owned()).collect()
            }
            _ => Vec::new(),
        };
        if !open.is_empty() {
            state.messages.push(ChatMessage {
                role: Role::User,
                content: open
                    .into_iter()
                    .map(|id| match state.result_of(&id) {
                        // Ran before the turn stopped: its result stands.
                        Some(done) => done.clone(),
                        None => Block::ToolResult {
                            tool_use_id: id,
                            content: why.to_owned(),
                            is_error: true,
                        },
                    })
                    .collect(),
            });
        }
        state.results.clear();
        state.closed_with(why.to_owned())
    }
}

/// Keeps a run's state between its steps: after each model response and each tool result,
/// and before a call that must not run twice ([`crate::tools::Tool::rerunnable`]), whose
/// save is the ledger entry that says it began.
#[async_trait::async_trait]
pub trait Saver: Send + Sync {
    /// Keeps `state`. With `fenced`, the caller must first make sure it still holds the turn
    /// (a call that must not run twice comes next). `Err(Lost)`: another worker holds the
    /// turn; the run stops at once, doing and writing nothing more. Any other failure to
    /// keep it is the saver's to log: the run goes on.
    async fn save(&self, state: &RunState, fenced: bool) -> Result<(), Lost>;
}

/// Another worker holds the turn (see [`Saver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost;

/// What the model is told of a call that began before a crash and cannot safely run again.
pub const UNKNOWN_OUTCOME: &str = "The outcome of this call is unknown: the assistant restarted while it ran, so it may or may not have taken effect. It was not run again. Check its effect if you can before deciding whether to repeat it.";

#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutput {
    /// The text to send to the user.
    pub reply: String,
    /// The turn's messages to append to the session: the user's, then the model's and tools'.
    pub messages: Vec<ChatMessage>,
    /// Every model call of the turn (across approvals).
    pub usage: Tally,
    /// The audit steps not written yet: `(at ms, step)`.
    pub log: Vec<(u64, AuditStep)>,
    /// The untrusted text the turn read or began with ([`RunState::tainted`]): its
    /// conversation keeps it until the person writes again.
    pub tainted: Option<String>,
}

/// Where a turn stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Done(TurnOutput),
    /// `call` needs an approval; nothing of its round has run.
    Ask {
        state: Box<RunState>,
        call: PendingCall,
    },
    /// Another worker took the turn over (see [`Saver`]); nothing more was done.
    Lost,
    /// The invocation's allowance is spent: the run goes on from this state elsewhere.
    Pause(Box<RunState>),
}

/// A run that ended on a failed model call: the error, and the state with what the run did
/// before it (its spend and audit steps, the failed call last), so the caller can keep its
/// books although the turn fails.
#[derive(Debug)]
pub struct Failed {
    pub error: LlmError,
    pub state: RunState,
}
