//! Skills: instructions for particular tasks, in the AgentSkills format (a folder holding
//! `SKILL.md`: YAML frontmatter with `name` and `description`, then Markdown), so skills
//! written for Claude or OpenClaw work unchanged where what they need is there.
//!
//! Where they come from, a later one winning over an earlier one of the same name:
//! 1. [`Source::Config`]: `config/skills/<name>/`, part of the config (embedded into the Worker
//!    and the Lambda at build time), read once when the app is built.
//! 2. [`Source::Deployment`]: `skills/<name>/` on the Files port, for every agent and every
//!    conversation: added at run time by whoever runs the bot (on native,
//!    `$CLAWLESS_DATA/files/skills/`).
//! 3. [`Source::Workspace`]: `skills/<name>/` in the conversation's own workspace
//!    (`workspace/<scope>/skills/`, where the file tools write): seen only in that
//!    conversation, as everything in a workspace is.
//!
//! Cost per turn: one Files `list` per folder of the two on the port; a SKILL.md is read when
//! it is new or was read over [`REFRESH_MS`] ago, so a new skill shows on the next turn and an
//! edited one within a minute. At most [`MAX_SKILLS`] folders of each source, [`MAX_SKILL_BYTES`]
//! of SKILL.md; a skill that cannot be read is kept with the reason and is never offered.
//!
//! The agent's view ([`Offer`], in `offer.rs`) decides which skills are offered: those whose
//! requirements are met, listed by name and description in the system prompt; the `skill`
//! tool reads one's body when the model needs it.

pub mod frontmatter;
mod offer;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use clawless_platform::{Clock, Files};

pub use frontmatter::{valid_name, Meta, Requires};
pub use offer::{Offer, Status, SKILL_TOOL};

/// Most skill folders read from one source.
pub const MAX_SKILLS: usize = 64;
/// Largest SKILL.md read.
pub const MAX_SKILL_BYTES: usize = 32 * 1024;
/// Most other files of a skill shown to the model.
pub const MAX_FILES_SHOWN: usize = 32;
/// Largest other file of a skill the `skill` tool reads.
pub const MAX_FILE_BYTES: usize = 256 * 1024;
/// How long a SKILL.md read from the Files port is trusted before it is read again.
pub const REFRESH_MS: u64 = 60_000;
/// Most SKILL.md files remembered (over every conversation).
const MAX_CACHED: usize = 1024;
/// The deployment's skills on the Files port.
pub const DEPLOYMENT_DIR: &str = "skills";
/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// Where a skill comes from (later ones win on a name both have).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Config,
    Deployment,
    Workspace,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::Config => "config",
            Source::Deployment => "deployment",
            Source::Workspace => "workspace",
        }
    }
}

/// One skill folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The folder's name, which is the skill's name.
    pub name: String,
    pub source: Source,
    /// The folder: under `skills/` of the config, or on the Files port.
    pub dir: String,
    /// Its SKILL.md read, or why it could not be.
    pub meta: Result<Meta, String>,
    /// Its other files, relative to the folder (at most [`MAX_FILES_SHOWN`]).
    pub files: Vec<String>,
}

/// Every skill the app knows of: the config's, read once, and the Files port's, read as
/// conversations ask for them.
pub struct Catalog {
    config: Vec<Entry>,
    /// The config's files under `skills/`, by path below it.
    config_files: BTreeMap<String, String>,
    files: Arc<dyn Files>,
    clock: Arc<dyn Clock>,
    /// Settings that are set (names only).
    env: BTreeSet<String>,
    cache: Mutex<Cache>,
}

/// SKILL.md path on the port → (when it was read, what it said).
type Cache = BTreeMap<String, (u64, Result<Meta, String>)>;

impl Catalog {
    /// `config_files`: the config's files under `skills/`, by path below it; `env`: the names
    /// of the settings that are set.
    pub fn new(
        config_files: BTreeMap<String, String>,
        files: Arc<dyn Files>,
        clock: Arc<dyn Clock>,
        env: BTreeSet<String>,
    ) -> Catalog {
        let folders = folders(config_files.keys().map(String::as_str));
        let config = folders
            .into_iter()
            .map(|(name, others)| {
                let path = format!("{name}/{SKILL_FILE}");
                let meta = match config_files.get(&path) {
                    Some(text) => read_meta(&name, text.as_bytes()),
                    None => Err(format!("the folder has no {SKILL_FILE}")),
                };
                Entry {
                    dir: name.clone(),
                    name,
                    source: Source::Config,
                    meta,
                    files: others,
                }
            })
            .collect();
        Catalog {
            config,
            config_files,
            files,
            clock,
            env,
            cache: Mutex::new(BTreeMap::new()),
        }
    }

    /// Whether the setting `name` is set.
    pub fn env_is_set(&self, name: &str) -> bool {
        self.env.contains(name)
    }

