//! The Vectors port over the table: `p = "vec"`, exact cosine scan of the partition: fine for
//! an assistant's memory (thousands of chunks); each query reads the whole partition, ~1.6 KB
//! per 384-dim vector.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use clawless_platform::vectors::{cosine, from_blob, matches, rank, to_blob, validate_vector};
use clawless_platform::{async_trait, PortError, VectorHit, VectorRecord, Vectors};

use super::{blob, num, s, sdk_err, string, Table};

/// The Vectors port over the `vec` partition.
pub struct DynamoVectors(pub Table);

impl DynamoVectors {
    async fn dim(&self) -> Result<Option<usize>, PortError> {
        let items = self.0.query("vec", "", "", 1, |_| true).await?;
        Ok(items
            .first()
            .and_then(|i| num(i, "dim"))
            .map(|d| d as usize))
    }
}

#[async_trait]
impl Vectors for DynamoVectors {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<(), PortError> {
        let mut dim = self.dim().await?;
        for r in &records {
            validate_vector(&r.vector, dim)?;
            dim = Some(r.vector.len());
        }
        for r in records {
            let meta = serde_json::to_string(&r.metadata)
                .map_err(|e| PortError::invalid(e.to_string()))?;
            self.0
                .client
                .put_item()
                .table_name(&self.0.name)
                .item("p", s("vec"))
                .item("s", s(r.id))
                .item("dim", AttributeValue::N(r.vector.len().to_string()))
                .item("vec", AttributeValue::B(Blob::new(to_blob(&r.vector))))
                .item("meta", s(meta))
                .send()
                .await
                .map_err(sdk_err)?;
        }
        Ok(())
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>, PortError> {
        let items = self.0.query("vec", "", "", usize::MAX, |_| true).await?;
        validate_vector(
            vector,
            items
                .first()
                .and_then(|i| num(i, "dim"))
                .map(|d| d as usize),
        )?;
        let hits = items
            .iter()
            .filter_map(|i| {
                let metadata: BTreeMap<String, String> =
                    serde_json::from_str(&string(i, "meta")?).ok()?;
                matches(&metadata, filter).then(|| VectorHit {
                    id: string(i, "s").unwrap_or_default(),
                    score: cosine(vector, &from_blob(&blob(i, "vec").unwrap_or_default())),
                    metadata,
                })
            })
            .collect();
        Ok(rank(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<(), PortError> {
        for id in ids {
            self.0.delete_item("vec".into(), id).await?;
        }
        Ok(())
    }
}
