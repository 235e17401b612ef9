//! `MemoryStore`: Markdown memory files of one scope (agent + connector) through the Files
//! port, indexed into the Vectors and TextIndex ports, searched by hybrid score.
//!
//! Files live under `memory/<scope>/`: `MEMORY.md` (long-term, curated) and
//! `memory/YYYY-MM-DD.md` (daily notes). They are the memory; the index is only a search layer
//! and can always be rebuilt from them. A per-file manifest in Kv (`memidx/<scope>/<path>`,
//! see `super::index`) holds the file's hash and its chunks' keys, so only changed files are
//! re-indexed, and of those only the changed chunks. Files are capped at `max_file_kb`:
//! writes past it are refused ([`MemoryError::TooLarge`]), and of a file edited past it by
//! hand only the first `max_file_kb` are indexed (with a warning naming the file).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use clawless_platform::{
    ErrorKind, Files, Kv, KvExt, PortError, TextDoc, TextIndex, VectorRecord, Vectors,
};
use serde::{Deserialize, Serialize};

use super::chunk;
use super::embed::EmbeddingProvider;
use super::index::{
    chunk_id, fnv, manifest_key, plan, within_cap, yield_now, Keyed, Keyer, Manifest, CHUNK_BATCH,
    DELETE_BATCH, EMBED_BATCH, MANIFEST_PREFIX,
};
use crate::ids::Scope;
use hit::{chunk_text, path_of, PATH, TEXT_FROM};

/// Hybrid search settings, `memory:` in `main.yaml` (the defaults are the design's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    pub max_results: usize,
    pub min_score: f32,
    pub candidate_multiplier: usize,
    pub vector_weight: f32,
    pub text_weight: f32,
    pub chunk_tokens: usize,
    pub chunk_overlap: usize,
    /// `local` (built in, no key) or `openai` (`/v1/embeddings` at `OPENAI_BASE_URL` with
    /// `OPENAI_API_KEY`). The Worker uses Workers AI instead when an `AI` binding is bound.
    pub embedder: String,
    /// The model for `embedder: openai` (asked for 384 dimensions).
    pub embedding_model: String,
    /// The largest a memory file may grow, in KB (1024 bytes): `memory_write` refuses to write
    /// past it, and of a file edited past it by hand only the first `max_file_kb` are indexed.
    pub max_file_kb: usize,
}

