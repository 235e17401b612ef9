//! [`Admin::import`]: an archive merged into this store. Every check runs before the first
//! write; then each Kv entry and file is written only where the store has nothing (or, asked
//! to, something different), with the rest of its TTL, so importing twice changes nothing the
//! second time and a crash midway is finished by importing again. Reminders are merged by
//! who they are, not by key ([`super::reminders`]): the same one is kept, one that fired is
//! not brought back, one whose id is taken here is renumbered; asking to replace does not
//! change that.

use std::collections::BTreeSet;
use std::time::Duration;

use clawless_platform::{ErrorKind, KvEntry};
use serde::Serialize;

use super::reminders::{Merging, ReminderReport, Took};
use super::{carried, unpack, ArchiveError, Contents, Limits, Manifest};
use crate::app::Admin;
use crate::ids::{ConnectorId, Scope};
use crate::keys;

/// What to do where the store already holds something different under the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Keep the store's own (the default: an import never overwrites newer data).
    KeepOurs,
    /// Replace it with the archive's.
    Replace,
}

/// What an import did. (Read from a deployment's answer too: a field it does not send is 0.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ImportReport {
    /// Kv entries written where there was none, the same already, different and kept, replaced,
    /// expired since the export, and refused (not written). A reminder counts as one entry and
    /// its due entry as another: added when written, the same when the reminder was here
    /// already (even further along), replaced when moved to the archive's later time, refused
    /// when it fired already or is not taken (see `reminders`).
    pub added: usize,
    pub same: usize,
    pub kept: usize,
    pub replaced: usize,
    pub expired: usize,
    pub refused: usize,
    /// What became of the reminders.
    pub reminders: ReminderReport,
    /// The same for files.
    pub files_added: usize,
    pub files_same: usize,
    pub files_kept: usize,
    pub files_replaced: usize,
    /// Memory files indexed again by this store's embedder.
    pub reindexed: usize,
    /// Scopes whose memory could not be indexed now (each with why); their files are written
    /// and are indexed when memory is next reindexed.
    pub not_indexed: Vec<String>,
    /// The scopes of a connector's memory from before it was per person (a version-1
    /// archive) that no owner here takes yet: moved to the owner's memory once one is set.
    pub unplaced: Vec<String>,
}

impl ImportReport {
    /// Adds what the import of another part did.
    pub fn add(&mut self, part: ImportReport) {
        self.added += part.added;
        self.same += part.same;
        self.kept += part.kept;
        self.replaced += part.replaced;
        self.expired += part.expired;
        self.refused += part.refused;
        self.reminders.add(part.reminders);
        self.files_added += part.files_added;
        self.files_same += part.files_same;
        self.files_kept += part.files_kept;
        self.files_replaced += part.files_replaced;
        self.reindexed += part.reindexed;
        self.not_indexed.extend(part.not_indexed);
        for scope in part.unplaced {
            if !self.unplaced.contains(&scope) {
                self.unplaced.push(scope);
            }
        }
    }

    /// Whether the import wrote (or deleted) anything.
    pub fn changed(&self) -> bool {
        self.added
            + self.replaced
            + self.reminders.removed
            + self.files_added
            + self.files_replaced
            + self.reindexed
            > 0
    }
}

impl std::fmt::Display for ImportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "entries: {} added, {} already there, {} kept (the store's differ), {} replaced, {} expired, {} refused; files: {} added, {} already there, {} kept, {} replaced; {} memory files indexed",
            self.added,
            self.same,
            self.kept,
            self.replaced,
            self.expired,
            self.refused,
            self.files_added,
            self.files_same,
            self.files_kept,
            self.files_replaced,
            self.reindexed
        )?;
        let r = &self.reminders;
        write!(
            f,
            "; reminders: {} added, {} already there, {} renumbered (their id was another's here), {} fired already (not brought back), {} deleted here (fired where the archive was made), {} refused",
            r.added, r.kept, r.renumbered, r.fired, r.removed, r.refused
        )?;
        for why in &r.why {
            write!(f, "; reminder refused: {why}")?;
        }
        if r.why.len() < r.refused {
            write!(f, "; and {} more refused", r.refused - r.why.len())?;
        }
        for why in &self.not_indexed {
            write!(f, "; not indexed yet: {why}")?;
        }
        for scope in &self.unplaced {
            write!(f, "; memory of {scope} from before it was per person: its connector has no owner here (or is not configured); it moves to the owner's memory once one is set")?;
        }
        Ok(())
    }
}

/// The memory scope a memory file belongs to (`memory/<scope>/MEMORY.md` or
/// `memory/<scope>/memory/<note>.md`).
pub(super) fn memory_scope(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("memory/")?;
    if let Some(scope) = rest.strip_suffix("/MEMORY.md") {
        return Some(scope);
    }
    let (scope, note) = rest.rsplit_once("/memory/")?;
    (!note.contains('/') && note.ends_with(".md")).then_some(scope)
}

