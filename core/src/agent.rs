//! The agent turn: the model ↔ tools loop with a round limit, repeat detection, per-tool
//! timeouts and truncated results. Tool errors go back to the model, not to the user. Each
//! call passes the agent's policy first (allow, ask, deny by tool and level); a call that
//! asks stops the turn as a serialisable [`RunState`] that resumes once it is answered.

use std::collections::BTreeMap;
use std::sync::Arc;

use clawless_platform::Clock;
use serde_json::Value;

use crate::allowance::Work;
use crate::audit::Step as AuditStep;
use crate::config::{AgentConfig, Rule};
use crate::llm::{Block, ChatMessage, ChatRequest, LlmError, ModelChain, Role};
use crate::tools::{Level, Report, ToolContext, ToolRegistry};
use crate::usage::{Left, Tally};

mod ask;
mod call;
mod state;

pub use crate::tools::MAX_TOOL_RESULT;
pub use call::truncate;
pub use state::{
    Failed, Lost, PendingCall, RunState, Saver, Step, TurnOutput, Verdict, UNKNOWN_OUTCOME,
};
/// An identical call (same tool, same input) past this many times in one turn is refused.
pub const MAX_IDENTICAL_CALLS: usize = 2;
/// Tool calls of one model answer that may run; the rest are answered "not run" (a model's
/// answer is untrusted: nothing else bounds how many calls it holds).
pub const MAX_CALLS_PER_ROUND: usize = 64;
/// The audit decision of a call refused because it would carry a secret out (the turn tells
/// the owner of each).
pub const LEAK_REFUSED: &str = "refused: it would carry a secret out";

pub struct Agent {
    pub config: AgentConfig,
    pub chain: ModelChain,
    pub tools: ToolRegistry,
    pub clock: Arc<dyn Clock>,
    /// The skills it may be offered (none when `None`).
    pub skills: Option<Arc<crate::skills::Offer>>,
    /// Its MCP servers, whose tools join `tools` for each turn (see [`Agent::toolset`]).
    pub mcp: Vec<Arc<crate::mcp::McpServer>>,
    /// The assistant's own secrets: a tool call carrying one is refused before it runs.
    pub secrets: crate::secret::Secrets,
}

/// What a run may use beyond its state.
#[derive(Clone, Copy, Default)]
pub struct RunOptions<'a> {
    /// What the nearest spend cap leaves.
    pub budget: Option<Left>,
    /// The model the chat chose (`provider/model`, `/model`): tried first.
    pub model: Option<&'a str>,
    /// Streams each model call: called with the call's text so far (see
    /// [`ModelChain::chat_stream`](crate::llm::ModelChain::chat_stream)).
    pub on_text: Option<crate::llm::OnText<'a>>,
    /// A sub-agent's run: where its spend and steps go as they happen (see
    /// [`crate::spawn`]), so a run cut off by its timeout is still counted.
    pub report: Option<&'a Report>,
    /// No model call starts once the run has used this many tokens (a sub-agent's budget).
    pub max_tokens: Option<u64>,
    /// Where the run is kept after every step, so a turn resumed after a crash goes on from
    /// its last step (see [`Saver`]).
    pub saver: Option<&'a dyn Saver>,
    /// Told of each model call and tool call as it ends (sub-agents' too): the event bus.
    pub on_step: Option<OnStep<'a>>,
    /// Told of each tool call's result: `(tool, result, is_error)` (the terminal chat).
    pub on_result: Option<OnResult<'a>>,
    /// What the invocation may still spend: a model or tool call that would not fit is not
    /// begun, and a model call still under way at its end is given up; the run pauses
    /// ([`Step::Pause`]) to go on in another invocation (see [`crate::allowance`]).
    pub allowance: Option<&'a crate::allowance::Allowance>,
}

/// See [`RunOptions::on_result`].
pub type OnResult<'a> = &'a (dyn Fn(&str, &str, bool) + Send + Sync);

/// See [`RunOptions::on_step`].
pub type OnStep<'a> = &'a (dyn Fn(u64, &AuditStep) + Send + Sync);

