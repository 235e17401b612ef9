//! The terminal chat (`clawless chat`, the cockpit's chat screen): a conversation with a
//! connector's default agent, no Telegram involved, in its own session. The cockpit watches
//! it ([`Watch`]): the answer as it is written, each tool call's result in line, each model
//! and tool call on the event bus under the turn's trace id, and a call that needs an
//! approval asked on the terminal ([`Approve`]); without one such a call is refused.

use async_trait::async_trait;

use crate::agent::{PendingCall, RunOptions, Step, TurnOutput, Verdict};
use crate::app::App;
use crate::connector::Connector;
use crate::ids::{ConnectorId, Scope, SessionKey};
use crate::llm::{ChatMessage, LlmError};
use crate::memory::scope::MemoryOwner;
use crate::session;
use crate::tools::ToolContext;

/// Asks whoever is at the terminal whether a call may run.
#[async_trait]
pub trait Approve: Send + Sync {
    async fn approve(&self, call: &PendingCall) -> bool;
}

/// What watches a terminal turn.
#[derive(Clone, Copy, Default)]
pub struct Watch<'a> {
    /// The answer so far, as it is written.
    pub on_text: Option<crate::llm::OnText<'a>>,
    /// Each tool call's result, as it comes: `(tool, result, is_error)`.
    pub on_result: Option<crate::agent::OnResult<'a>>,
    /// Asks about a call that needs an approval; none: such a call is refused.
    pub approve: Option<&'a dyn Approve>,
    /// The trace id its events are published under; empty: none published.
    pub trace: &'a str,
}

impl App {
    /// A terminal conversation with the default agent of `connector`, no Telegram involved.
    pub async fn chat_local(
        &self,
        connector: &ConnectorId,
        session_key: &SessionKey,
        text: &str,
    ) -> Result<String, LlmError> {
        self.chat_local_watched(connector, session_key, text, Watch::default())
            .await
    }

    /// [`App::chat_local`], watched (see [`Watch`]).
    pub async fn chat_local_watched(
        &self,
        connector: &ConnectorId,
        session_key: &SessionKey,
        text: &str,
        watch: Watch<'_>,
    ) -> Result<String, LlmError> {
        let conn = self
            .connectors
            .get(connector)
            .ok_or_else(|| LlmError::NotConfigured(format!("no connector {connector}")))?;
        let kv = &*self.platform.kv;
        let mut s = session::load(kv, session_key)
            .await
            .map_err(LlmError::from)?;
        // The terminal is the owner's: their memory (or the shared one).
        let scope = conn.memory_scope(conn.default_memory_owner().unwrap_or(MemoryOwner::Shared));
        let trace = watch.trace;
        let on_step = |at: u64, step: &crate::audit::Step| {
            if let Some(e) = crate::events::Event::of_step(step) {
                if !trace.is_empty() {
                    self.events.publish(at, trace, e);
                }
            }
        };
        let opts = RunOptions {
            on_text: watch.on_text,
            on_result: watch.on_result,
            on_step: Some(&on_step),
            ..Default::default()
        };
        let started = self.platform.clock.now_ms();
        let out = self
            .agent_turn(conn, &scope, &s.messages, text, opts, watch.approve)
            .await;
        if !trace.is_empty() {
            let ended = crate::events::Event::TurnEnded {
                outcome: if out.is_ok() { "answered" } else { "failed" }.to_owned(),
                latency_ms: self.platform.clock.now_ms().saturating_sub(started),
            };
            self.emit(trace, ended);
        }
        let out = out?;
        s.messages.extend(out.messages);
        session::trim(&mut s.messages, self.config.session.history_window);
        s.updated_ms = self.platform.clock.now_ms();
        session::save(kv, session_key, &s)
            .await
            .map_err(LlmError::from)?;
        Ok(out.reply)
    }

    /// One turn of `conn`'s default agent in the memory `scope` of the conversation: the
    /// memories relevant to `text` recalled, then the model ↔ tools loop, a call that asks
    /// put to `approve` (refused without one).
    async fn agent_turn(
        &self,
        conn: &Connector,
        scope: &Scope,
        history: &[ChatMessage],
        text: &str,
        opts: RunOptions<'_>,
        approve: Option<&dyn Approve>,
    ) -> Result<TurnOutput, LlmError> {
        let recall = self.lifecycle().recall(scope, text).await;
        let ctx = ToolContext {
            scope: scope.clone(),
            granted: Default::default(),
            origin: None,
            depth: 0,
            budget: None,
            call: String::new(),
            tainted: None,
            allowance: None,
        };
        let agent = conn.default_agent();
        let Some(approve) = approve else {
            return agent
                .run_turn(history, ChatMessage::user_text(text), &ctx, &recall, opts)
                .await;
        };
        let skills = agent.skills_block(scope).await;
        let mut state = agent.begin(ChatMessage::user_text(text), &recall, &skills);
        loop {
            match agent.run(history, state, &ctx, opts).await {
                Ok(Step::Done(out)) => return Ok(out),
                Ok(Step::Ask { state: asked, call }) => {
                    let verdict = match approve.approve(&call).await {
                        true => Verdict::Approved,
                        false => Verdict::Denied,
                    };
                    state = *asked;
                    state.verdicts.insert(call.id, verdict);
                }
                Ok(Step::Lost) => {
                    return Err(LlmError::Transient("the turn was taken over".into()))
                }
                // No allowance is given in the terminal; refuse rather than panic.
                Ok(Step::Pause(_)) => {
                    return Err(LlmError::Transient("the turn was paused".into()))
                }
                Err(failed) => return Err(failed.error),
            }
        }
    }
}
