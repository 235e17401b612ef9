//! The memory index on libsql: the Vectors and TextIndex (FTS5) ports over `index.db`, a
//! database file of its own with its own [`Db`] thread, apart from the Kv's `clawless.db`:
//! indexing a large memory file never holds the thread or the write lock the webhook ack
//! needs. The index is only a search layer over the memory files; [`open`] starts it over
//! (empty, and the core's manifests forgotten) when the file is new.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use clawless_platform::text::{fts5_query, fts5_sql, rank_text};
use clawless_platform::vectors::{cosine, from_blob, matches, rank, to_blob, validate_vector};
use clawless_platform::{
    async_trait, Kv, PortError, TextDoc, TextHit, TextIndex, VectorHit, VectorRecord, Vectors,
};
use futures::executor::block_on;
use libsql::{params, Connection, Value};

use crate::store::{db_err, in_transaction, read_bytes, Db};
use crate::vecindex::{candidates, Mirror};

/// The index database's schema: the vectors table, then [`fts5_sql::SCHEMA`].
pub fn schema() -> Vec<&'static str> {
    let vectors = "CREATE TABLE IF NOT EXISTS vectors (id TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec F32_BLOB NOT NULL, metadata TEXT NOT NULL)";
    std::iter::once(vectors).chain(fts5_sql::SCHEMA).collect()
}

/// Opens an index database at `path` (`:memory:` for a private one) with no migration: tests
/// and benchmarks.
pub fn open_db(path: &str) -> Result<Db, PortError> {
    Db::open(path, &schema())
}

/// The index tables older versions kept in the Kv database.
const LEGACY_TABLES: [&str; 2] = ["vectors", fts5_sql::LEGACY_TABLE];

/// Opens the memory index at `path` beside the Kv database `kv_db` (whose Kv port is `kv`).
/// When the file does not exist yet (a new install, an install from before the index had a
/// file of its own, or an index deleted to rebuild it), first every manifest is forgotten, so
/// the next scheduled re-index indexes every memory file into it, and the index tables older
/// versions kept in the Kv database are dropped. In that order: a crash in between repeats
/// the work at the next start, and never leaves manifests claiming an index that is not there.
pub async fn open(path: &Path, kv_db: &Db, kv: &dyn Kv) -> Result<Db, PortError> {
    if !path.exists() {
        let forgotten = clawless_core::memory::store::forget_index(kv).await?;
        let dropped = drop_legacy_tables(kv_db).await?;
        tracing::info!(
            path = %path.display(),
            manifests = forgotten,
            legacy_tables = dropped,
            "new memory index: every memory file is indexed again"
        );
    }
    open_db(&path.to_string_lossy())
}

/// Drops the index tables older versions kept in the Kv database, and compacts the file if
/// there were any; returns how many were dropped.
pub async fn drop_legacy_tables(kv_db: &Db) -> Result<usize, PortError> {
    kv_db
        .call(|c| {
            block_on(async {
                let mut dropped = 0;
                for table in LEGACY_TABLES {
                    let mut rows = c
                        .query(
                            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                            params![table],
                        )
                        .await
                        .map_err(db_err)?;
                    if rows.next().await.map_err(db_err)?.is_some() {
                        drop(rows);
                        c.execute(&format!("DROP TABLE {table}"), ())
                            .await
                            .map_err(db_err)?;
                        dropped += 1;
                    }
                }
                if dropped > 0 {
                    c.execute("VACUUM", ()).await.map_err(db_err)?;
                }
                Ok(dropped)
            })
        })
        .await
}

/// Vectors over the `vectors` table: each vector an `F32_BLOB` (libsql's f32 vector format:
/// little-endian floats, so `vector_distance_cos` works on it in SQL), searched through an
/// int8 [`Mirror`] loaded on first use and kept in step by every write, with the candidates
/// re-ranked exactly from their rows. One process owns a data directory, so the mirror cannot
/// go stale behind its back.
pub struct SqlVectors {
    db: Db,
    mirror: Arc<std::sync::Mutex<Option<Mirror>>>,
}