impl Agent {
    /// Runs one user turn to a final answer. `recall` (memories found for this turn) goes
    /// after the newest message when not empty. A call that would need an approval is
    /// refused (this is the terminal chat's path; Telegram turns use [`Agent::run`]).
    pub async fn run_turn(
        &self,
        history: &[ChatMessage],
        user: ChatMessage,
        ctx: &ToolContext,
        recall: &str,
        opts: RunOptions<'_>,
    ) -> Result<TurnOutput, LlmError> {
        let skills = self.skills_block(&ctx.scope).await;
        let mut state = self.begin(user, recall, &skills);
        state.closing = Some(Verdict::Denied);
        match self
            .run(history, state, ctx, opts)
            .await
            .map_err(|f| f.error)?
        {
            Step::Done(out) => Ok(out),
            // Unreachable with `closing` set; refuse rather than panic.
            Step::Ask { state, .. } => {
                Ok(Agent::cancel(*state, "Stopped: this needs an approval."))
            }
            Step::Lost => Err(LlmError::Transient("the turn was taken over".into())),
            // No allowance is given here; refuse rather than panic.
            Step::Pause(_) => Err(LlmError::Transient("the turn was paused".into())),
        }
    }

    /// The system prompt's list of the skills offered in the conversation of `scope` (see
    /// [`crate::skills`]): `""` when there are none.
    pub async fn skills_block(&self, scope: &crate::ids::Scope) -> String {
        match &self.skills {
            Some(offer) => {
                let workspace = crate::tools::skill::workspace_skills(scope);
                offer.prompt(Some(&workspace)).await
            }
            None => String::new(),
        }
    }

    /// The state of a new turn: the system prompt, then `skills` (the block of
    /// [`Agent::skills_block`]) when not empty. `recall` (memories found for the turn) is
    /// kept apart and sent after the newest message of each request: the system prompt stays
    /// the same from turn to turn, the prefix the provider's prompt cache reads back.
    pub fn begin(&self, user: ChatMessage, recall: &str, skills: &str) -> RunState {
        let mut system = self.config.system_prompt.clone();
        if !skills.trim().is_empty() {
            system.truncate(system.trim_end().len());
            system.push_str("\n\n");
            system.push_str(skills);
        }
        RunState {
            system,
            recall: recall.trim().to_owned(),
            messages: vec![user],
            round: 0,
            seen: BTreeMap::new(),
            verdicts: BTreeMap::new(),
            closing: None,
            usage: Tally::default(),
            recorded: Tally::default(),
            log: Vec::new(),
            logged: 0,
            results: Vec::new(),
            running: None,
            unsure: Default::default(),
            tainted: None,
            tainted_earlier: false,
        }
    }

