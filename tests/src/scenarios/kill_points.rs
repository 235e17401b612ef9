//! A turn with a tool cut at each point by killing the shell, for a shell started on the
//! asking config. Two tools: the MCP `slow__note`, an effect that must not happen twice (not
//! read-only, so not run again after a crash: at most once), and `schedule`, made idempotent by
//! the call's id (exactly once). The shell's harness posts [`KillPoint::question`], waits for
//! [`KillPoint::reached`], kills itself (kill -9, the Lambda's process, workerd), calls
//! [`KillPoint::disarm`], restarts, nudges its sweep until the answer arrives, and calls
//! [`KillPoint::check`]; for a reminder it then posts [`LISTING`] and, once it is answered,
//! calls [`KillPoint::check_listing`].

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
    /// `schedule` has set a reminder; the model call on its result is under way.
    RemindedAfterResult,
    /// `schedule` has set a reminder; the answer is being sent.
    RemindedSending,
    /// A voice note's answer is checkpointed; its speech is being made (before `sendVoice`).
    Speaking,
}

/// Every point, in the order the harnesses try them.
pub const KILL_POINTS: [KillPoint; 6] = [
    KillPoint::ToolRuns,
    KillPoint::AfterResult,
    KillPoint::Sending,
    KillPoint::RemindedAfterResult,
    KillPoint::RemindedSending,
    KillPoint::Speaking,
];

/// What the harness posts after a reminder's point, for [`KillPoint::check_listing`].
pub const LISTING: &str = "/reminders";

impl KillPoint {
    /// The update of this point's turn, number `id`, from the owner: the
    /// [`question`](KillPoint::question) as text or, for [`KillPoint::Speaking`], as a voice
    /// note (its file served by `f`), which is answered with one.
    pub fn update(self, id: i64, f: &Fakes) -> Value {
        if self != KillPoint::Speaking {
            return crate::servers::text_update(id, &self.question());
        }
        let file = format!("kill-voice-{id}");
        f.files
            .lock()
            .unwrap()
            .insert(file.clone(), self.question().into_bytes());
        let mut u = crate::fixtures::update("private_text", id);
        let m = u["message"].as_object_mut().unwrap();
        m.remove("text");
        m.remove("entities");
        m.insert(
            "voice".into(),
            serde_json::json!({"file_id": file, "file_unique_id": "k", "duration": 2, "mime_type": "audio/ogg"}),
        );
        u
    }

    /// The question of this point's turn (a reminder 200 days ahead, far from firing).
    pub fn question(self) -> String {
        match self.reminds() {
            true => {
                let at = crate::servers::now_ms() / 1000 + 200 * 86_400;
                crate::servers::reminder_at(at, &self.marker())
            }
            false if self == KillPoint::Speaking => format!("say: {}", self.marker()),
            false => format!("note: {}", self.marker()),
        }
    }

    /// What this point's question, note and reminder say, and nothing else does.
    fn marker(self) -> String {
        format!("cut at {self:?}")
    }

    /// Whether this point's tool is `schedule` (then the harness lists the reminders).
    pub fn reminds(self) -> bool {
        matches!(
            self,
            KillPoint::RemindedAfterResult | KillPoint::RemindedSending
        )
    }

    fn tag(self) -> &'static str {
        match self {
            KillPoint::ToolRuns => "note",
            KillPoint::AfterResult | KillPoint::RemindedAfterResult => "model",
            KillPoint::Sending | KillPoint::RemindedSending => "send",
            KillPoint::Speaking => "speech",
        }
    }

    /// Sets the fakes to hold the turn at this point.
    pub fn arm(self, f: &Fakes) {
        f.held.lock().unwrap().clear();
        match self.tag() {
            "note" => f.note_hang.store(true, Ordering::SeqCst),
            "model" => f.llm_hang_on_result.store(true, Ordering::SeqCst),
            "speech" => f.speech_hang.store(true, Ordering::SeqCst),
            _ => f.send_hang.store(true, Ordering::SeqCst),
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
        f.speech_hang.store(false, Ordering::SeqCst);
    }

    /// After the answer arrived in `chat`, which had `before` messages sent to it: answered
    /// once; the note taken at most once (exactly once when the kill came after it ran); the
    /// model call that asked for it, finished before the kill, not made again.
    pub fn check(self, f: &Fakes, chat: i64, before: usize, shell: &str) {
        let said = self.marker();
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
            KillPoint::AfterResult | KillPoint::Sending => 1,
            _ => 0,
        };
        assert_eq!(noted, expected, "{shell} {self:?}: the note's effect");
        if self == KillPoint::Speaking {
            // Spoken again after the restart (the audio is never stored), sent once.
            let voices: Vec<_> = f
                .uploads_to("sendVoice", chat)
                .into_iter()
                .filter(|(_, audio)| String::from_utf8_lossy(audio).contains(&said))
                .collect();
            assert_eq!(voices.len(), 1, "{shell} {self:?}: one voice note");
            assert!(voices[0].1.starts_with(b"OggS"));
            let spoken = f.speech_asked.lock().unwrap();
            let spoken = spoken.iter().filter(|t| t.contains(&said)).count();
            assert!(
                spoken >= 2,
                "{shell}: spoken before and after the kill ({spoken})"
            );
        }
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
            .filter(|r| asks(r, &said))
            .count();
        assert_eq!(
            asked, 1,
            "{shell} {self:?}: the model call that asked for the tool, once"
        );
        if matches!(self, KillPoint::Sending | KillPoint::RemindedSending) {
            let all = f
                .llm_requests
                .lock()
                .unwrap()
                .iter()
                .filter(|r| r["messages"].to_string().contains(&said))
                .count();
            assert_eq!(
                all, 2,
                "{shell}: no model call made again for the checkpointed answer"
            );
        }
    }
}

impl KillPoint {
    /// After [`LISTING`] was answered in `chat`: the reminder of this point's turn is there
    /// once (`schedule` keyed by its call's id made the repeat find it).
    pub fn check_listing(self, f: &Fakes, chat: i64, shell: &str) {
        let sent = f.sent_to(chat);
        let listing = sent.last().map(String::as_str).unwrap_or("");
        let found = listing
            .lines()
            .filter(|l| l.contains(&self.marker()))
            .count();
        assert_eq!(found, 1, "{shell} {self:?}: one reminder: {listing}");
    }
}

/// Whether model request `r` is the first call of the turn whose question holds `marker` (its
/// last message is the question itself, not a tool result).
fn asks(r: &Value, marker: &str) -> bool {
    let last = r["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    last["content"][0]["type"] != "tool_result" && last.to_string().contains(marker)
}