/// A memory file of a connector's memory from before it was per person
/// (`memory/<agent>/<connector>/MEMORY.md` or `…/memory/<note>.md`): agent, connector, and
/// the path below the scope.
fn shared_memory(path: &str) -> Option<(&str, &str, &str)> {
    let scope = memory_scope(path)?;
    let (agent, connector) = scope.split_once('/')?;
    let rel = path.get("memory/".len() + scope.len() + 1..)?;
    (!connector.contains('/') && crate::memory::scope::is_legacy_file(rel))
        .then_some((agent, connector, rel))
}

/// Whether `path` names a memory file of some scope, its segments none empty or a dot name.
fn is_memory_file(path: &str) -> bool {
    path.len() <= 1024
        && !path.chars().any(char::is_control)
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
        && memory_scope(path).is_some()
}

/// Whether this build imports what an archive holds: not when its store is newer than this
/// build's, it holds a key no export carries, or it asks to index more than a part's worth of
/// files or a name that is not a memory file's. Checked before anything is written (and by
/// `clawless import --remote` before the first part is sent).
pub fn admissible(manifest: &Manifest, contents: &Contents) -> Result<(), ArchiveError> {
    if manifest.store_version > crate::upgrade::CURRENT {
        return Err(ArchiveError::StoreTooNew(manifest.store_version));
    }
    if let Some(e) = contents.kv.iter().find(|e| !carried(&e.key)) {
        return Err(ArchiveError::Foreign(e.key.chars().take(120).collect()));
    }
    let asked = manifest.reindex.as_deref().unwrap_or_default();
    if asked.len() > super::PART_ITEMS {
        return Err(ArchiveError::TooBig(format!(
            "a part asking to index {} files (at most {})",
            asked.len(),
            super::PART_ITEMS
        )));
    }
    if let Some(bad) = asked.iter().find(|p| !is_memory_file(p)) {
        return Err(ArchiveError::BadName(format!("reindex {bad:.80}")));
    }
    Ok(())
}