    /// Runs the turn from `state` until it answers or a call needs an approval. A state
    /// that stopped at [`Step::Ask`] resumes here once its verdict is in `state.verdicts`.
    /// With `opts.budget` (what the nearest spend cap leaves), no model call starts once the
    /// turn's unrecorded spend has used it up: the turn ends saying so.
    pub async fn run(
        &self,
        history: &[ChatMessage],
        mut state: RunState,
        ctx: &ToolContext,
        opts: RunOptions<'_>,
    ) -> Result<Step, Box<Failed>> {
        let budget = opts.budget;
        let chain = self.chain.preferring(opts.model);
        let registry = self.toolset().await;
        let tools = registry.specs();
        loop {
            let resuming = state
                .messages
                .last()
                .is_some_and(|m| m.role == Role::Assistant && m.tool_uses().next().is_some());
            if !resuming {
                if state.round >= self.config.max_rounds {
                    // The last round paired every tool_use with a result; close the turn
                    // with an explanation the user sees.
                    let reply = format!(
                        "I stopped after {} rounds of tool calls without reaching an answer. Try asking in smaller steps.",
                        self.config.max_rounds
                    );
                    return Ok(Step::Done(state.closed_with(reply)));
                }
                if let Some(max) = opts.max_tokens {
                    if state.usage.tokens() >= max {
                        return Ok(Step::Done(state.out_of_tokens(max)));
                    }
                }
                if let Some(left) = budget {
                    if state.usage.since(&state.recorded).cost_micros >= left.micros {
                        tracing::info!(cap = left.cap, "spend cap reached; no model call");
                        let reply = crate::usage::cap_reached(&left);
                        return Ok(Step::Done(state.closed_with(reply)));
                    }
                }
                if let Some(a) = opts.allowance {
                    if !a.may_begin(self.clock.now_ms(), Work::Model) {
                        return Ok(Step::Pause(Box::new(state)));
                    }
                }
                let mut messages = history.to_vec();
                messages.extend(state.messages.iter().cloned());
                let request = ChatRequest {
                    model: String::new(),
                    system: state.system.clone(),
                    messages,
                    tools: tools.clone(),
                    max_tokens: self.config.max_tokens,
                    context: match state.recall.is_empty() {
                        true => String::new(),
                        false => format!("## Relevant memories\n{}", state.recall),
                    },
                    conversation: ctx.scope.as_str().to_owned(),
                };
                let started = self.clock.now_ms();
                let call = async {
                    match opts.on_text {
                        Some(on_text) => chain.chat_stream(&request, on_text).await,
                        None => chain.chat(&request).await,
                    }
                };
                let Some(answer) = self.unless_out_of_time(opts.allowance, call).await else {
                    tracing::info!(
                        round = state.round,
                        "model call given up at the invocation's end; it goes on elsewhere"
                    );
                    return Ok(Step::Pause(Box::new(state)));
                };
                if let Some(a) = opts.allowance {
                    a.took(Work::Model, self.clock.now_ms().saturating_sub(started));
                }
                let response = match answer {
                    Ok(response) => response,
                    Err(error) => {
                        let now = self.clock.now_ms();
                        // The chain fails only after its last link failed.
                        let model = chain.links.last().map(|l| l.label.clone());
                        record(
                            &mut state,
                            now,
                            AuditStep::Model {
                                model: model.unwrap_or_default(),
                                input: 0,
                                output: 0,
                                cached_input: 0,
                                cost_micros: 0,
                                latency_ms: now.saturating_sub(started),
                                outcome: error.kind().to_owned(),
                                agent: None,
                            },
                            &opts,
                        );
                        return Err(Box::new(Failed { error, state }));
                    }
                };
                state.round += 1;
                let mut call = Tally::default();
                call.add_call(response.usage, response.cost_micros);
                state.spend(call, opts.report);
                let now = self.clock.now_ms();
                record(
                    &mut state,
                    now,
                    AuditStep::Model {
                        model: response.model.clone(),
                        input: response.usage.input,
                        output: response.usage.output,
                        cached_input: response.usage.cached_input,
                        cost_micros: response.cost_micros,
                        latency_ms: now.saturating_sub(started),
                        outcome: "ok".to_owned(),
                        agent: None,
                    },
                    &opts,
                );
                let answered = response.message.tool_uses().next().is_none();
                state.messages.push(response.message);
                if !answered && save(&opts, &state, false).await.is_err() {
                    return Ok(Step::Lost);
                }
                if answered {
                    let reply = state
                        .messages
                        .last()
                        .map(ChatMessage::text)
                        .unwrap_or_default();
                    let reply = if reply.trim().is_empty() {
                        "(The model returned an empty answer.)".to_owned()
                    } else {
                        reply
                    };
                    return Ok(Step::Done(TurnOutput {
                        reply,
                        messages: state.messages,
                        usage: state.usage,
                        log: std::mem::take(&mut state.log),
                        tainted: state.tainted,
                    }));
                }
            }
            let calls: Vec<(String, String, Value)> = state
                .messages
                .last()
                .map(|m| {
                    m.tool_uses()
                        .map(|(id, n, i)| (id.to_owned(), n.to_owned(), i.clone()))
                        .collect()
                })
                .unwrap_or_default();
            // Every approval of the round first: nothing runs until all are answered.
            let asked = calls.len().min(MAX_CALLS_PER_ROUND);
            let rules = match self.rules_of_round(&registry, ctx, &mut state, &calls[..asked]) {
                Ok(rules) => rules,
                Err(call) => {
                    return Ok(Step::Ask {
                        state: Box::new(state),
                        call,
                    })
                }
            };
            let over = (Rule::Deny, None);
            let rules = rules.into_iter().chain(std::iter::repeat(over));
            for (i, ((id, name, input), (rule, leak))) in calls.into_iter().zip(rules).enumerate() {
                if state.result_of(&id).is_some() {
                    continue;
                }
                let over = i >= MAX_CALLS_PER_ROUND;
                let verdict = state.verdicts.get(&id).copied();
                if leak.is_some() {
                    tracing::warn!(tool = %name, "tool call refused: it would carry a secret out");
                }
                let refusal = match rule {
                    _ if over => Some(format!(
                        "Not run: one answer may make at most {MAX_CALLS_PER_ROUND} tool calls. Make the rest in your next answer."
                    )),
                    _ if leak.is_some() => leak.clone(),
                    Rule::Deny => Some(format!(
                        "{name} is not allowed for this assistant; it was not run."
                    )),
                    _ => verdict.and_then(|v| v.refusal(&name)),
                };
                let mut decision = match (rule, verdict) {
                    _ if over => "over the round's limit",
                    _ if leak.is_some() => LEAK_REFUSED,
                    (Rule::Deny, _) => "refused by policy",
                    (_, Some(Verdict::Approved)) => "approved",
                    (_, Some(Verdict::Denied)) => "denied",
                    (_, Some(Verdict::Expired)) => "expired",
                    (_, Some(Verdict::Superseded)) => "superseded",
                    (_, Some(Verdict::Unattended)) => "needs approval",
                    (Rule::Ask, None) => "granted",
                    (_, None) => "allowed",
                };
                let args = match leak {
                    Some(_) => "(withheld: they held a secret)".to_owned(),
                    None => crate::audit::shown_args(&input, crate::audit::MAX_DETAIL),
                };
                let level = registry
                    .get(&name)
                    .map_or(Level::Unsafe, |t| t.level_for(ctx, &input));
                let started = self.clock.now_ms();
                let report = Report::default();
                let tool = registry.get(&name);
                let brings = tool.and_then(|t| t.brings_untrusted(&input));
                let mut ran = false;
                let interrupted = state.running.as_deref() == Some(id.as_str());
                let (content, is_error) = match refusal {
                    Some(text) => (text, true),
                    None if interrupted && !tool.is_some_and(|t| t.rerunnable(&input)) => {
                        decision = "unknown after a restart";
                        state.unsure.insert(name.clone());
                        (UNKNOWN_OUTCOME.to_owned(), true)
                    }
                    None => {
                        let work = Work::Tool {
                            name: &name,
                            timeout: self.timeout_of(tool),
                        };
                        if opts
                            .allowance
                            .is_some_and(|a| !a.may_begin(self.clock.now_ms(), work))
                        {
                            return Ok(Step::Pause(Box::new(state)));
                        }
                        let count = state.seen.entry(format!("{name}\u{0}{input}")).or_default();
                        if !interrupted {
                            *count += 1;
                        }
                        if *count > MAX_IDENTICAL_CALLS {
                            decision = "repeated";
                            ("This exact call was already made twice in this turn; it was not run again. Use the earlier results.".to_owned(), true)
                        } else {
                            // A sub-agent may spend only what the cap still leaves.
                            let ctx = &ToolContext {
                                budget: budget.map(|left| state.left_of(left)),
                                call: match ctx.call.is_empty() {
                                    true => String::new(),
                                    false => format!("{}:{}:{id}", ctx.call, state.round),
                                },
                                tainted: state.tainted.clone(),
                                allowance: opts.allowance.cloned(),
                                ..ctx.clone()
                            };
                            // The ledger entry of a call that must not run twice: kept
                            // (under the turn's fence) before it begins.
                            if !tool.is_some_and(|t| t.rerunnable(&input)) {
                                state.running = Some(id.clone());
                                if save(&opts, &state, true).await.is_err() {
                                    return Ok(Step::Lost);
                                }
                            }
                            ran = true;
                            self.call_tool(&registry, ctx, &name, input, &report).await
                        }
                    }
                };
                if ran && state.tainted.is_none() {
                    state.tainted = brings;
                }
                // A sub-agent's steps first, then the call that ran it.
                state.absorb(&report, opts.report, opts.on_step);
                let now = self.clock.now_ms();
                if let (true, Some(a)) = (ran, opts.allowance) {
                    let work = Work::Tool {
                        name: &name,
                        timeout: self.timeout_of(tool),
                    };
                    a.took(work, now.saturating_sub(started));
                }
                record(
                    &mut state,
                    now,
                    AuditStep::Tool {
                        level,
                        name: name.clone(),
                        args,
                        decision: decision.to_owned(),
                        latency_ms: now.saturating_sub(started),
                        result_bytes: content.len(),
                        error: is_error
                            .then(|| crate::audit::cut(&content, crate::audit::MAX_DETAIL)),
                        agent: None,
                    },
                    &opts,
                );
                if let Some(f) = opts.on_result {
                    f(&name, &content, is_error);
                }
                state.results.push(Block::ToolResult {
                    tool_use_id: id,
                    content,
                    is_error,
                });
                state.running = None;
                if save(&opts, &state, false).await.is_err() {
                    return Ok(Step::Lost);
                }
            }
            let results = state.round_results();
            state.messages.push(ChatMessage {
                role: Role::User,
                content: results,
            });
        }
    }

    /// What a call of `name` at `level` needs under this agent's policy.
    pub fn rule(&self, name: &str, level: Level) -> Rule {
        self.config.policy.rule(name, level)
    }
}

/// Keeps an audit step in `state`, telling `opts.on_step` first.
fn record(state: &mut RunState, at_ms: u64, step: AuditStep, opts: &RunOptions<'_>) {
    if let Some(f) = opts.on_step {
        f(at_ms, &step);
    }
    state.record(at_ms, step, opts.report);
}

/// Keeps `state` through `opts.saver`, if any.
async fn save(opts: &RunOptions<'_>, state: &RunState, fenced: bool) -> Result<(), Lost> {
    match opts.saver {
        Some(saver) => saver.save(state, fenced).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