impl SearchConfig {
    /// The first setting out of range, as `(field, why)`.
    pub fn invalid(&self) -> Option<(&'static str, &'static str)> {
        let weights_ok = |w: f32| w.is_finite() && w >= 0.0;
        if self.max_results == 0 {
            return Some(("max_results", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&self.min_score) {
            return Some(("min_score", "must be between 0 and 1"));
        }
        if self.candidate_multiplier == 0 {
            return Some(("candidate_multiplier", "must be at least 1"));
        }
        if !weights_ok(self.vector_weight) || !weights_ok(self.text_weight) {
            return Some(("vector_weight", "weights must be 0 or more"));
        }
        if self.vector_weight + self.text_weight <= 0.0 {
            return Some((
                "vector_weight",
                "vector_weight + text_weight must be above 0",
            ));
        }
        if self.chunk_tokens < 50 {
            return Some(("chunk_tokens", "must be at least 50"));
        }
        if self.chunk_overlap >= self.chunk_tokens {
            return Some(("chunk_overlap", "must be less than chunk_tokens"));
        }
        if !matches!(self.embedder.as_str(), "local" | "openai") {
            return Some(("embedder", "must be local or openai"));
        }
        if !(1..=MAX_FILE_KB_LIMIT).contains(&self.max_file_kb) {
            return Some(("max_file_kb", "must be between 1 and 1048576 (1 GB)"));
        }
        None
    }

    /// [`SearchConfig::max_file_kb`] in bytes.
    pub fn max_file_bytes(&self) -> usize {
        self.max_file_kb.saturating_mul(1024)
    }
}

/// The highest `max_file_kb` accepted.
const MAX_FILE_KB_LIMIT: usize = 1 << 20;

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            max_results: 6,
            min_score: 0.35,
            candidate_multiplier: 4,
            vector_weight: 0.7,
            text_weight: 0.3,
            chunk_tokens: 400,
            chunk_overlap: 80,
            embedder: "local".into(),
            embedding_model: "text-embedding-3-small".into(),
            max_file_kb: 1024,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
    pub score: f32,
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("storage: {0}")]
    Port(#[from] PortError),
    #[error("{0}")]
    Embed(#[from] super::embed::EmbedError),
    /// A write that would take a memory file past `memory.max_file_kb`.
    #[error("{path} is {size} bytes; with this write it would be {after} bytes, over the limit of {limit} bytes (memory.max_file_kb)")]
    TooLarge {
        path: String,
        size: usize,
        after: usize,
        limit: usize,
    },
}

pub struct MemoryStore {
    pub files: Arc<dyn Files>,
    pub kv: Arc<dyn Kv>,
    pub vectors: Arc<dyn Vectors>,
    pub text: Arc<dyn TextIndex>,
    pub embedder: Arc<dyn EmbeddingProvider>,
    pub config: SearchConfig,
}

/// The directory of a scope's memory files.
pub fn root(scope: &Scope) -> String {
    format!("memory/{scope}")
}

/// Forgets what was indexed (every manifest, of every scope), so the next
/// [`MemoryStore::reindex`] indexes every file again: for a shell whose index was lost or
/// started over. Returns how many manifests there were.
pub async fn forget_index(kv: &dyn Kv) -> Result<usize, PortError> {
    let keys = kv.list(MANIFEST_PREFIX, usize::MAX).await?;
    for key in &keys {
        kv.delete(key).await?;
    }
    Ok(keys.len())
}

impl MemoryStore {
    /// Re-indexes `path` (root-relative) if its content changed, touching only the chunks that
    /// changed (see `super::index`); a missing file is removed from the index. Returns whether
    /// the index or the manifest changed.
    ///
    /// Long runs yield to the executor while chunking and between batches of embeddings, so a
    /// big file does not hold an executor thread for long. Dropping the future midway
    /// (a time budget) is safe: the next run finishes the work.
    pub async fn index_file(&self, scope: &Scope, path: &str) -> Result<bool, MemoryError> {
        let key = manifest_key(scope, path);
        let old: Manifest = self.kv.get_json(&key).await?.unwrap_or_default();
        let bytes = match self.files.read(path).await {
            Ok(b) => b,
            Err(e) if e.kind == ErrorKind::NotFound => {
                if old == Manifest::default() {
                    return Ok(false);
                }
                self.delete_ids(&old.all_ids(scope, path)).await?;
                self.kv.delete(&key).await?;
                return Ok(true);
            }
            Err(e) => return Err(e.into()),
        };
        let hash = fnv(&bytes);
        let embedder = self.embedder.id();
        if old.is_current(hash, &embedder) {
            return Ok(false);
        }
        let content = String::from_utf8_lossy(&bytes);
        let limit = self.config.max_file_bytes();
        if content.len() > limit {
            tracing::warn!(
                path,
                size_kb = content.len() / 1024,
                max_file_kb = self.config.max_file_kb,
                "memory file is over memory.max_file_kb: only its first max_file_kb are indexed; shorten or split it"
            );
        }
        let mut keyer = Keyer::default();
        let mut chunks = Vec::new();
        let cut = chunk::chunks(
            within_cap(&content, limit),
            self.config.chunk_tokens,
            self.config.chunk_overlap,
        );
        for c in cut {
            chunks.push(keyer.key(c));
            if chunks.len() % CHUNK_BATCH == 0 {
                yield_now().await;
            }
        }
        let plan = plan(&old, &chunks, &embedder, scope, path);
        if !plan.add.is_empty() || !plan.remove.is_empty() {
            self.kv.put_json(&key, &plan.intent, None).await?;
        }
        self.delete_ids(&plan.remove).await?;
        for (n, batch) in plan.add.chunks(EMBED_BATCH).enumerate() {
            if n > 0 {
                yield_now().await;
            }
            let batch: Vec<&Keyed> = batch.iter().map(|&i| &chunks[i]).collect();
            self.add_chunks(scope, path, &batch).await?;
        }
        let done = Manifest {
            hash,
            embedder,
            chunks: chunks.into_iter().map(|k| k.key).collect(),
            pending: Vec::new(),
            ids: Vec::new(),
        };
        self.kv.put_json(&key, &done, None).await?;
        Ok(true)
    }

    async fn delete_ids(&self, ids: &[String]) -> Result<(), MemoryError> {
        for batch in ids.chunks(DELETE_BATCH) {
            self.vectors.delete(batch).await?;
            self.text.delete(batch).await?;
        }
        Ok(())
    }

    /// Embeds `chunks` of `path` and writes them to both indexes.
    async fn add_chunks(
        &self,
        scope: &Scope,
        path: &str,
        chunks: &[&Keyed],
    ) -> Result<(), MemoryError> {
        let texts: Vec<String> = chunks
            .iter()
            .map(|k| match &k.chunk.heading {
                Some(h) if !k.chunk.text.starts_with('#') => format!("{h}\n{}", k.chunk.text),
                _ => k.chunk.text.clone(),
            })
            .collect();
        let vectors = self.embedder.embed(&texts).await?;
        if vectors.len() != texts.len() {
            return Err(super::embed::EmbedError(format!(
                "{} vectors for {} texts",
                vectors.len(),
                texts.len()
            ))
            .into());
        }
        let mut records = Vec::with_capacity(chunks.len());
        let mut docs = Vec::with_capacity(chunks.len());
        for ((k, vector), text) in chunks.iter().zip(vectors).zip(texts) {
            let id = chunk_id(scope, path, &k.key);
            let c = &k.chunk;
            // The chunk's text is kept once, as the keyword index's document; neither index's
            // metadata repeats it, nor its path (the id holds it: [`path_of`]). The document
            // may start with the chunk's heading: where the chunk's own text starts in it is in
            // the metadata ([`TEXT_FROM`]).
            let mut metadata = BTreeMap::from([
                ("scope".to_owned(), scope.to_string()),
                (
                    "lines".to_owned(),
                    format!("{}-{}", c.start_line, c.end_line),
                ),
            ]);
            let from = text.len().saturating_sub(c.text.len());
            if from > 0 {
                metadata.insert(TEXT_FROM.to_owned(), from.to_string());
            }
            records.push(VectorRecord {
                id: id.clone(),
                vector,
                metadata: metadata.clone(),
            });
            docs.push(TextDoc { id, text, metadata });
        }
        self.vectors.upsert(records).await?;
        self.text.upsert(docs).await?;
        Ok(())
    }

    /// The size in bytes of `path` (root-relative) after writing `extra` bytes to it (after
    /// appending, or replacing it when `replace`), or [`MemoryError::TooLarge`] when that is
    /// over `max_file_kb`.
    pub async fn check_room(
        &self,
        path: &str,
        extra: usize,
        replace: bool,
    ) -> Result<usize, MemoryError> {
        let size = match self.files.read(path).await {
            Ok(b) => b.len(),
            Err(e) if e.kind == ErrorKind::NotFound => 0,
            Err(e) => return Err(e.into()),
        };
        let after = if replace { extra } else { size + extra };
        let limit = self.config.max_file_bytes();
        if after > limit {
            return Err(MemoryError::TooLarge {
                path: path.to_owned(),
                size,
                after,
                limit,
            });
        }
        Ok(after)
    }

    /// Appends `text` (a line break added) to the memory file `rel` of `scope` and indexes it;
    /// [`MemoryError::TooLarge`] (nothing written) past `max_file_kb`.
    pub async fn append(&self, scope: &Scope, rel: &str, text: &str) -> Result<(), MemoryError> {
        let path = format!("{}/{rel}", root(scope));
        let line = format!("{}\n", text.trim_end());
        self.check_room(&path, line.len(), false).await?;
        self.files.append(&path, line.as_bytes()).await?;
        self.index_file(scope, &path).await?;
        Ok(())
    }

    /// Reads the memory file `rel` of `scope`; `None` when it does not exist.
    pub async fn read(&self, scope: &Scope, rel: &str) -> Result<Option<String>, MemoryError> {
        match self.files.read(&format!("{}/{rel}", root(scope))).await {
            Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Re-indexes every changed memory file of the scope (`MEMORY.md` and `memory/*.md`) and
    /// drops the index of deleted ones. Returns how many files were (re)indexed.
    ///
    /// Scopes are opaque and may nest (`<scope>/<more>` is another scope, its files in a
    /// directory under this one's): files deeper than `memory/` are not this scope's.
    pub async fn reindex(&self, scope: &Scope) -> Result<usize, MemoryError> {
        let dir = format!("{}/", root(scope));
        let ours = |path: &str| {
            path.strip_prefix(&dir).is_some_and(|rel| {
                let name = rel.strip_prefix("memory/").unwrap_or(rel);
                (rel == "MEMORY.md" || rel.starts_with("memory/"))
                    && name.ends_with(".md")
                    && !name.contains('/')
            })
        };
        let mut changed = 0;
        let files: Vec<String> = self
            .files
            .list(&root(scope))
            .await?
            .into_iter()
            .filter(|p| ours(p))
            .collect();
        for path in &files {
            if self.index_file(scope, path).await? {
                changed += 1;
            }
        }
        let prefix = manifest_key(scope, "");
        for key in self.kv.list(&prefix, 100_000).await? {
            let path = key.get(prefix.len()..).unwrap_or_default();
            // A nested scope's manifests share this prefix, for paths that are not ours.
            if !ours(path) {
                continue;
            }
            if !files.iter().any(|f| f == path) && self.index_file(scope, path).await? {
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Hybrid search in one scope: vector similarity and BM25 keyword scores (normalised to
    /// the best keyword hit), weighted, at least `min_score`, best first.
    pub async fn search(&self, scope: &Scope, query: &str) -> Result<Vec<MemoryHit>, MemoryError> {
        let c = &self.config;
        // Saturating: found with the config fuzz target, `max_results * candidate_multiplier`
        // overflowed for huge settings.
        let k = c.max_results.saturating_mul(c.candidate_multiplier.max(1));
        let filter = BTreeMap::from([("scope".to_owned(), scope.to_string())]);
        let qv = self
            .embedder
            .embed(&[query.to_owned()])
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        let vector_hits = match self.vectors.query(&qv, k, &filter).await {
            Ok(h) => h,
            Err(e) if e.kind == ErrorKind::Invalid => Vec::new(), // nothing indexed yet, or another dimension
            Err(e) => return Err(e.into()),
        };
        let text_hits = self.text.search(query, k, &filter).await?;
        let best_text = text_hits.iter().map(|h| h.score).fold(0f32, f32::max);
        let mut merged: BTreeMap<String, (f32, BTreeMap<String, String>)> = BTreeMap::new();
        for h in vector_hits {
            merged.entry(h.id).or_insert((0.0, h.metadata)).0 += c.vector_weight * h.score.max(0.0);
        }
        for h in text_hits {
            merged.entry(h.id).or_insert((0.0, h.metadata)).0 +=
                c.text_weight * (h.score / best_text.max(f32::MIN_POSITIVE));
        }
        // Chunks indexed before the path was left out of the metadata still carry it there.
        let mut kept: Vec<(String, f32, BTreeMap<String, String>)> = merged
            .into_iter()
            .filter(|(_, (score, _))| *score >= c.min_score)
            .map(|(id, (score, mut m))| {
                if !m.contains_key(PATH) {
                    m.insert(PATH.to_owned(), path_of(scope, &id).to_owned());
                }
                (id, score, m)
            })
            .collect();
        kept.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| a.2.get(PATH).cmp(&b.2.get(PATH)))
        });
        kept.truncate(c.max_results);
        // Chunks indexed before the text was kept once still carry it in their metadata.
        let missing: Vec<String> = kept
            .iter()
            .filter(|(_, _, m)| !m.contains_key("text"))
            .map(|(id, _, _)| id.clone())
            .collect();
        let mut texts = if missing.is_empty() {
            HashMap::new()
        } else {
            self.text.texts(&missing).await?
        };
        // A hit whose text is in neither place (a run cut short between the two indexes' writes,
        // repaired by the next re-index) is left out rather than answered empty.
        Ok(kept
            .into_iter()
            .filter_map(|(id, score, mut m)| {
                let (start, end) = m
                    .get("lines")
                    .and_then(|l| l.split_once('-'))
                    .map_or((0, 0), |(a, b)| {
                        (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
                    });
                let text = m
                    .remove("text")
                    .or_else(|| texts.remove(&id).map(|doc| chunk_text(doc, &m)))?;
                Some(MemoryHit {
                    path: m.remove(PATH).unwrap_or_default(),
                    start_line: start,
                    end_line: end,
                    text,
                    score,
                })
            })
            .collect())
    }
}

mod hit;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod text_tests;
