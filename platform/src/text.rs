//! TextIndex port: keyword search with BM25 over documents with metadata. The keyword half of
//! memory's hybrid search: FTS5 on native, an inverted index in each serverless store.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::vectors::matches;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextDoc {
    pub id: String,
    pub text: String,
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextHit {
    pub id: String,
    /// BM25 relevance, higher is better, always > 0.
    pub score: f32,
    pub metadata: BTreeMap<String, String>,
}

#[async_trait]
pub trait TextIndex: Send + Sync {
    /// Indexes documents, replacing any with the same id.
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<()>;

    /// The `top_k` documents most relevant to `query` whose metadata contains every pair of
    /// `filter`.
    ///
    /// # Behavior
    /// The query is plain words: any punctuation or search syntax in it is treated as text,
    /// never an error. A document matches when it holds any query term ([`terms`]); more
    /// occurrences and rarer terms rank higher (BM25). No match answers empty; hits come best
    /// first, ties by id.
    async fn search(
        &self,
        query: &str,
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<TextHit>>;

    /// Removes documents by id.
    ///
    /// # Behavior
    /// Missing ids are ignored.
    async fn delete(&self, ids: &[String]) -> Result<()>;

    /// The indexed text of each of `ids`, by id: the index is where a document's text is
    /// kept (memory stores a chunk's text here only, not in its vector's metadata).
    ///
    /// # Behavior
    /// Ids not indexed are left out of the answer, never an error.
    async fn texts(&self, ids: &[String]) -> Result<HashMap<String, String>>;
}

/// The index terms of a text: lower-cased runs of letters and digits (as FTS5's `unicode61`
/// tokenizer splits them).
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The distinct terms of a query, sorted.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut q = terms(query);
    q.sort();
    q.dedup();
    q
}

