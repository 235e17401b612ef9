//! A turn with a tool cut at each point by killing the shell, for a shell started on the
//! asking config. Three tools: the MCP `slow__note`, an effect that must not happen twice (not
//! read-only, so not run again after a crash: at most once), `schedule`, made idempotent by
//! the call's id (exactly once), and `generate_image`, paid for (at most once; its picture
//! sent exactly once); a spoken answer, cut while spoken and while sent; and a watch's turn on
//! a change, cut at its model call. The shell's harness posts [`KillPoint::update`], waits for
//! [`KillPoint::wait_held`] (running its schedule for a watch), kills itself (kill -9, the Lambda's process, workerd), calls
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
    /// A voice note's answer has been spoken; the voice note is being sent.
    VoiceSending,
    /// The model asked for a picture; the image service is making it.
    Drawing,
    /// A picture has been made and kept; it is being sent (`sendPhoto`).
    PictureSending,
    /// A watch saw its page change (the change kept with its firing); the turn's model call
    /// on it is under way.
    WatchTurn,
}

/// Every point, in the order the harnesses try them.
pub const KILL_POINTS: [KillPoint; 10] = [
    KillPoint::ToolRuns,
    KillPoint::AfterResult,
    KillPoint::Sending,
    KillPoint::RemindedAfterResult,
    KillPoint::RemindedSending,
    KillPoint::Speaking,
    KillPoint::VoiceSending,
    KillPoint::Drawing,
    KillPoint::PictureSending,
    KillPoint::WatchTurn,
];

/// What the watched page says after its change.
const WATCH_CHANGE: &str = "Degraded in eu-west.";

/// What the harness posts after a reminder's point, for [`KillPoint::check_listing`].
pub const LISTING: &str = "/reminders";

