//! The Vectors port over the `vectors` table of the memory index (`index.db`), searched
//! through the quantized mirror of [`crate::vecindex`].

use std::collections::BTreeMap;
use std::sync::Arc;

use clawless_platform::sql;
use clawless_platform::vectors::{cosine, from_blob, matches, rank, to_blob, validate_vector};
use clawless_platform::{async_trait, PortError, VectorHit, VectorRecord, Vectors};
use futures::executor::block_on;
use libsql::{params, Connection, Value};

use super::{db_err, in_transaction, read_bytes, Db};
use crate::vecindex::{candidates, Mirror};

/// [`sql::vectors::ALL`] with each row's rowid last: the mirror reads rows back by it.
const ALL_WITH_ROWID: &str = "SELECT id, vec, metadata, rowid FROM vectors";

/// Vectors over the `vectors` table: each vector libsql's half-precision vector blob
/// ([`to_blob`], so `vector_distance_cos` works on it in SQL; rows of f32s from earlier
/// versions still read), searched through a quantized [`Mirror`] loaded on first use and kept
/// in step by every write, with the candidates re-ranked from their rows. One process owns a
/// data directory, so the mirror cannot go stale behind its back.
pub struct SqlVectors {
    /// The statement that reads candidates' rows, prepared once per number of candidates
    /// (preparing it took a third of reading the rows). Before `db`: dropped first.
    rows: Arc<std::sync::Mutex<BTreeMap<usize, libsql::Statement>>>,
    db: Db,
    mirror: Arc<std::sync::Mutex<Option<Mirror>>>,
}

impl SqlVectors {
    pub fn new(db: Db) -> Self {
        Self {
            rows: Arc::default(),
            db,
            mirror: Arc::default(),
        }
    }
}

/// Rows read from the table before they are coded into the mirror.
const LOAD_BATCH: usize = 4_096;

/// Statements kept in [`SqlVectors::rows`]: one per `top_k` a caller asks for, a few at most.
const KEPT_STATEMENTS: usize = 4;

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
    // Coded a batch at a time (see [`Mirror::load`]), so at most one batch's vectors are
    // held twice.
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    block_on(async {
        let mut rows = c.query(ALL_WITH_ROWID, ()).await.map_err(db_err)?;
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
            let rowid = row.get::<i64>(3).map_err(db_err)?;
            if !v.is_empty() {
                batch.push((id, rowid, v, metadata));
            }
            if batch.len() == LOAD_BATCH {
                m.load(&batch);
                batch.clear();
            }
        }
        Ok::<_, PortError>(())
    })?;
    m.load(&batch);
    *lock(mirror) = Some(m);
    Ok(())
}

#[async_trait]
impl Vectors for SqlVectors {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<(), PortError> {
        let mirror = self.mirror.clone();
        self.db
            .call_heavy(move |c| {
                ensure_loaded(c, &mirror)?;
                let mut dim = lock(&mirror)
                    .as_ref()
                    .and_then(|m| (m.dim > 0).then_some(m.dim));
                for r in &records {
                    validate_vector(&r.vector, dim)?;
                    dim = Some(r.vector.len());
                }
                let rowids = in_transaction(c, || {
                    block_on(async {
                        let mut rowids = Vec::with_capacity(records.len());
                        let mut batch = std::collections::HashMap::new();
                        for r in &records {
                            let meta = serde_json::to_string(&r.metadata)
                                .map_err(|e| PortError::invalid(e.to_string()))?;
                            c.execute(
                                sql::vectors::UPSERT,
                                vec![
                                    Value::Text(r.id.clone()),
                                    Value::Integer(r.vector.len() as i64),
                                    Value::Blob(to_blob(&r.vector)),
                                    Value::Text(meta),
                                ],
                            )
                            .await
                            .map_err(db_err)?;
                            // An update keeps its row (the mirror, loaded, or this batch knows
                            // it); an insert makes a new one. (`RETURNING rowid` cost a quarter
                            // of the indexing throughput.)
                            let known = batch
                                .get(&r.id)
                                .copied()
                                .or_else(|| lock(&mirror).as_ref().and_then(|m| m.rowid(&r.id)));
                            let rowid = known.unwrap_or_else(|| c.last_insert_rowid());
                            batch.insert(r.id.clone(), rowid);
                            rowids.push(rowid);
                        }
                        Ok(rowids)
                    })
                })?;
                if let Some(m) = lock(&mirror).as_mut() {
                    for (r, rowid) in records.iter().zip(rowids) {
                        m.upsert(&r.id, rowid, &r.vector, &r.metadata);
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
        if lock(&self.mirror).is_none() {
            let mirror = self.mirror.clone();
            self.db
                .call_heavy(move |c| ensure_loaded(c, &mirror))
                .await?;
        }
        // The scan runs on the calling thread, which is awake; on a thread of its own it
        // measured up to twice as slow (an idle thread, or virtual CPU, starts slowly). At
        // 100k vectors it is about a millisecond; only the rows go through the database.
        let rowids = {
            let guard = lock(&self.mirror);
            let Some(m) = guard.as_ref().filter(|m| !m.is_empty()) else {
                return Ok(Vec::new());
            };
            validate_vector(vector, Some(m.dim))?;
            m.scan_rowids(vector, candidates(top_k), filter)
        };
        if rowids.is_empty() {
            return Ok(Vec::new());
        }
        let (vector, filter, statements) = (vector.to_vec(), filter.clone(), self.rows.clone());
        let want = candidates(top_k);
        self.db
            .call(move |c| {
                // By rowid: one look-up in the table each, not one in the id's index first.
                // Always `want` of them (fewer candidates repeat the first), so one statement
                // serves every query of this `top_k`.
                let first = rowids[0];
                let params: Vec<Value> = (0..want)
                    .map(|i| Value::Integer(rowids.get(i).copied().unwrap_or(first)))
                    .collect();
                let mut kept = statements.lock().unwrap_or_else(|e| e.into_inner());
                if !kept.contains_key(&want) {
                    if kept.len() >= KEPT_STATEMENTS {
                        kept.clear();
                    }
                    let marks = vec!["?"; want].join(", ");
                    let sql =
                        format!("SELECT id, vec, metadata FROM vectors WHERE rowid IN ({marks})");
                    let statement = block_on(c.prepare(&sql)).map_err(db_err)?;
                    kept.insert(want, statement);
                }
                let Some(statement) = kept.get(&want) else {
                    return Ok(Vec::new());
                };
                let found = block_on(async {
                    let mut rows = statement.query(params).await.map_err(db_err)?;
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
                });
                statement.reset();
                found
            })
            .await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), PortError> {
        let (ids, mirror) = (ids.to_vec(), self.mirror.clone());
        self.db
            .call_heavy(move |c| {
                in_transaction(c, || {
                    block_on(async {
                        for id in &ids {
                            c.execute(sql::vectors::DELETE, params![id.clone()])
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
