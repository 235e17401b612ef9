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

/// Vectors over the `vectors` table: each vector libsql's half-precision vector blob
/// ([`to_blob`], so `vector_distance_cos` works on it in SQL; rows of f32s from earlier
/// versions still read), searched through a quantized [`Mirror`] loaded on first use and kept
/// in step by every write, with the candidates re-ranked from their rows. One process owns a data directory, so the mirror cannot
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
        let mut rows = c.query(sql::vectors::ALL, ()).await.map_err(db_err)?;
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
            .call_heavy(move |c| {
                ensure_loaded(c, &mirror)?;
                let mut dim = lock(&mirror)
                    .as_ref()
                    .and_then(|m| (m.dim > 0).then_some(m.dim));
                for r in &records {
                    validate_vector(&r.vector, dim)?;
                    dim = Some(r.vector.len());
                }
                in_transaction(c, || {
                    block_on(async {
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
        if lock(&self.mirror).is_none() {
            let mirror = self.mirror.clone();
            self.db
                .call_heavy(move |c| ensure_loaded(c, &mirror))
                .await?;
        }
        // The scan runs on the calling thread, which is awake; on a thread of its own it
        // measured up to twice as slow (an idle thread, or virtual CPU, starts slowly). At
        // 100k vectors it is about a millisecond; only the rows go through the database.
        let ids = {
            let guard = lock(&self.mirror);
            let Some(m) = guard.as_ref().filter(|m| !m.is_empty()) else {
                return Ok(Vec::new());
            };
            validate_vector(vector, Some(m.dim))?;
            m.scan(vector, candidates(top_k), filter)
        };
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (vector, filter) = (vector.to_vec(), filter.clone());
        self.db
            .call(move |c| {
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