impl KillPoint {
    /// The update of this point's turn, number `id`, from the owner: the
    /// [`question`](KillPoint::question) as text or, for [`KillPoint::Speaking`], as a voice
    /// note (its file served by `f`), which is answered with one; for
    /// [`KillPoint::WatchTurn`], a watch every 10 s on a page `f` serves, which changes after
    /// its first check.
    pub async fn update(self, id: i64, f: &Fakes) -> Value {
        if self == KillPoint::WatchTurn {
            *f.page.lock().unwrap() = "All green.".into();
            *f.page_next.lock().unwrap() = Some(WATCH_CHANGE.into());
            let url = f.serve_page().await;
            let args = serde_json::json!({"action": "create", "url": url, "every": "10s", "task": self.marker()});
            return crate::servers::text_update(id, &format!("watch: {args}"));
        }
        if !self.speaks() {
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
            false if self.speaks() => format!("say: {}", self.marker()),
            false if self.draws() => format!("draw: {}", self.marker()),
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

    /// Whether this point's turn answers a voice note with one.
    fn speaks(self) -> bool {
        matches!(self, KillPoint::Speaking | KillPoint::VoiceSending)
    }

    /// Whether this point's tool is `generate_image`.
    fn draws(self) -> bool {
        matches!(self, KillPoint::Drawing | KillPoint::PictureSending)
    }

    /// How many answers this point's turn sends before it reaches the point (the watch's
    /// "set"): the harness counts them in the chat's messages before it.
    pub fn answers_first(self) -> usize {
        usize::from(self == KillPoint::WatchTurn)
    }

    /// Waits (at most 90 s) until the turn is held at this point, calling `schedule` (the
    /// shell's scheduled run) every second for a watch, whose turn only a check starts. A
    /// scheduled run that holds the turn itself never ends: it is let go once the turn is held.
    pub async fn wait_held<F: std::future::Future>(self, f: &Fakes, schedule: impl Fn() -> F) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        let held = async {
            while !self.reached(f) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{self:?}: the turn was not held at its point within 90 s (page checks: {:?})",
                    f.page_asked.lock().unwrap()
                );
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
        };
        let nudge = async {
            if self == KillPoint::WatchTurn {
                loop {
                    schedule().await;
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = held => {}
            () = nudge => {}
        }
    }

    fn tag(self) -> &'static str {
        match self {
            KillPoint::WatchTurn => "watch",
            KillPoint::ToolRuns => "note",
            KillPoint::AfterResult | KillPoint::RemindedAfterResult => "model",
            KillPoint::Sending | KillPoint::RemindedSending => "send",
            KillPoint::Speaking => "speech",
            KillPoint::Drawing => "paint",
            KillPoint::VoiceSending | KillPoint::PictureSending => "upload",
        }
    }

    /// Sets the fakes to hold the turn at this point.
    pub fn arm(self, f: &Fakes) {
        f.held.lock().unwrap().clear();
        match self.tag() {
            "note" => f.note_hang.store(true, Ordering::SeqCst),
            "model" => f.llm_hang_on_result.store(true, Ordering::SeqCst),
            "watch" => f.llm_hang_on_watch.store(true, Ordering::SeqCst),
            "speech" => f.speech_hang.store(true, Ordering::SeqCst),
            "paint" => f.paint_hang.store(true, Ordering::SeqCst),
            "upload" => f.upload_hang.store(true, Ordering::SeqCst),
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
        f.llm_hang_on_watch.store(false, Ordering::SeqCst);
        f.send_hang.store(false, Ordering::SeqCst);
        f.speech_hang.store(false, Ordering::SeqCst);
        f.paint_hang.store(false, Ordering::SeqCst);
        f.upload_hang.store(false, Ordering::SeqCst);
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
        if self == KillPoint::WatchTurn {
            return self.check_watch(f, &sent, shell);
        }
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
        if self.speaks() {
            let voices: Vec<_> = f
                .uploads_to("sendVoice", chat)
                .into_iter()
                .filter(|(_, audio)| String::from_utf8_lossy(audio).contains(&said))
                .collect();
            assert_eq!(voices.len(), 1, "{shell} {self:?}: one voice note");
            assert!(voices[0].1.starts_with(b"OggS"));
            let spoken = f.speech_asked.lock().unwrap();
            let spoken = spoken.iter().filter(|t| t.contains(&said)).count();
            if self == KillPoint::Speaking {
                // Cut while spoken: no audio came back, so it is spoken again.
                assert!(
                    spoken >= 2,
                    "{shell}: spoken before and after the kill ({spoken})"
                );
            } else {
                // Cut while sent: the kept audio is sent, not spoken (and paid) again.
                assert_eq!(spoken, 1, "{shell} {self:?}: spoken once");
            }
        }
        if self.draws() {
            let photos = f
                .uploads_to("sendPhoto", chat)
                .into_iter()
                .filter(|(_, jpeg)| String::from_utf8_lossy(jpeg).contains(&said))
                .count();
            let drawn = f.images_asked.lock().unwrap();
            let drawn = drawn.iter().filter(|p| p.contains(&said)).count();
            // Paid for once: the picture request cut by the kill is not made again.
            assert_eq!(drawn, 1, "{shell} {self:?}: drawn once");
            // Made and kept before the kill: sent once; cut while made: none.
            let expected = usize::from(self == KillPoint::PictureSending);
            assert_eq!(photos, expected, "{shell} {self:?}: photos");
        }
        if matches!(self, KillPoint::ToolRuns | KillPoint::Drawing) {
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
    /// A watch's turn cut at its model call: its answer, sent once, saw the change kept
    /// before the kill; the model asked of it again once (the cut call never answered).
    fn check_watch(self, f: &Fakes, sent: &[String], shell: &str) {
        let answer = sent.last().map(String::as_str).unwrap_or("");
        assert!(
            answer.contains("saw the page change") && answer.contains(&format!("+ {WATCH_CHANGE}")),
            "{shell}: the watch's turn saw the change: {answer}"
        );
        let asked = f
            .llm_requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["messages"].to_string().contains("saw the page change"))
            .count();
        assert_eq!(
            asked, 2,
            "{shell}: the cut model call, and once after the kill"
        );
    }

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
