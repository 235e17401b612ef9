//! A stored job and its [`Stage`]: how far its turn has come, one stage at a time, stored in
//! the fields jobs have always had (`JobWire`), so a job an older version stored reads the
//! same.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Checkpoint, Suspended};
use crate::agent::RunState;
use crate::ids::ConnectorId;

/// One stored update and how far its turn has come.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "JobWire")]
pub struct Job {
    pub connector: ConnectorId,
    pub update_id: i64,
    /// The update as Telegram sent it.
    pub update: Value,
    pub attempts: u32,
    /// Not to be tried again before this instant (ms).
    pub not_before_ms: u64,
    /// Where its turn is: each step replaces the last.
    pub stage: Stage,
    /// A reminder's firing (see [`crate::schedule`]): `update` is then a message the bot
    /// made up in the reminder's chat, never one from Telegram, and its id is negative. What
    /// the job is, not how far it has come.
    pub fire: Option<crate::schedule::Fire>,
    /// When the ack stored it (ms; 0 in jobs stored before this was kept).
    pub accepted_ms: u64,
}

/// How far a job's turn has come. A job is in one stage at a time; a drain reads it to know
/// what to do next (`turn::process`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Stage {
    /// Nothing done yet.
    #[default]
    New,
    /// What a media turn gathered (its album, transcripts), kept across retries until the
    /// turn's first step is kept (see `turn/media.rs`).
    Gathered(Box<MediaState>),
    /// The turn in progress, kept after each of its steps (see `turn/progress.rs`): a drain
    /// after a crash goes on from here, repeating no model call or tool call that finished.
    Running(Box<RunState>),
    /// The turn, stopped at a call that waits for an approval (see `turn/approval.rs`).
    Waiting(Box<Suspended>),
    /// The answer, decided: each part is sent once from here (see `turn/deliver.rs`).
    Answered(Checkpoint),
}

impl Job {
    /// A job for an update just accepted.
    pub fn new(connector: ConnectorId, update_id: i64, update: Value, accepted_ms: u64) -> Job {
        Job {
            connector,
            update_id,
            update,
            attempts: 0,
            not_before_ms: 0,
            stage: Stage::New,
            fire: None,
            accepted_ms,
        }
    }

    /// A new job for `fire` under `update_id`: its update a message the bot makes up in
    /// `origin`'s chat, holding what the firing does.
    pub fn of_firing(
        connector: &ConnectorId,
        update_id: i64,
        origin: &crate::schedule::Origin,
        fire: crate::schedule::Fire,
        accepted_ms: u64,
    ) -> Job {
        let update = origin.message(update_id, fire.at_ms, fire.what.body());
        Job {
            fire: Some(fire),
            ..Job::new(connector.clone(), update_id, update, accepted_ms)
        }
    }

    /// The decided answer, once there is one.
    pub fn checkpoint(&self) -> Option<&Checkpoint> {
        match &self.stage {
            Stage::Answered(cp) => Some(cp),
            _ => None,
        }
    }

    pub fn checkpoint_mut(&mut self) -> Option<&mut Checkpoint> {
        match &mut self.stage {
            Stage::Answered(cp) => Some(cp),
            _ => None,
        }
    }

    /// The turn waiting for an approval.
    pub fn suspended(&self) -> Option<&Suspended> {
        match &self.stage {
            Stage::Waiting(s) => Some(s),
            _ => None,
        }
    }

    pub fn suspended_mut(&mut self) -> Option<&mut Suspended> {
        match &mut self.stage {
            Stage::Waiting(s) => Some(s),
            _ => None,
        }
    }

    /// The turn in progress, kept after its last step.
    pub fn running(&self) -> Option<&RunState> {
        match &self.stage {
            Stage::Running(r) => Some(r),
            _ => None,
        }
    }

    /// What a media turn gathered so far.
    pub fn media(&self) -> Option<&MediaState> {
        match &self.stage {
            Stage::Gathered(m) => Some(m),
            _ => None,
        }
    }

    /// What a media turn gathers: a job not yet begun begins gathering; `None` once the
    /// turn is past reading its media.
    pub fn media_mut(&mut self) -> Option<&mut MediaState> {
        if self.stage == Stage::New {
            self.stage = Stage::Gathered(Box::default());
        }
        match &mut self.stage {
            Stage::Gathered(m) => Some(m),
            _ => None,
        }
    }
}

/// A job as stored: each stage in its own optional field, as jobs were written before
/// [`Stage`], so a job stored by an older version reads the same.
#[derive(Deserialize)]
struct JobWire {
    connector: ConnectorId,
    update_id: i64,
    update: Value,
    #[serde(default)]
    attempts: u32,
    #[serde(default)]
    not_before_ms: u64,
    #[serde(default)]
    checkpoint: Option<Checkpoint>,
    #[serde(default)]
    suspended: Option<Box<Suspended>>,
    #[serde(default)]
    running: Option<Box<RunState>>,
    #[serde(default)]
    fire: Option<crate::schedule::Fire>,
    #[serde(default)]
    accepted_ms: u64,
    #[serde(default)]
    media: Option<Box<MediaState>>,
}

