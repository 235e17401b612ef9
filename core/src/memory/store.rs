//! `MemoryStore`: Markdown memory files of one scope (agent + connector) through the Files
//! port, indexed into the Vectors and TextIndex ports, searched by hybrid score.
//!
//! Files live under `memory/<agent>/<connector>/`: `MEMORY.md` (long-term, curated) and
//! `memory/YYYY-MM-DD.md` (daily notes). They are the memory; the index is only a search layer
//! and can always be rebuilt from them. A per-file manifest in Kv (`memidx/<scope>/<path>`)
//! holds the content hash and chunk ids, so only changed files are re-indexed.

use std::collections::BTreeMap;
use std::sync::Arc;

use clawless_platform::{
    ErrorKind, Files, Kv, KvExt, PortError, TextDoc, TextIndex, VectorRecord, Vectors,
};
use serde::{Deserialize, Serialize};

use super::chunk::chunk;
use super::embed::EmbeddingProvider;

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
        None
    }
}

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
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    hash: u64,
    embedder: String,
    ids: Vec<String>,
}

pub struct MemoryStore {
    pub files: Arc<dyn Files>,
    pub kv: Arc<dyn Kv>,
    pub vectors: Arc<dyn Vectors>,
    pub text: Arc<dyn TextIndex>,
    pub embedder: Arc<dyn EmbeddingProvider>,
    pub config: SearchConfig,
}

/// FNV-1a over the file's bytes: the "changed?" check.
fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The directory of a scope's memory files.
pub fn root(scope: &str) -> String {
    format!("memory/{scope}")
}

impl MemoryStore {
    fn manifest_key(scope: &str, path: &str) -> String {
        format!("memidx/{scope}/{path}")
    }

    /// Re-indexes `path` (root-relative) if its content changed; a missing file is removed
    /// from the index. Returns whether anything was (re)indexed.
    pub async fn index_file(&self, scope: &str, path: &str) -> Result<bool, MemoryError> {
        let key = Self::manifest_key(scope, path);
        let old: Manifest = self.kv.get_json(&key).await?.unwrap_or_default();
        let bytes = match self.files.read(path).await {
            Ok(b) => Some(b),
            Err(e) if e.kind == ErrorKind::NotFound => None,
            Err(e) => return Err(e.into()),
        };
        let h = bytes.as_deref().map(hash).unwrap_or(0);
        if bytes.is_some() && old.hash == h && old.embedder == self.embedder.id() {
            return Ok(false);
        }
        if !old.ids.is_empty() {
            self.vectors.delete(&old.ids).await?;
            self.text.delete(&old.ids).await?;
        }
        let Some(bytes) = bytes else {
            self.kv.delete(&key).await?;
            return Ok(true);
        };
        let content = String::from_utf8_lossy(&bytes);
        let chunks = chunk(
            &content,
            self.config.chunk_tokens,
            self.config.chunk_overlap,
        );
        let texts: Vec<String> = chunks
            .iter()
            .map(|c| match &c.heading {
                Some(h) if !c.text.starts_with('#') => format!("{h}\n{}", c.text),
                _ => c.text.clone(),
            })
            .collect();
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            self.embedder.embed(&texts).await?
        };
        let mut ids = Vec::with_capacity(chunks.len());
        let mut records = Vec::with_capacity(chunks.len());
        let mut docs = Vec::with_capacity(chunks.len());
        for (i, (c, v)) in chunks.iter().zip(vectors).enumerate() {
            let id = format!("{scope}#{path}#{i}");
            let metadata = BTreeMap::from([
                ("scope".to_owned(), scope.to_owned()),
                ("path".to_owned(), path.to_owned()),
                (
                    "lines".to_owned(),
                    format!("{}-{}", c.start_line, c.end_line),
                ),
                ("text".to_owned(), c.text.clone()),
            ]);
            records.push(VectorRecord {
                id: id.clone(),
                vector: v,
                metadata: metadata.clone(),
            });
            docs.push(TextDoc {
                id: id.clone(),
                text: texts[i].clone(),
                metadata,
            });
            ids.push(id);
        }
        if !records.is_empty() {
            self.vectors.upsert(records).await?;
            self.text.upsert(docs).await?;
        }
        self.kv
            .put_json(
                &key,
                &Manifest {
                    hash: h,
                    embedder: self.embedder.id(),
                    ids,
                },
                None,
            )
            .await?;
        Ok(true)
    }

    /// Re-indexes every changed file of the scope and drops the index of deleted ones.
    /// Returns how many files were (re)indexed.
    /// Appends `text` (a line break added) to the memory file `rel` of `scope` and indexes it.
    pub async fn append(&self, scope: &str, rel: &str, text: &str) -> Result<(), MemoryError> {
        let path = format!("{}/{rel}", root(scope));
        self.files
            .append(&path, format!("{}\n", text.trim_end()).as_bytes())
            .await?;
        self.index_file(scope, &path).await?;
        Ok(())
    }

    /// Reads the memory file `rel` of `scope`; `None` when it does not exist.
    pub async fn read(&self, scope: &str, rel: &str) -> Result<Option<String>, MemoryError> {
        match self.files.read(&format!("{}/{rel}", root(scope))).await {
            Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn reindex(&self, scope: &str) -> Result<usize, MemoryError> {
        let mut changed = 0;
        let files = self.files.list(&root(scope)).await?;
        for path in &files {
            if path.ends_with(".md") && self.index_file(scope, path).await? {
                changed += 1;
            }
        }
        let prefix = format!("memidx/{scope}/");
        for key in self.kv.list(&prefix, 100_000).await? {
            let path = &key[prefix.len()..];
            if !files.iter().any(|f| f == path) && self.index_file(scope, path).await? {
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Hybrid search in one scope: vector similarity and BM25 keyword scores (normalised to
    /// the best keyword hit), weighted, at least `min_score`, best first.
    pub async fn search(&self, scope: &str, query: &str) -> Result<Vec<MemoryHit>, MemoryError> {
        let c = &self.config;
        // Saturating: found with the config fuzz target, `max_results * candidate_multiplier`
        // overflowed for huge settings.
        let k = c.max_results.saturating_mul(c.candidate_multiplier.max(1));
        let filter = BTreeMap::from([("scope".to_owned(), scope.to_owned())]);
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
        let mut hits: Vec<MemoryHit> = merged
            .into_values()
            .filter(|(score, _)| *score >= c.min_score)
            .map(|(score, m)| {
                let (start, end) = m
                    .get("lines")
                    .and_then(|l| l.split_once('-'))
                    .map_or((0, 0), |(a, b)| {
                        (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
                    });
                MemoryHit {
                    path: m.get("path").cloned().unwrap_or_default(),
                    start_line: start,
                    end_line: end,
                    text: m.get("text").cloned().unwrap_or_default(),
                    score,
                }
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.path.cmp(&b.path))
        });
        hits.truncate(c.max_results);
        Ok(hits)
    }
}

#[cfg(test)]
mod tests;
