//! Coming over from OpenClaw: what its state directory (`~/.openclaw`) holds, mapped onto
//! this assistant. [`plan`] reads the files the shell read (by path below that directory)
//! and [`Admin::import_openclaw`](crate::app::Admin::import_openclaw) writes the plan:
//!
//! | OpenClaw | here |
//! |---|---|
//! | `workspace/MEMORY.md` (`memory.md` alone; joined to it when both are there) | the agent's `MEMORY.md`, the owner's memory |
//! | `workspace/memory/<note>.md` (daily notes and others) | the agent's `memory/<note>.md` |
//! | `workspace/skills/<name>/…`, `skills/<name>/…` with a `SKILL.md` | the deployment's skills (the workspace's first) |
//! | `workspace/SOUL.md`, `IDENTITY.md`, `AGENTS.md`, `USER.md`, `TOOLS.md` | an agent's persona (the shell writes it) |
//! | `openclaw.json` (see [`settings`]) | that agent's models, the owner's time zone; who was let in, said |
//! | `agents/<agent>/sessions/` (see [`sessions`]) | private chats' history, continuing with that agent |
//!
//! The notes go to the memory of the agent the shell names: the persona's own (`openclaw`)
//! when it made one, so the persona recalls them and the default agent's memory is as it
//! was; the default agent's when there is no persona. Everything else (`HEARTBEAT.md`,
//! `BOOTSTRAP.md`, canvas, deeper folders, files that are not UTF-8, what the shell did not
//! read) is listed in [`Plan::unmapped`] with why, never dropped silently. A file already here
//! is kept; a memory file that differs gets the imported text appended once.

mod json5;
pub mod sessions;
pub mod settings;
mod workspace;
mod write;

use std::collections::BTreeMap;

use serde::Serialize;

pub use sessions::{Chat, Conversation};
pub use settings::Settings;
pub use write::Written;

/// The persona files, in the order their text is joined.
pub const PERSONA: [&str; 5] = ["IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md"];

/// What OpenClaw's state directory becomes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    /// Memory files, by their path in a memory scope (`MEMORY.md`, `memory/<note>.md`).
    pub memory: BTreeMap<String, String>,
    /// Skill files, by their path under `skills/`.
    pub skills: BTreeMap<String, Vec<u8>>,
    /// The persona files' text joined, each under its name, for an agent's system prompt.
    pub persona: Option<String>,
    /// The persona files found.
    pub persona_from: Vec<String>,
    /// What `openclaw.json` says that maps.
    pub settings: Settings,
    /// Conversations to continue here.
    pub conversations: Vec<Conversation>,
    /// What was mapped in a way worth saying (`memory.md` joined to `MEMORY.md`).
    pub remarks: Vec<String>,
    /// What was not mapped, each with why.
    pub unmapped: Vec<String>,
}

/// Maps OpenClaw's files, by path below its state directory (`workspace/…`, `openclaw.json`,
/// `skills/…`, `agents/<agent>/sessions/…`), onto this assistant.
pub fn plan(files: &BTreeMap<String, Vec<u8>>) -> Plan {
    let mut plan = Plan::default();
    let (mut space, mut skills, mut agents) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for (path, bytes) in files {
        let bytes = bytes.as_slice();
        if let Some(rel) = path.strip_prefix("workspace/") {
            space.insert(rel, bytes);
        } else if let Some(rel) = path.strip_prefix("skills/") {
            skills.insert(rel, bytes);
        } else if path.starts_with("agents/") {
            agents.insert(path.as_str(), bytes);
        } else if path == "openclaw.json" {
            let (settings, unmapped) = settings::read(bytes);
            plan.settings = settings;
            plan.unmapped.extend(unmapped);
        } else {
            plan.unmapped.push(format!("{path}: no place for it here"));
        }
    }
    workspace::map(&space, &mut plan);
    workspace::map_managed(&skills, &mut plan);
    let (conversations, unmapped) = sessions::read(&agents, &plan.settings);
    plan.conversations = conversations;
    plan.unmapped.extend(unmapped);
    plan
}
