//! Coming over from OpenClaw: what its agent workspace (`~/.openclaw/workspace`) holds, mapped
//! onto this assistant. [`plan`] reads the workspace's files (given by the shell, which reads
//! the directory) and [`App::import_openclaw`] writes the plan:
//!
//! | OpenClaw | here |
//! |---|---|
//! | `MEMORY.md` (or `memory.md`) | the owner's `MEMORY.md` |
//! | `memory/<note>.md` (daily notes and others) | the owner's `memory/<note>.md` |
//! | `skills/<name>/…` with a `SKILL.md` | the deployment's skills, `skills/<name>/…` |
//! | `SOUL.md`, `IDENTITY.md`, `AGENTS.md`, `USER.md`, `TOOLS.md` | an agent's persona (the shell writes it) |
//!
//! Everything else (`HEARTBEAT.md`, `BOOTSTRAP.md`, workflows, canvas, deeper folders, files
//! that are not UTF-8) is listed in [`Plan::unmapped`] with why, never dropped silently. A file
//! already here is kept; a memory file that differs gets the imported text appended once.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ArchiveError;
use crate::app::App;
use crate::ids::ConnectorId;
use crate::memory::scope::scope;

/// The persona files, in the order their text is joined.
pub const PERSONA: [&str; 5] = ["IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md"];

/// What an OpenClaw workspace becomes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Memory files, by their path in the owner's scope (`MEMORY.md`, `memory/<note>.md`).
    pub memory: BTreeMap<String, String>,
    /// Skill files, by their path under `skills/`.
    pub skills: BTreeMap<String, Vec<u8>>,
    /// The persona files' text joined, each under its name, for an agent's system prompt.
    pub persona: Option<String>,
    /// The persona files found.
    pub persona_from: Vec<String>,
    /// What was not mapped, each with why.
    pub unmapped: Vec<String>,
}

/// Maps the workspace's files (by path relative to it) onto this assistant.
pub fn plan(files: &BTreeMap<String, Vec<u8>>) -> Plan {
    let mut plan = Plan::default();
    let skill_dirs: Vec<String> = files
        .keys()
        .filter_map(|p| p.strip_prefix("skills/")?.strip_suffix("/SKILL.md"))
        .filter(|name| !name.contains('/'))
        .map(|name| format!("skills/{name}/"))
        .collect();
    let mut persona = BTreeMap::new();
    for (path, bytes) in files {
        let text = std::str::from_utf8(bytes).ok();
        let valid = clawless_platform::files::normalize(path).is_ok_and(|p| p == *path);
        if !valid {
            plan.unmapped
                .push(format!("{path}: a name this assistant cannot store"));
            continue;
        }
        if skill_dirs.iter().any(|d| path.starts_with(d.as_str())) {
            plan.skills.insert(
                path.strip_prefix("skills/").unwrap_or(path).to_owned(),
                bytes.clone(),
            );
            continue;
        }
        let why = match (path.as_str(), text) {
            (_, None) if path.ends_with(".md") => "not UTF-8 text",
            ("MEMORY.md" | "memory.md", Some(text)) => {
                let at = "MEMORY.md".to_owned();
                // MEMORY.md wins over the older lower-case name when both are there.
                if path == "MEMORY.md" || !plan.memory.contains_key(&at) {
                    plan.memory.insert(at, text.to_owned());
                }
                continue;
            }
            (p, Some(text)) if PERSONA.contains(&p) => {
                persona.insert(p.to_owned(), text.to_owned());
                continue;
            }
            ("HEARTBEAT.md", _) => "periodic checks: set reminders or scheduled tasks instead",
            ("BOOTSTRAP.md", _) => "a first-run ritual, not needed here",
            (p, Some(text)) if is_note(p) => {
                plan.memory.insert(p.to_owned(), text.to_owned());
                continue;
            }
            (p, _) if p.starts_with("skills/") => "not inside a skill folder with a SKILL.md",
            (p, _) if p.starts_with("memory/") => "memory here is MEMORY.md and memory/*.md",
            _ => "no place for it here",
        };
        plan.unmapped.push(format!("{path}: {why}"));
    }
    for name in PERSONA {
        if let Some(text) = persona.remove(name) {
            let joined = plan.persona.get_or_insert_with(String::new);
            if !joined.is_empty() {
                joined.push_str("\n\n");
            }
            joined.push_str(&format!("<!-- from OpenClaw's {name} -->\n{}", text.trim()));
            plan.persona_from.push(name.to_owned());
        }
    }
    plan
}

/// `memory/<note>.md`, one level deep.
fn is_note(path: &str) -> bool {
    path.strip_prefix("memory/")
        .is_some_and(|n| !n.contains('/') && n.ends_with(".md") && n.len() > 3)
}

/// What [`App::import_openclaw`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Written {
    /// Memory files written new, appended to, and already holding the text.
    pub notes_added: usize,
    pub notes_appended: usize,
    pub notes_same: usize,
    /// Skill files written, and already there.
    pub skill_files_added: usize,
    pub skill_files_kept: usize,
    /// Memory files indexed.
    pub reindexed: usize,
}

impl App {
    /// Writes `plan`'s memory into the owner's memory of `connector` (for `agent`, the
    /// connector's default agent when `None`) and its skills onto the Files port; the persona
    /// is the shell's to write. Running it again writes nothing.
    pub async fn import_openclaw(
        &self,
        plan: &Plan,
        connector: &ConnectorId,
    ) -> Result<Written, ArchiveError> {
        let conn = self.connectors.get(connector).ok_or_else(|| {
            ArchiveError::Write(format!("no connector {connector} in the config"))
        })?;
        let owner = conn.default_memory_owner().ok_or_else(|| {
            ArchiveError::Write(format!(
                "connector {connector} has no owner: set its owner (or shared_memory) so the notes have someone to belong to"
            ))
        })?;
        let agent = &conn.default_agent().config.id;
        let scope = scope(agent, connector, owner);
        let root = crate::memory::store::root(&scope);
        let files = &*self.platform.files;
        let mut done = Written::default();
        for (rel, text) in &plan.memory {
            let path = format!("{root}/{rel}");
            let held = match files.read(&path).await {
                Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                Err(e) if e.kind == clawless_platform::ErrorKind::NotFound => None,
                Err(e) => return Err(e.into()),
            };
            match held {
                None => {
                    files.write(&path, text.as_bytes()).await?;
                    done.notes_added += 1;
                }
                Some(held) if held.contains(text.trim()) => done.notes_same += 1,
                Some(held) => {
                    let joined = format!("{}\n\n## From OpenClaw\n\n{}\n", held.trim_end(), text);
                    files.write(&path, joined.as_bytes()).await?;
                    done.notes_appended += 1;
                }
            }
        }
        for (rel, bytes) in &plan.skills {
            let path = format!("skills/{rel}");
            match files.read(&path).await {
                Ok(_) => done.skill_files_kept += 1,
                Err(e) if e.kind == clawless_platform::ErrorKind::NotFound => {
                    files.write(&path, bytes).await?;
                    done.skill_files_added += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
        done.reindexed = self
            .memory
            .reindex(&scope)
            .await
            .map_err(|e| ArchiveError::Write(format!("indexing the notes: {e}")))?;
        Ok(done)
    }
}