impl From<JobWire> for Job {
    fn from(w: JobWire) -> Job {
        // The order a drain looked at them in, when they were fields.
        let stage = match (w.checkpoint, w.running, w.suspended, w.media) {
            (Some(cp), ..) => Stage::Answered(cp),
            (None, Some(r), ..) => Stage::Running(r),
            (None, None, Some(s), _) => Stage::Waiting(s),
            (None, None, None, Some(m)) => Stage::Gathered(m),
            (None, None, None, None) => Stage::New,
        };
        Job {
            connector: w.connector,
            update_id: w.update_id,
            update: w.update,
            attempts: w.attempts,
            not_before_ms: w.not_before_ms,
            stage,
            fire: w.fire,
            accepted_ms: w.accepted_ms,
        }
    }
}

impl Serialize for Job {
    /// As [`JobWire`], borrowed: saving a job copies nothing (the ack path saves every one).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            connector: &'a ConnectorId,
            update_id: i64,
            update: &'a Value,
            attempts: u32,
            not_before_ms: u64,
            checkpoint: Option<&'a Checkpoint>,
            #[serde(skip_serializing_if = "Option::is_none")]
            suspended: Option<&'a Suspended>,
            #[serde(skip_serializing_if = "Option::is_none")]
            running: Option<&'a RunState>,
            #[serde(skip_serializing_if = "Option::is_none")]
            fire: Option<&'a crate::schedule::Fire>,
            accepted_ms: u64,
            #[serde(skip_serializing_if = "Option::is_none")]
            media: Option<&'a MediaState>,
        }
        Wire {
            connector: &self.connector,
            update_id: self.update_id,
            update: &self.update,
            attempts: self.attempts,
            not_before_ms: self.not_before_ms,
            checkpoint: self.checkpoint(),
            suspended: self.suspended(),
            running: self.running(),
            fire: self.fire.as_ref(),
            accepted_ms: self.accepted_ms,
            media: self.media(),
        }
        .serialize(s)
    }
}

/// What a media turn keeps in its job, so a retry neither loses an album nor pays for a
/// second transcription.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaState {
    /// The album's other updates, taken out of the lane into this job (their update ids
    /// are in `album_ids`).
    #[serde(default)]
    pub album: Vec<Value>,
    #[serde(default)]
    pub album_ids: Vec<i64>,
    /// Whether the album was gathered (it may have no other update).
    #[serde(default)]
    pub gathered: bool,
    /// Transcripts by file id.
    #[serde(default)]
    pub transcripts: std::collections::BTreeMap<String, String>,
    /// Audit entries earlier attempts wrote before the model saw the media (a first model
    /// call that failed): the turn's entries are numbered after them, not over them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub logged: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_job_stored_with_its_stage_fields_reads_back_in_that_stage() {
        let old = serde_json::json!({
            "connector": "main",
            "update_id": 7,
            "update": {},
            "media": {"album": [], "album_ids": [], "gathered": true, "transcripts": {"f": "hi"}},
        });
        let job: Job = serde_json::from_value(old).unwrap();
        assert_eq!(job.media().map(|m| m.transcripts.len()), Some(1));
        assert!(job.checkpoint().is_none() && job.running().is_none());
        // Written back, it is the same fields again, with nothing of another stage.
        let again = serde_json::to_value(&job).unwrap();
        assert!(again.get("media").is_some());
        assert!(again.get("running").is_none() && again.get("suspended").is_none());
        assert_eq!(serde_json::from_value::<Job>(again).unwrap(), job);
    }

    #[test]
    fn a_checkpoint_wins_over_what_an_older_job_also_held() {
        let old = serde_json::json!({
            "connector": "main",
            "update_id": 7,
            "update": {},
            "checkpoint": {"parts": [], "sent": 0},
            "media": {"gathered": true},
        });
        let job: Job = serde_json::from_value(old).unwrap();
        assert!(matches!(job.stage, Stage::Answered(_)));
    }

    #[test]
    fn only_a_job_not_begun_starts_gathering_media() {
        let mut job = Job::new("main".into(), 1, Value::Null, 0);
        assert!(job.media_mut().is_some());
        assert!(matches!(job.stage, Stage::Gathered(_)));
        job.stage = Stage::Answered(Checkpoint {
            parts: Vec::new(),
            sent: 0,
            reply_to: None,
            session_turn: None,
            taint: None,
            books: None,
        });
        assert!(job.media_mut().is_none());
        assert!(job.checkpoint().is_some(), "the answer is left as it was");
    }
}