    /// Every skill a conversation sees, by name: the config's, the deployment's, then those of
    /// its workspace folder `workspace` (when given). A folder the port cannot list is left
    /// out (and logged): a turn never fails for a skill.
    pub async fn entries(&self, workspace: Option<&str>) -> BTreeMap<String, Entry> {
        let mut out: BTreeMap<String, Entry> = self
            .config
            .iter()
            .map(|e| (e.name.clone(), e.clone()))
            .collect();
        let port = [(DEPLOYMENT_DIR, Source::Deployment)]
            .into_iter()
            .chain(workspace.map(|w| (w, Source::Workspace)));
        for (dir, source) in port {
            for entry in self.on_port(dir, source).await {
                out.insert(entry.name.clone(), entry);
            }
        }
        out
    }

    /// The skill folders under `dir` on the Files port.
    async fn on_port(&self, dir: &str, source: Source) -> Vec<Entry> {
        let listed = match self.files.list(dir).await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(dir, error = %e, "could not list skills");
                return Vec::new();
            }
        };
        let prefix = format!("{dir}/");
        let below = listed.iter().filter_map(|p| p.strip_prefix(&prefix));
        let mut out = Vec::new();
        for (name, others) in folders(below) {
            let folder = format!("{dir}/{name}");
            let meta = self
                .port_meta(&name, &format!("{folder}/{SKILL_FILE}"))
                .await;
            out.push(Entry {
                name,
                source,
                dir: folder,
                meta,
                files: others,
            });
        }
        out
    }

    /// A SKILL.md on the port, from the cache while it is fresh. A file missing or unreadable
    /// now is not remembered, so it is tried again next time.
    async fn port_meta(&self, name: &str, path: &str) -> Result<Meta, String> {
        let now = self.clock.now_ms();
        if let Some((at, meta)) = self.cache().get(path) {
            if now.saturating_sub(*at) < REFRESH_MS {
                return meta.clone();
            }
        }
        let bytes = match self.files.read(path).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind == clawless_platform::ErrorKind::NotFound => {
                return Err(format!("the folder has no {SKILL_FILE}"))
            }
            Err(e) => return Err(format!("{SKILL_FILE} could not be read: {e}")),
        };
        let meta = read_meta(name, &bytes);
        let mut cache = self.cache();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (at, _)| now.saturating_sub(*at) < REFRESH_MS);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(path.to_owned(), (now, meta.clone()));
        meta
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A skill's body (SKILL.md after its frontmatter), or one of its other files.
    pub async fn read(&self, entry: &Entry, file: Option<&str>) -> Result<String, String> {
        let name = file.unwrap_or(SKILL_FILE);
        let bytes = match entry.source {
            Source::Config => self
                .config_files
                .get(&format!("{}/{name}", entry.dir))
                .map(|t| t.as_bytes().to_vec())
                .ok_or_else(|| format!("{name} is not in skill {}", entry.name))?,
            _ => self
                .files
                .read(&format!("{}/{name}", entry.dir))
                .await
                .map_err(|e| format!("{name} of skill {} could not be read: {e}", entry.name))?,
        };
        if file.is_some() {
            if bytes.len() > MAX_FILE_BYTES {
                return Err(format!(
                    "{name} is {} KB, over the {} KB a skill's file may be",
                    bytes.len() / 1024,
                    MAX_FILE_BYTES / 1024
                ));
            }
            return String::from_utf8(bytes)
                .map_err(|_| format!("{name} is not text (UTF-8); it cannot be shown"));
        }
        let text = checked_text(&bytes)?;
        let (_, body) = frontmatter::parse(text)?;
        Ok(body.trim_end().to_owned())
    }
}

/// SKILL.md's bytes as text, within [`MAX_SKILL_BYTES`].
fn checked_text(bytes: &[u8]) -> Result<&str, String> {
    if bytes.len() > MAX_SKILL_BYTES {
        return Err(format!(
            "{SKILL_FILE} is {} KB, over {} KB",
            bytes.len().div_ceil(1024),
            MAX_SKILL_BYTES / 1024
        ));
    }
    std::str::from_utf8(bytes).map_err(|_| format!("{SKILL_FILE} is not UTF-8 text"))
}

/// The [`Meta`] of the skill in folder `name`, whose SKILL.md is `bytes`.
fn read_meta(name: &str, bytes: &[u8]) -> Result<Meta, String> {
    let (meta, _) = frontmatter::parse(checked_text(bytes)?)?;
    if meta.name != name {
        return Err(format!(
            "its name {:?} is not its folder's ({name:?})",
            meta.name
        ));
    }
    Ok(meta)
}

/// Paths below a skills folder grouped by skill folder: folder → its files other than
/// SKILL.md (at most [`MAX_FILES_SHOWN`]). Files directly in the skills folder are no
/// skill's; at most [`MAX_SKILLS`] folders, the first by name.
fn folders<'a>(paths: impl Iterator<Item = &'a str>) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in paths {
        let Some((folder, rest)) = path.split_once('/') else {
            continue;
        };
        if !out.contains_key(folder) && out.len() >= MAX_SKILLS {
            continue;
        }
        let files = out.entry(folder.to_owned()).or_default();
        if rest != SKILL_FILE && files.len() < MAX_FILES_SHOWN {
            files.push(rest.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests;
