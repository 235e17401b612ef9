//! Incremental indexing of one memory file: the manifest, and which chunks to embed or delete.
//!
//! A file's manifest (Kv `memidx/<scope>/<path>`) holds the hash of the whole file, the
//! embedder that indexed it, and the key of each of its chunks in the index: a hash of the
//! chunk's heading, text and line range. The chunk's id in Vectors and TextIndex is
//! `<scope>#<path>#<key>`. Re-indexing a changed file chunks it again and compares keys: only
//! new chunks are embedded and upserted, vanished ones deleted, the rest left alone. An append
//! changes the last chunk or two; an edit also re-indexes the chunks below it, whose line
//! numbers moved. Another embedder re-embeds every chunk.
//!
//! A run that is cut short (the tool's time budget, a crash, a killed invocation) must not
//! leave chunks in the index that no manifest names. So before touching the index a run
//! records everything it may add or remove as `pending`, with hash 0 (the file then counts as
//! changed): the next run re-adds what the file still has and deletes the rest. Manifests of
//! earlier versions list whole chunk ids (`ids`); those are deleted at the file's next change.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::chunk::Chunk;
use crate::ids::Scope;

/// Where manifests live in Kv.
pub(crate) const MANIFEST_PREFIX: &str = crate::keys::MEMORY_MANIFESTS;

/// Chunks embedded (and written to the index) per step; steps are separated by a yield.
pub(crate) const EMBED_BATCH: usize = 64;
/// Chunks cut from the file between two yields.
pub(crate) const CHUNK_BATCH: usize = 256;
/// Ids deleted per call to the index.
pub(crate) const DELETE_BATCH: usize = 512;

pub(crate) fn manifest_key(scope: &Scope, path: &str) -> String {
    crate::keys::memory_manifest(scope, path)
}

/// The id of the chunk `key` of `path` in the index.
pub(crate) fn chunk_id(scope: &Scope, path: &str, key: &str) -> String {
    format!("{scope}#{path}#{key}")
}

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// The hash of the whole file when it was last indexed in full; 0 while a run is under way.
    pub hash: u64,
    pub embedder: String,
    /// Keys of the chunks in the index, in file order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<String>,
    /// Keys a run may have added or not yet removed: in the index or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// Whole ids, from manifests written before chunk keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
}

impl Manifest {
    /// Whether the file was fully indexed by `embedder` when its hash was `hash`.
    pub fn is_current(&self, hash: u64, embedder: &str) -> bool {
        self.hash == hash && self.embedder == embedder && self.pending.is_empty()
    }

    /// Every id this manifest says may be in the index.
    pub fn all_ids(&self, scope: &Scope, path: &str) -> Vec<String> {
        self.chunks
            .iter()
            .chain(&self.pending)
            .map(|k| chunk_id(scope, path, k))
            .chain(self.ids.iter().cloned())
            .collect()
    }
}

/// A chunk with its key.
pub(crate) struct Keyed {
    pub key: String,
    pub chunk: Chunk,
}

/// FNV-1a: stable across platforms and releases.
pub(crate) fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Keys chunks one at a time: a hash of heading, text and line range; a repeat within the
/// file gets `-<n>` appended, so keys are unique within the file.
#[derive(Default)]
pub(crate) struct Keyer {
    seen: HashSet<String>,
}

impl Keyer {
    pub fn key(&mut self, chunk: Chunk) -> Keyed {
        let described = format!(
            "{}\u{0}{}\u{0}{}-{}",
            chunk.heading.as_deref().unwrap_or(""),
            chunk.text,
            chunk.start_line,
            chunk.end_line
        );
        let base = format!("{:016x}", fnv(described.as_bytes()));
        let mut key = base.clone();
        let mut n = 1;
        while !self.seen.insert(key.clone()) {
            n += 1;
            key = format!("{base}-{n}");
        }
        Keyed { key, chunk }
    }
}

/// All of `chunks`, keyed by one [`Keyer`].
#[cfg(test)]
pub(crate) fn keyed(chunks: Vec<Chunk>) -> Vec<Keyed> {
    let mut keyer = Keyer::default();
    chunks.into_iter().map(|c| keyer.key(c)).collect()
}

/// What a run does to the index.
#[derive(Debug, PartialEq)]
pub(crate) struct Plan {
    /// Positions (in the new chunks) to embed and upsert.
    pub add: Vec<usize>,
    /// Ids to delete.
    pub remove: Vec<String>,
    /// The manifest to write before touching the index.
    pub intent: Manifest,
}

/// Compares the chunks of the file now with what `old` says is in the index. With another
/// embedder than `old`'s, every chunk is added again (same ids: the upsert replaces them).
pub(crate) fn plan(
    old: &Manifest,
    new: &[Keyed],
    embedder: &str,
    scope: &Scope,
    path: &str,
) -> Plan {
    let indexed: HashSet<&str> = if old.embedder == embedder {
        old.chunks.iter().map(String::as_str).collect()
    } else {
        HashSet::new()
    };
    let new_keys: HashSet<&str> = new.iter().map(|k| k.key.as_str()).collect();
    let mut kept = Vec::new();
    let mut add = Vec::new();
    for (i, k) in new.iter().enumerate() {
        if indexed.contains(k.key.as_str()) {
            kept.push(k.key.clone());
        } else {
            add.push(i);
        }
    }
    let gone: Vec<String> = old
        .chunks
        .iter()
        .chain(&old.pending)
        .filter(|k| !new_keys.contains(k.as_str()))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let remove = gone
        .iter()
        .map(|k| chunk_id(scope, path, k))
        .chain(old.ids.iter().cloned())
        .collect();
    let intent = Manifest {
        hash: 0,
        embedder: embedder.to_owned(),
        chunks: kept,
        pending: add
            .iter()
            .map(|&i| new[i].key.clone())
            .chain(gone)
            .collect(),
        ids: old.ids.clone(),
    };
    Plan {
        add,
        remove,
        intent,
    }
}

/// The part of `content` that is indexed: all of it up to `max_bytes`, else up to the last
/// line break within `max_bytes` (or the last character boundary, for a file of one line).
pub(crate) fn within_cap(content: &str, max_bytes: usize) -> &str {
    if content.len() <= max_bytes {
        return content;
    }
    let mut end = max_bytes;
    while !content.is_char_boundary(end) {
        end -= 1;
    }
    match content[..end].rfind('\n') {
        Some(nl) => &content[..=nl],
        None => &content[..end],
    }
}

pub(crate) use crate::task::yield_now;

#[cfg(test)]
mod tests;