/// The FTS5 `MATCH` expression for a plain-words query, for adapters over SQLite's FTS5:
/// each [`query_terms`] term quoted (so no word is syntax), joined by OR; `None` when the query
/// has no terms.
pub fn fts5_query(query: &str) -> Option<String> {
    let terms = query_terms(query);
    (!terms.is_empty()).then(|| {
        terms
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

/// SQL shared by the TextIndex adapters over SQLite's FTS5 (libsql on native, D1 on the
/// Worker), so both keep one layout and one set of statements.
///
/// A document is a row of `text_docs` (its id, indexed, and its metadata) and the row of the
/// FTS5 table `text_body` with the same rowid. Replacing or deleting documents by id finds
/// their rows through the id's index; an FTS5 column can only be scanned, and the first
/// layout (`text_fts`, the id an `UNINDEXED` column) read every row for every id it deleted.
/// Batches travel as one JSON parameter ([`fts5_sql::upsert_params`],
/// [`fts5_sql::ids_params`]), so a statement handles many documents and binds one value.
pub mod fts5_sql {
    use super::TextDoc;
    use crate::error::{PortError, Result};

    /// Creates the tables (`IF NOT EXISTS`).
    pub const SCHEMA: [&str; 2] = [
        "CREATE TABLE IF NOT EXISTS text_docs (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, metadata TEXT NOT NULL)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS text_body USING fts5(body, tokenize = 'unicode61')",
    ];

    /// Inserts or replaces the documents of one [`upsert_params`] parameter (`?1`), in this
    /// order.
    pub const UPSERT: [&str; 3] = [
        "DELETE FROM text_body WHERE rowid IN (SELECT rid FROM text_docs WHERE id IN (SELECT json_extract(value, '$[0]') FROM json_each(?1)))",
        "INSERT INTO text_docs (id, metadata) SELECT json_extract(value, '$[0]'), json_extract(value, '$[2]') FROM json_each(?1) WHERE true ON CONFLICT(id) DO UPDATE SET metadata = excluded.metadata",
        "INSERT INTO text_body (rowid, body) SELECT d.rid, json_extract(j.value, '$[1]') FROM json_each(?1) AS j JOIN text_docs AS d ON d.id = json_extract(j.value, '$[0]')",
    ];

    /// Deletes the documents of one [`ids_params`] parameter (`?1`); missing ids change
    /// nothing.
    pub const DELETE: [&str; 2] = [
        "DELETE FROM text_body WHERE rowid IN (SELECT rid FROM text_docs WHERE id IN (SELECT value FROM json_each(?1)))",
        "DELETE FROM text_docs WHERE id IN (SELECT value FROM json_each(?1))",
    ];

    /// `(id, body)` of the documents of one [`ids_params`] parameter (`?1`) that exist.
    pub const TEXTS: &str = "SELECT d.id, b.body FROM text_docs AS d JOIN text_body AS b ON b.rowid = d.rid WHERE d.id IN (SELECT value FROM json_each(?1))";

    /// `(id, metadata, bm25)` of the documents matching the [`super::fts5_query`] `?1`;
    /// `bm25()` is negative, lower is better.
    pub const SEARCH: &str = "SELECT d.id, d.metadata, bm25(text_body) FROM text_body JOIN text_docs AS d ON d.rid = text_body.rowid WHERE text_body MATCH ?1";

    /// The table of the first layout (`fts5(id UNINDEXED, body, metadata UNINDEXED)`).
    pub const LEGACY_TABLE: &str = "text_fts";

    /// Moves the documents of [`LEGACY_TABLE`] into this layout and drops it, in one
    /// transaction; documents already in this layout are kept. Fails to prepare when the
    /// legacy table does not exist.
    pub const MIGRATE_LEGACY: [&str; 3] = [
        "INSERT OR IGNORE INTO text_docs (id, metadata) SELECT id, metadata FROM text_fts",
        "INSERT INTO text_body (rowid, body) SELECT d.rid, f.body FROM text_fts AS f JOIN text_docs AS d ON d.id = f.id WHERE NOT EXISTS (SELECT 1 FROM text_body AS b WHERE b.rowid = d.rid) GROUP BY d.rid",
        "DROP TABLE text_fts",
    ];

    /// Documents per [`UPSERT`] parameter: a few hundred KB of JSON at most for memory
    /// chunks, well under D1's 1 MB limit on a value.
    pub const UPSERT_GROUP: usize = 64;
    /// Ids per [`DELETE`] parameter.
    pub const DELETE_GROUP: usize = 512;

    /// The [`UPSERT`] parameters for `docs`, [`UPSERT_GROUP`] documents each: JSON arrays of
    /// `[id, body, metadata JSON]`. When an id comes twice, the last document wins.
    pub fn upsert_params(docs: &[TextDoc]) -> Result<Vec<String>> {
        let mut last = std::collections::HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            last.insert(d.id.as_str(), i);
        }
        let rows = docs
            .iter()
            .enumerate()
            .filter(|(i, d)| last.get(d.id.as_str()) == Some(i))
            .map(|(_, d)| {
                let meta = serde_json::to_string(&d.metadata)
                    .map_err(|e| PortError::invalid(e.to_string()))?;
                Ok(serde_json::json!([d.id, d.text, meta]))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(rows
            .chunks(UPSERT_GROUP)
            .map(|group| serde_json::Value::from(group.to_vec()).to_string())
            .collect())
    }

    /// The [`DELETE`] and [`TEXTS`] parameters for `ids`, [`DELETE_GROUP`] ids each: JSON arrays of strings.
    pub fn ids_params(ids: &[String]) -> Vec<String> {
        ids.chunks(DELETE_GROUP)
            .map(|group| serde_json::Value::from(group.to_vec()).to_string())
            .collect()
    }
}

/// BM25 parameters.
pub const K1: f32 = 1.2;
pub const B: f32 = 0.75;

/// The BM25 weight of one term in one document.
pub fn bm25(tf: f32, df: f32, docs: f32, len: f32, avg_len: f32) -> f32 {
    let idf = ((docs - df + 0.5) / (df + 0.5) + 1.0).ln();
    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
}

/// Sorts hits best first, ties by id, and keeps `top_k`.
pub fn rank_text(mut hits: Vec<TextHit>, top_k: usize) -> Vec<TextHit> {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    hits.truncate(top_k);
    hits
}

struct Indexed {
    text: String,
    tf: HashMap<String, u32>,
    len: u32,
    metadata: BTreeMap<String, String>,
}

/// In-memory BM25 [`TextIndex`].
#[derive(Default)]
pub struct MemoryText {
    docs: Mutex<BTreeMap<String, Indexed>>,
}

#[async_trait]
impl TextIndex for MemoryText {
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<()> {
        let mut map = self.docs.lock().unwrap_or_else(|e| e.into_inner());
        for d in docs {
            let ts = terms(&d.text);
            let mut tf = HashMap::new();
            for t in &ts {
                *tf.entry(t.clone()).or_insert(0) += 1;
            }
            map.insert(
                d.id,
                Indexed {
                    text: d.text,
                    tf,
                    len: ts.len() as u32,
                    metadata: d.metadata,
                },
            );
        }
        Ok(())
    }

    async fn search(
        &self,
        query: &str,
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<TextHit>> {
        let map = self.docs.lock().unwrap_or_else(|e| e.into_inner());
        let q = query_terms(query);
        let n = map.len() as f32;
        let avg = map.values().map(|d| d.len as f32).sum::<f32>() / n.max(1.0);
        let df: HashMap<&str, f32> = q
            .iter()
            .map(|t| {
                (
                    t.as_str(),
                    map.values().filter(|d| d.tf.contains_key(t)).count() as f32,
                )
            })
            .collect();
        let hits = map
            .iter()
            .filter(|(_, d)| matches(&d.metadata, filter))
            .filter_map(|(id, d)| {
                let score: f32 = q
                    .iter()
                    .filter_map(|t| {
                        d.tf.get(t)
                            .map(|tf| bm25(*tf as f32, df[t.as_str()], n, d.len as f32, avg))
                    })
                    .sum();
                (score > 0.0).then(|| TextHit {
                    id: id.clone(),
                    score,
                    metadata: d.metadata.clone(),
                })
            })
            .collect();
        Ok(rank_text(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<()> {
        let mut map = self.docs.lock().unwrap_or_else(|e| e.into_inner());
        for id in ids {
            map.remove(id);
        }
        Ok(())
    }

    async fn texts(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        let map = self.docs.lock().unwrap_or_else(|e| e.into_inner());
        Ok(ids
            .iter()
            .filter_map(|id| Some((id.clone(), map.get(id)?.text.clone())))
            .collect())
    }
}

/// Conformance suite for [`TextIndex`] adapters; `index` must start empty.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod conformance {
    use super::*;

    fn doc(id: &str, text: &str, scope: &str) -> TextDoc {
        TextDoc {
            id: id.into(),
            text: text.into(),
            metadata: BTreeMap::from([("scope".into(), scope.into())]),
        }
    }

    fn ids(hits: &[TextHit]) -> Vec<&str> {
        hits.iter().map(|h| h.id.as_str()).collect()
    }

    pub async fn run(index: &dyn TextIndex) {
        let none = BTreeMap::new();
        assert!(
            index.search("anything", 5, &none).await.unwrap().is_empty(),
            "empty index answers empty"
        );
        index
            .upsert(vec![
                doc("cat", "My cat Miso is grey. Miso likes tuna.", "a"),
                doc("dog", "The neighbour's dog barks at night.", "a"),
                doc(
                    "tax",
                    "Tax filing is due in April; the accountant is Jo.",
                    "b",
                ),
                doc(
                    "miso-soup",
                    "Miso soup recipe: dashi, tofu, miso paste.",
                    "b",
                ),
                doc("filler1", "Notes about the weather and the garden.", "a"),
                doc("filler2", "Shopping list: bread, milk, eggs.", "a"),
            ])
            .await
            .unwrap();
        let texts = index
            .texts(&["cat".into(), "missing".into(), "dog".into()])
            .await
            .unwrap();
        assert_eq!(
            texts,
            HashMap::from([
                (
                    "cat".to_owned(),
                    "My cat Miso is grey. Miso likes tuna.".to_owned()
                ),
                (
                    "dog".to_owned(),
                    "The neighbour's dog barks at night.".to_owned()
                ),
            ]),
            "texts answers each indexed id's text, leaves the missing one out"
        );
        assert!(index.texts(&[]).await.unwrap().is_empty());
        assert_eq!(
            index
                .texts(&["dog".into(), "dog".into()])
                .await
                .unwrap()
                .len(),
            1,
            "an id named twice is answered once"
        );
        let hits = index.search("Miso", 5, &none).await.unwrap();
        assert_eq!(ids(&hits).len(), 2, "only documents holding the term match");
        assert!(hits.iter().all(|h| h.score > 0.0), "scores are positive");
        assert!(hits[0].score >= hits[1].score, "best first");
        let hits = index
            .search("when is the tax filing due", 5, &none)
            .await
            .unwrap();
        assert_eq!(ids(&hits)[0], "tax", "more matching terms rank higher");
        let filter = BTreeMap::from([("scope".to_string(), "a".to_string())]);
        let hits = index.search("miso", 5, &filter).await.unwrap();
        assert_eq!(ids(&hits), ["cat"], "filter applies");
        assert_eq!(
            hits[0].metadata.get("scope").map(String::as_str),
            Some("a"),
            "metadata returned"
        );
        for weird in [
            "\"miso",
            "miso AND",
            "NOT -tuna*",
            "(tuna) OR:",
            "",
            "  ",
            "😀 ???",
        ] {
            index
                .search(weird, 5, &none)
                .await
                .unwrap_or_else(|e| panic!("{weird:?} must not be an error: {e}"));
        }
        assert_eq!(
            ids(&index.search("tuna*", 5, &none).await.unwrap()),
            ["cat"],
            "syntax characters are text"
        );
        assert_eq!(
            index.search("MISO", 1, &none).await.unwrap().len(),
            1,
            "case-insensitive, top_k kept"
        );

        index
            .upsert(vec![doc("cat", "My cat is now called Pepper.", "a")])
            .await
            .unwrap();
        assert_eq!(
            ids(&index.search("miso", 5, &none).await.unwrap()),
            ["miso-soup"],
            "upsert replaces"
        );
        assert_eq!(
            ids(&index.search("pepper", 5, &none).await.unwrap()),
            ["cat"]
        );
        assert_eq!(
            index
                .texts(&["cat".into()])
                .await
                .unwrap()
                .get("cat")
                .map(String::as_str),
            Some("My cat is now called Pepper."),
            "upsert replaces the text"
        );
        index
            .delete(&["miso-soup".into(), "missing".into()])
            .await
            .unwrap();
        assert!(
            index.search("miso", 5, &none).await.unwrap().is_empty(),
            "delete removes"
        );
        assert!(
            index.texts(&["miso-soup".into()]).await.unwrap().is_empty(),
            "delete removes the text"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::fts5_query;
    #[test]
    fn fts5_queries_quote_every_term() {
        assert_eq!(
            fts5_query("cat AND \"dog*\" OR cat").as_deref(),
            Some("\"and\" OR \"cat\" OR \"dog\" OR \"or\"")
        );
        assert_eq!(fts5_query("?! --"), None);
    }

    #[test]
    fn memory_text_conforms() {
        futures::executor::block_on(super::conformance::run(&super::MemoryText::default()));
    }
}
