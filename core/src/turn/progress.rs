//! A turn kept after every step: the agent's [`RunState`] goes into its inbox job after each
//! model response and each tool result, and before a call that must not run twice (the
//! ledger entry saying it began). A drain after a crash finds it there and goes on from the
//! last step: no model call or tool call that finished is made again, a rerunnable call that
//! was cut runs again, and any other is reported to the model as of unknown outcome (see
//! [`crate::agent`]).
//!
//! One Kv write per step (the job); a fenced save (before a call that must not run twice)
//! first checks the lane's lease. The state is kept without images or documents (the model
//! has read them; a resumed turn reads a line saying they were there) and only up to
//! [`MAX_SUSPENDED_BYTES`]: a bigger turn goes on unkept, which is logged.

use std::sync::Mutex;

use async_trait::async_trait;

use crate::agent::{Lost, RunState, Saver};
use crate::app::App;
use crate::inbox::{Job, Lease};

/// A kept turn (a step, or a turn waiting for an approval) bigger than this is not kept (a
/// DynamoDB item holds 400 KB): it goes on unkept, or the call that would wait is refused.
pub const MAX_SUSPENDED_BYTES: usize = 256 * 1024;

/// Where a turn's steps are kept: its job, under the lane's lease.
pub(super) struct Progress<'a> {
    app: &'a App,
    key: &'a str,
    job: Mutex<&'a mut Job>,
    lease: Lease<'a>,
    /// The job's trace id, for the events of its turn.
    pub(super) trace: String,
}

impl<'a> Progress<'a> {
    pub(super) fn new(app: &'a App, key: &'a str, job: &'a mut Job, lease: Lease<'a>) -> Self {
        Progress {
            app,
            key,
            trace: super::trace(job),
            job: Mutex::new(job),
            lease,
        }
    }

    /// What the drain's invocation may still spend.
    pub(super) fn allowance(&self) -> &'a crate::allowance::Allowance {
        self.lease.allowance
    }

    /// Puts `state` in the job without writing it: the job's next save (a retry's) keeps it.
    /// A turn cut before its first model call with images or documents keeps its media stage
    /// instead, so that where it goes on it reads them again (kept, they would be lines saying
    /// they were there, and the model has not seen them), with only how many audit entries
    /// it wrote.
    pub(super) fn keep(&self, state: RunState) {
        let mut job = self.job.lock().unwrap_or_else(|e| e.into_inner());
        let unseen = state.round == 0
            && state
                .messages
                .iter()
                .any(|m| m.content.iter().any(crate::llm::Block::is_media));
        if unseen {
            if let Some(media) = job.media_mut() {
                media.logged = state.logged;
                return;
            }
        }
        job.stage = crate::inbox::Stage::Running(Box::new(kept(state)));
    }
}

/// The state as kept: without media.
fn kept(mut state: RunState) -> RunState {
    for m in &mut state.messages {
        *m = m.without_media();
    }
    state
}

#[async_trait]
impl Saver for Progress<'_> {
    async fn save(&self, state: &RunState, fenced: bool) -> Result<(), Lost> {
        if fenced {
            match self.app.inbox.hold(self.lease).await {
                Ok(true) => {}
                Ok(false) => return Err(Lost),
                Err(e) => {
                    // Without the ledger entry the call could run twice: it waits for a retry.
                    tracing::warn!(key = self.key, error = %e, "lease not checked; the call waits");
                    return Err(Lost);
                }
            }
        }
        let state = kept(state.clone());
        let size = serde_json::to_vec(&state).map_or(usize::MAX, |b| b.len());
        if size > MAX_SUSPENDED_BYTES {
            tracing::warn!(key = self.key, size, "turn too large to keep between steps");
            return match fenced {
                true => Err(Lost),
                false => Ok(()),
            };
        }
        let bytes = {
            let mut job = self.job.lock().unwrap_or_else(|e| e.into_inner());
            job.stage = crate::inbox::Stage::Running(Box::new(state));
            serde_json::to_vec(&**job)
        };
        let written = match bytes {
            Ok(bytes) => self.app.platform.kv.put(self.key, &bytes, None).await,
            Err(e) => Err(clawless_platform::PortError::invalid(e.to_string())),
        };
        match written {
            Ok(()) => Ok(()),
            // The call must not begin unrecorded; the turn is tried again later.
            Err(e) if fenced => {
                tracing::warn!(key = self.key, error = %e, "step not kept; the call waits");
                Err(Lost)
            }
            Err(e) => {
                tracing::warn!(key = self.key, error = %e, "step not kept; the turn goes on");
                Ok(())
            }
        }
    }
}
