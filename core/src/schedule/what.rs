//! What a reminder's firing does ([`What`]): a text, a prompt, a background task, its answer,
//! a watch's check, or a hook's delivery.

use serde::{Deserialize, Serialize};

/// What a firing does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum What {
    /// Sends "⏰ text".
    Text(String),
    /// Runs an agent turn on the prompt in the chat's session.
    Prompt(String),
    /// Runs a sub-agent on a task started in the background (see [`crate::spawn`]) and posts
    /// its answer: a one-off due at once.
    Spawn {
        agent: String,
        task: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools: Option<Vec<String>>,
    },
    /// A background task's answer, already posted from the task's own lane, joining the
    /// chat's session in the chat's lane (never a reminder of its own: only an inbox job).
    Done {
        agent: String,
        task: String,
        answer: String,
    },
    /// A scheduled task gated by watch `watch`: run as [`What::Prompt`], but only when the
    /// watch saw its page change since the task last ran (see [`crate::watch`]).
    Gated { prompt: String, watch: u64 },
    /// A watch (see [`crate::watch`]): every `every_secs` its page is fetched, without the
    /// model; only when its text changed is a turn run on `task` with what changed.
    Watch {
        url: String,
        every_secs: u64,
        task: String,
    },
    /// A hook's delivery (see [`crate::hooks`]): `text` sent as it is, or, with `turn`, a
    /// turn run on it as untrusted text. Never a reminder of its own: only an inbox job.
    Hook {
        hook: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        turn: bool,
        text: String,
    },
}

impl What {
    pub fn body(&self) -> &str {
        match self {
            What::Text(t) | What::Prompt(t) => t,
            What::Gated { prompt, .. } => prompt,
            What::Spawn { task, .. } => task,
            What::Done { answer, .. } => answer,
            What::Hook { text, .. } => text,
            What::Watch { task, .. } => task,
        }
    }
}
