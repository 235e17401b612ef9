//! Vectors in D1 with an exact cosine scan: the fallback when no Vectorize index is bound.

use std::collections::BTreeMap;

use async_trait::async_trait;
use clawless_platform::sql;
use clawless_platform::vectors::{cosine, from_blob, matches, rank, to_blob, validate_vector};
use clawless_platform::{Result, VectorHit, VectorRecord, Vectors};

use super::{metadata_json, metadata_of, Arg, Cell, D1};

/// Vectors in D1 with an exact cosine scan: the fallback when no Vectorize index is bound
/// (fine to a few thousand chunks).
pub struct D1Vectors(pub D1);

impl D1Vectors {
    async fn stored_dim(&self) -> Result<Option<usize>> {
        let rows = self.0.rows("SELECT dim FROM vectors LIMIT 1", &[]).await?;
        Ok(rows
            .first()
            .and_then(|r| r.first())
            .and_then(Cell::int)
            .map(|d| d as usize))
    }
}

#[async_trait]
impl Vectors for D1Vectors {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<()> {
        let mut dim = self.stored_dim().await?;
        for r in &records {
            validate_vector(&r.vector, dim)?;
            dim = Some(r.vector.len());
        }
        let encoded = records
            .iter()
            .map(|r| Ok((to_blob(&r.vector), metadata_json(&r.metadata)?)))
            .collect::<Result<Vec<_>>>()?;
        let statements = records
            .iter()
            .zip(&encoded)
            .map(|(r, (blob, meta))| {
                (
                    sql::vectors::UPSERT,
                    vec![
                        Arg::Text(&r.id),
                        Arg::Int(r.vector.len() as i64),
                        Arg::Blob(blob),
                        Arg::Text(meta),
                    ],
                )
            })
            .collect();
        self.0.batch(statements).await
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>> {
        validate_vector(vector, self.stored_dim().await?)?;
        let rows = self.0.rows(sql::vectors::ALL, &[]).await?;
        let mut hits = Vec::new();
        for row in &rows {
            let metadata = metadata_of(row.get(2));
            if !matches(&metadata, filter) {
                continue;
            }
            let v = row
                .get(1)
                .and_then(Cell::bytes)
                .map(|b| from_blob(&b))
                .unwrap_or_default();
            hits.push(VectorHit {
                id: row.first().and_then(Cell::text).unwrap_or_default(),
                score: cosine(vector, &v),
                metadata,
            });
        }
        Ok(rank(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<()> {
        let statements = ids
            .iter()
            .map(|id| (sql::vectors::DELETE, vec![Arg::Text(id)]))
            .collect();
        self.0.batch(statements).await
    }
}