impl SqlVectors {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            mirror: Arc::default(),
        }
    }
}

fn lock(m: &std::sync::Mutex<Option<Mirror>>) -> std::sync::MutexGuard<'_, Option<Mirror>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fills the mirror from the table unless it is loaded.
fn ensure_loaded(
    c: &Connection,
    mirror: &std::sync::Mutex<Option<Mirror>>,
) -> Result<(), PortError> {
    if lock(mirror).is_some() {
        return Ok(());
    }
    let mut m = Mirror::default();
    block_on(async {
        let mut rows = c
            .query("SELECT id, vec, metadata FROM vectors", ())
            .await
            .map_err(db_err)?;
        while let Some(row) = rows.next().await.map_err(db_err)? {
            let id = read_bytes(row.get_value(0).map_err(db_err)?)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let v = read_bytes(row.get_value(1).map_err(db_err)?)
                .map(|b| from_blob(&b))
                .unwrap_or_default();
            let meta = read_bytes(row.get_value(2).map_err(db_err)?).unwrap_or_default();
            let metadata: BTreeMap<String, String> =
                serde_json::from_slice(&meta).unwrap_or_default();
            if !v.is_empty() && (m.dim == 0 || m.dim == v.len()) {
                m.upsert(&id, &v, &metadata);
            }
        }
        Ok::<_, PortError>(())
    })?;
    *lock(mirror) = Some(m);
    Ok(())
}

#[async_trait]
impl Vectors for SqlVectors {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<(), PortError> {
        let mirror = self.mirror.clone();
        self.db
            .call(move |c| {
                ensure_loaded(c, &mirror)?;
                let mut dim = lock(&mirror).as_ref().and_then(|m| (m.dim > 0).then_some(m.dim));
                for r in &records {
                    validate_vector(&r.vector, dim)?;
                    dim = Some(r.vector.len());
                }
                in_transaction(c, || {
                    block_on(async {
                        for r in &records {
                            let meta = serde_json::to_string(&r.metadata).map_err(|e| PortError::invalid(e.to_string()))?;
                            c.execute(
                                "INSERT INTO vectors (id, dim, vec, metadata) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(id) DO UPDATE SET dim = excluded.dim, vec = excluded.vec, metadata = excluded.metadata",
                                vec![Value::Text(r.id.clone()), Value::Integer(r.vector.len() as i64), Value::Blob(to_blob(&r.vector)), Value::Text(meta)],
                            )
                            .await
                            .map_err(db_err)?;
                        }
                        Ok(())
                    })
                })?;
                if let Some(m) = lock(&mirror).as_mut() {
                    for r in &records {
                        m.upsert(&r.id, &r.vector, &r.metadata);
                    }
                }
                Ok(())
            })
            .await
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>, PortError> {
        let (vector, filter, mirror) = (vector.to_vec(), filter.clone(), self.mirror.clone());
        self.db
            .call(move |c| {
                ensure_loaded(c, &mirror)?;
                let ids = {
                    let guard = lock(&mirror);
                    let Some(m) = guard.as_ref().filter(|m| !m.is_empty()) else {
                        return Ok(Vec::new());
                    };
                    validate_vector(&vector, Some(m.dim))?;
                    m.scan(&vector, candidates(top_k), &filter)
                };
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let marks = vec!["?"; ids.len()].join(", ");
                let sql = format!("SELECT id, vec, metadata FROM vectors WHERE id IN ({marks})");
                let params: Vec<Value> = ids.into_iter().map(Value::Text).collect();
                block_on(async {
                    let mut rows = c.query(&sql, params).await.map_err(db_err)?;
                    let mut hits = Vec::new();
                    while let Some(row) = rows.next().await.map_err(db_err)? {
                        let id = read_bytes(row.get_value(0).map_err(db_err)?)
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                            .unwrap_or_default();
                        let v = read_bytes(row.get_value(1).map_err(db_err)?)
                            .map(|b| from_blob(&b))
                            .unwrap_or_default();
                        let meta_text =
                            read_bytes(row.get_value(2).map_err(db_err)?).unwrap_or_default();
                        let metadata: BTreeMap<String, String> =
                            serde_json::from_slice(&meta_text).unwrap_or_default();
                        if matches(&metadata, &filter) {
                            hits.push(VectorHit {
                                score: cosine(&vector, &v),
                                id,
                                metadata,
                            });
                        }
                    }
                    Ok(rank(hits, top_k))
                })
            })
            .await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), PortError> {
        let (ids, mirror) = (ids.to_vec(), self.mirror.clone());
        self.db
            .call(move |c| {
                in_transaction(c, || {
                    block_on(async {
                        for id in &ids {
                            c.execute("DELETE FROM vectors WHERE id = ?1", params![id.clone()])
                                .await
                                .map_err(db_err)?;
                        }
                        Ok(())
                    })
                })?;
                if let Some(m) = lock(&mirror).as_mut() {
                    for id in &ids {
                        m.remove(id);
                    }
                }
                Ok(())
            })
            .await
    }
}

/// TextIndex over FTS5 in the [`fts5_sql`] layout (shared with the Worker's D1), ranked by
/// FTS5's own `bm25()`. Each call is one transaction.
pub struct SqlText {
    db: Db,
}

impl SqlText {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// Runs each of `statements` with each of `params` (one `?1` each), in one transaction.
    async fn run_grouped(
        &self,
        statements: &'static [&'static str],
        params: Vec<String>,
    ) -> Result<(), PortError> {
        if params.is_empty() {
            return Ok(());
        }
        self.db
            .call(move |c| {
                in_transaction(c, || {
                    block_on(async {
                        for p in &params {
                            for sql in statements {
                                c.execute(sql, params![p.as_str()]).await.map_err(db_err)?;
                            }
                        }
                        Ok(())
                    })
                })
            })
            .await
    }
}

