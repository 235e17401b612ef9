//! Export and import: everything a person built with the assistant, in one archive that any
//! shell reads ([`Admin::export`](crate::app::Admin::export), [`Admin::import`](crate::app::Admin::import)).
//!
//! An archive is a gzip-compressed tar (see [`pack`]):
//! - `manifest.json`, first: [`Manifest`], the format version, the shell it came from, when,
//!   whose data (the whole bot or one person), counts, and the SHA-256 of every other entry;
//! - `kv.jsonl`: the Kv entries of [`keys::EXPORTED`], one JSON object a line (`k`, the value as
//!   text `v` or base64 `b64`, the expiry instant `exp` in ms);
//! - `files/<path>`: the Files port's files as they are (memory notes, workspaces, skills).
//!
//! What an export leaves out is rebuilt by the target: the memory index (re-indexed with the
//! target's embedder), the bot's identity and menu. Reminders are merged by who they are
//! ([`crate::schedule`] says how): the tombstones of fired one-offs travel with them, so no
//! import fires one again, and a reminder whose id is taken in the target is renumbered.
//! Reading refuses, before writing anything, an archive that is damaged, cut short, newer,
//! over [`Limits`], holds a name that would escape (`..`, absolute, links) or a key no export
//! carries.

mod export;
mod import;
pub mod openclaw;
pub mod pack;
pub mod parts;
mod reminders;
#[cfg(feature = "testing")]
pub mod sample;
mod select;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use clawless_platform::{KvEntry, PortError};
use serde::{Deserialize, Serialize};

pub use import::{admissible, ImportReport, Merge};
pub use pack::{pack, unpack, Limits};
pub use parts::{cursor_query, reindex_parts, split, Joined, PART_BYTES, PART_ITEMS};
pub use reminders::ReminderReport;
pub use select::Whom;

use crate::keys;

/// The archive format this build writes and reads up to. 2: it may hold the tombstones of
/// fired one-off reminders (`sched-fired/`), which a build reading only 1 would refuse as a key
/// no export carries; a format-1 archive is read as it always was (it has none).
pub const FORMAT: u32 = 2;

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The archive format ([`FORMAT`]).
    pub format: u32,
    /// The shell that wrote it: `native`, `worker` or `lambda`.
    pub source: String,
    /// The release that wrote it.
    pub by: String,
    /// When, in ms since the epoch by the writer's clock.
    pub created_at_ms: u64,
    /// The store layout of the keys inside ([`crate::upgrade::CURRENT`] of the writer).
    pub store_version: u32,
    /// Whose data: `bot`, or `person <connector> <user id>`.
    pub whom: String,
    /// Lines of `kv.jsonl`.
    pub kv_entries: usize,
    /// Files under `files/`.
    pub files: usize,
    /// The SHA-256 (hex) of every entry but the manifest, by name.
    pub sha256: BTreeMap<String, String>,
    /// Files the export could not carry, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// In a part of an export ([`parts`]): the cursor of the next part, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// In a part of an import: the memory files to index, instead of those it holds (the index
    /// is built after the last part, a few files a request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reindex: Option<Vec<String>>,
}

/// What an archive holds: Kv entries in key order, files by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    pub kv: Vec<KvEntry>,
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Why an archive could not be written or read. Reading fails before anything is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArchiveError {
    #[error("the archive is damaged or not a clawless archive: {0}")]
    Damaged(String),
    #[error("the archive is refused: {0} is larger than allowed")]
    TooBig(String),
    #[error("the archive is refused: the entry {0} could escape or is not a file it may hold")]
    BadName(String),
    #[error("the archive is refused: {0} does not match its checksum in the manifest")]
    Checksum(String),
    #[error("the archive is format {0}; this build reads up to format {FORMAT}. Import it with a newer clawless")]
    TooNew(u32),
    #[error("the archive's store is version {0}; this build knows up to {up}. Import it with a newer clawless", up = crate::upgrade::CURRENT)]
    StoreTooNew(u32),
    #[error("the archive is refused: it holds the key {0}, which no export carries")]
    Foreign(String),
    #[error("writing the archive: {0}")]
    Write(String),
    #[error("storage: {0}")]
    Storage(#[from] PortError),
}

/// Whether an export may carry `key` (one of [`keys::EXPORTED`]).
pub fn carried(key: &str) -> bool {
    keys::EXPORTED.iter().any(|p| key.starts_with(p))
}
