//! A turn with a tool cut at each point by killing the shell, for a shell started on the
//! asking config: the question "note: …" makes the model call `slow__note`, an effect that
//! must not happen twice (not read-only, so not run again after a crash). The shell's harness
//! posts [`KillPoint::question`], waits for [`KillPoint::reached`], kills itself (kill -9, the
//! Lambda's process, workerd), calls [`KillPoint::disarm`], restarts, nudges its sweep until
//! the answer arrives, then calls [`KillPoint::check`].

use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::servers::Fakes;

/// Where a turn is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillPoint {
    /// The model asked for the tool and its call is under way (held before it takes effect).
    ToolRuns,
    /// The tool has run; the model call on its result is under way.
    AfterResult,
    /// The answer is being sent.
    Sending,
}

/// Every point, in the order the harnesses try them.
pub const KILL_POINTS: [KillPoint; 3] = [
    KillPoint::ToolRuns,
    KillPoint::AfterResult,
    KillPoint::Sending,
];

impl KillPoint {
    /// The question of this point's turn.
    pub fn question(self) -> String {
        format!("note: cut at {self:?}")
    }

    fn tag(self) -> &'static str {
        match self {
            KillPoint::ToolRuns => "note",
            KillPoint::AfterResult => "model",
            KillPoint::Sending => "send",
        }
    }

    /// Sets the fakes to hold the turn at this point.
    pub fn arm(self, f: &Fakes) {
        f.held.lock().unwrap().clear();
        match self {
            KillPoint::ToolRuns => f.note_hang.store(true, Ordering::SeqCst),
            KillPoint::AfterResult => f.llm_hang_on_result.store(true, Ordering::SeqCst),
            KillPoint::Sending => f.send_hang.store(true, Ordering::SeqCst),
        }
    }

    /// Whether the turn is held at this point.
    pub fn reached(self, f: &Fakes) -> bool {
        f.held.lock().unwrap().contains(&self.tag())
    }

    /// Lets everything go (after the kill).
    pub fn disarm(self, f: &Fakes) {
        f.note_hang.store(false, Ordering::SeqCst);
        f.llm_hang_on_result.store(false, Ordering::SeqCst);
        f.send_hang.store(false, Ordering::SeqCst);
    }

    /// After the answer arrived in `chat`, which had `before` messages sent to it: answered
    /// once; the note taken at most once (exactly once when the kill came after it ran); the
    /// model call that asked for it, finished before the kill, not made again.
    pub fn check(self, f: &Fakes, chat: i64, before: usize, shell: &str) {
        let question = self.question();
        let said = question.trim_start_matches("note: ");
        let sent = f.sent_to(chat);
        assert_eq!(
            sent.len(),
            before + 1,
            "{shell} {self:?}: answered once: {sent:?}"
        );
        let noted = f
            .mcp
            .calls()
            .iter()
            .filter(|(name, args)| name == "note" && args["text"] == said)
            .count();
        let expected = match self {
            KillPoint::ToolRuns => 0,
            KillPoint::AfterResult | KillPoint::Sending => 1,
        };
        assert_eq!(noted, expected, "{shell} {self:?}: the note's effect");
        if self == KillPoint::ToolRuns {
            let answer = sent.last().map(String::as_str).unwrap_or("");
            assert!(
                answer.contains("unknown"),
                "{shell}: told the outcome is unknown: {answer}"
            );
        }
        let asked = f
            .llm_requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| asks(r, &question))
            .count();
        assert_eq!(
            asked, 1,
            "{shell} {self:?}: the model call that asked for the tool, once"
        );
        if self == KillPoint::Sending {
            let all = f
                .llm_requests
                .lock()
                .unwrap()
                .iter()
                .filter(|r| r["messages"].to_string().contains(&question))
                .count();
            assert_eq!(
                all, 2,
                "{shell}: no model call made again for the checkpointed answer"
            );
        }
    }
}

/// Whether model request `r` is the first call of the turn asking `question` (its last
/// message is the question itself, not a tool result).
fn asks(r: &Value, question: &str) -> bool {
    let last = r["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    last["content"][0]["type"] != "tool_result" && last.to_string().contains(question)
}
