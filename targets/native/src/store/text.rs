//! The TextIndex port over FTS5 in the memory index (`index.db`), in the layout shared with
//! the Worker's D1 ([`fts5_sql`]).

use std::collections::{BTreeMap, HashMap};

use clawless_platform::text::{fts5_query, fts5_sql, rank_text};
use clawless_platform::vectors::matches;
use clawless_platform::{async_trait, PortError, TextDoc, TextHit, TextIndex};
use futures::executor::block_on;
use libsql::{params, Value};

use super::{db_err, in_transaction, read_bytes, Db};

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
            .call_heavy(move |c| {
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

    async fn texts(&self, ids: &[String]) -> Result<HashMap<String, String>, PortError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let groups = fts5_sql::ids_params(ids);
        self.db
            .call(move |c| {
                block_on(async {
                    let mut out = HashMap::new();
                    for p in &groups {
                        let mut rows = c
                            .query(fts5_sql::TEXTS, params![p.as_str()])
                            .await
                            .map_err(db_err)?;
                        while let Some(row) = rows.next().await.map_err(db_err)? {
                            let text = |i| -> Result<String, PortError> {
                                Ok(read_bytes(row.get_value(i).map_err(db_err)?)
                                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                                    .unwrap_or_default())
                            };
                            out.insert(text(0)?, text(1)?);
                        }
                    }
                    Ok(out)
                })
            })
            .await
    }
}