impl Admin<'_> {
    /// Checks the archive whole, then merges it into this store (see [`super`]).
    pub async fn import(
        self,
        archive: &[u8],
        limits: &Limits,
        merge: Merge,
    ) -> Result<ImportReport, ArchiveError> {
        let (manifest, contents) = unpack(archive, limits)?;
        self.import_contents(&manifest, contents, merge).await
    }

    /// Merges what an archive holds; refuses it, untouched, when its store is newer than this
    /// build or it holds a key no export carries.
    pub async fn import_contents(
        self,
        manifest: &Manifest,
        contents: Contents,
        merge: Merge,
    ) -> Result<ImportReport, ArchiveError> {
        admissible(manifest, &contents)?;
        let mut report = ImportReport::default();
        let mut records = Vec::new();
        let mut tombstones = Vec::new();
        for entry in contents.kv {
            // The due index is rebuilt from the reminders below: an archive of a live store
            // may hold a due entry a moment older than its reminder.
            if entry.key.starts_with(keys::DUE) {
                continue;
            }
            if entry.key.starts_with(keys::REMINDERS) {
                records.push(entry);
                continue;
            }
            let key = entry.key.clone();
            let now = self.import_entry(entry, merge, &mut report).await?;
            if now.is_some() && key.starts_with(keys::FIRED) {
                tombstones.push(key);
            }
        }
        // The tombstones (and the id counters) are in before the first reminder is looked at.
        let mut merging = Merging::new(self.app.schedules());
        for key in &tombstones {
            merging.fired_elsewhere(key).await?;
        }
        for entry in &records {
            match merging.record(entry).await? {
                Took::Written => report.added += 2,
                Took::Moved => {
                    report.replaced += 1;
                    report.added += 1;
                }
                Took::Kept { due_added } => {
                    report.same += 1;
                    match due_added {
                        true => report.added += 1,
                        false => report.same += 1,
                    }
                }
                Took::Not => report.refused += 1,
            }
        }
        merging.finish().await?;
        report.reminders.add(merging.report);
        let files = &*self.app.platform.files;
        let mut scopes = BTreeSet::new();
        for (path, bytes) in &contents.files {
            let placed = self
                .place(manifest.store_version, path, &mut report)
                .await?;
            let (path, bytes) = (&placed, bytes);
            if let Some(scope) = memory_scope(path) {
                scopes.insert(scope.to_owned());
            }
            let held = match files.read(path).await {
                Ok(held) => Some(held),
                Err(e) if e.kind == ErrorKind::NotFound => None,
                Err(e) => return Err(e.into()),
            };
            match held {
                None => {
                    files.write(path, bytes).await?;
                    report.files_added += 1;
                }
                Some(held) if held == *bytes => report.files_same += 1,
                Some(_) if merge == Merge::Replace => {
                    files.write(path, bytes).await?;
                    report.files_replaced += 1;
                }
                Some(_) => report.files_kept += 1,
            }
        }
        // An older store's keys are brought up as an older store would be.
        for version in manifest.store_version.max(1)..crate::upgrade::CURRENT {
            self.app.upgrade_step(version).await.map_err(|e| match e {
                crate::upgrade::UpgradeError::Storage(p) => ArchiveError::Storage(p),
                other => ArchiveError::Damaged(other.to_string()),
            })?;
        }
        // A part of an import sent in parts names the memory files to index instead (once,
        // after the last part).
        if let Some(asked) = &manifest.reindex {
            scopes.clear();
            for path in asked {
                let path = &self
                    .place(manifest.store_version, path, &mut report)
                    .await?;
                let scope = Scope::new(memory_scope(path).unwrap_or_default());
                match self.app.memory.index_file(&scope, path).await {
                    Ok(changed) => report.reindexed += usize::from(changed),
                    Err(e) => report.not_indexed.push(format!("{path}: {e}")),
                }
            }
        }
        for scope in scopes {
            match self.app.memory.reindex(&Scope::new(&scope)).await {
                Ok(n) => report.reindexed += n,
                Err(e) => report.not_indexed.push(format!("{scope}: {e}")),
            }
        }
        Ok(report)
    }

    /// Where `path` of an archive of store `version` goes in this store's layout: a memory
    /// file a connector shared before version 2 (`memory/<agent>/<connector>/…`) goes to its
    /// owner's memory here, as the store's own step ([`crate::upgrade`]) moves it. That step
    /// ran when this store was brought up, and its marker says so: files written under the
    /// old scope now would never be read. A connector without an owner here keeps the file
    /// where it was and loses its marker, so memory's next re-index moves it once an owner
    /// is set (said in the report).
    async fn place(
        self,
        version: u32,
        path: &str,
        report: &mut ImportReport,
    ) -> Result<String, ArchiveError> {
        let Some((agent, connector, rel)) = (version < 2).then(|| shared_memory(path)).flatten()
        else {
            return Ok(path.to_owned());
        };
        let connector = ConnectorId::new(connector);
        let owner = (self.app.connectors.get(&connector)).and_then(|c| c.default_memory_owner());
        let Some(owner) = owner else {
            let legacy = crate::memory::scope::legacy_scope(agent, &connector);
            let marker = keys::memory_scopes_moved(&legacy);
            self.app.platform.kv.delete(&marker).await?;
            if !report.unplaced.iter().any(|s| *s == legacy.as_str()) {
                report.unplaced.push(legacy.as_str().to_owned());
            }
            return Ok(path.to_owned());
        };
        let scope = crate::memory::scope::scope(agent, &connector, owner);
        Ok(format!("{}/{rel}", crate::memory::store::root(&scope)))
    }

    /// Writes `entry` where the store holds nothing under its key (or, asked to, something
    /// else); what the store holds under it now (`None`: nothing, the entry having expired).
    async fn import_entry(
        self,
        entry: KvEntry,
        merge: Merge,
        report: &mut ImportReport,
    ) -> Result<Option<Vec<u8>>, ArchiveError> {
        let kv = &*self.app.platform.kv;
        let now = self.app.platform.clock.now_ms();
        let ttl = match entry.expires_at_ms {
            Some(at) if at <= now => {
                report.expired += 1;
                return Ok(None);
            }
            Some(at) => Some(Duration::from_millis(at - now)),
            None => None,
        };
        let held = kv.get(&entry.key).await?;
        let write = match held.as_deref() {
            None => {
                report.added += 1;
                true
            }
            Some(held) if held == entry.value.as_slice() => {
                report.same += 1;
                false
            }
            // The reminder id counter: the larger, so no id is given out twice.
            Some(held) if entry.key.starts_with(keys::REMINDER_IDS) => {
                let n = |b: &[u8]| -> u64 {
                    std::str::from_utf8(b)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0)
                };
                let larger = n(&entry.value) > n(held);
                if larger {
                    report.replaced += 1;
                } else {
                    report.kept += 1;
                }
                larger
            }
            Some(_) if merge == Merge::Replace => {
                report.replaced += 1;
                true
            }
            Some(_) => {
                report.kept += 1;
                false
            }
        };
        if write {
            kv.put(&entry.key, &entry.value, ttl).await?;
            return Ok(Some(entry.value));
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::memory_scope;

    #[test]
    fn memory_files_name_their_scope() {
        assert_eq!(
            memory_scope("memory/assistant/main/u1/MEMORY.md"),
            Some("assistant/main/u1")
        );
        assert_eq!(
            memory_scope("memory/assistant/main/u1/memory/2026-11-27.md"),
            Some("assistant/main/u1")
        );
        assert_eq!(memory_scope("memory/assistant/main/u1/notes.txt"), None);
        assert_eq!(memory_scope("workspace/assistant/main/u1/MEMORY.md"), None);
    }
}