#[async_trait]
impl TextIndex for SqlText {
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<(), PortError> {
        self.run_grouped(&fts5_sql::UPSERT, fts5_sql::upsert_params(&docs)?)
            .await
    }

    async fn search(
        &self,
        query: &str,
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<TextHit>, PortError> {
        let Some(q) = fts5_query(query) else {
            return Ok(Vec::new());
        };
        let filter = filter.clone();
        self.db
            .call(move |c| {
                block_on(async {
                    let mut rows = c
                        .query(fts5_sql::SEARCH, params![q])
                        .await
                        .map_err(db_err)?;
                    let mut hits = Vec::new();
                    while let Some(row) = rows.next().await.map_err(db_err)? {
                        let id = read_bytes(row.get_value(0).map_err(db_err)?)
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                            .unwrap_or_default();
                        let meta =
                            read_bytes(row.get_value(1).map_err(db_err)?).unwrap_or_default();
                        let metadata: BTreeMap<String, String> =
                            serde_json::from_slice(&meta).unwrap_or_default();
                        // bm25() is lower-is-better and negative; the port's score is positive.
                        let rank = match row.get_value(2).map_err(db_err)? {
                            Value::Real(r) => -r as f32,
                            Value::Integer(i) => -i as f32,
                            _ => 0.0,
                        };
                        if matches(&metadata, &filter) {
                            hits.push(TextHit {
                                id,
                                score: rank.max(f32::MIN_POSITIVE),
                                metadata,
                            });
                        }
                    }
                    Ok(rank_text(hits, top_k))
                })
            })
            .await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), PortError> {
        self.run_grouped(&fts5_sql::DELETE, fts5_sql::ids_params(ids))
            .await
    }
}

#[cfg(test)]
mod tests;
