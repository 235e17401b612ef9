//! Vectors port: upsert `(id, vector, metadata)`, query the top-k by cosine similarity with a
//! metadata filter, delete.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{PortError, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorRecord {
    pub id: String,
    pub vector: Vec<f32>,
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorHit {
    pub id: String,
    /// Cosine similarity in `[-1, 1]`; higher is closer.
    pub score: f32,
    pub metadata: BTreeMap<String, String>,
}

#[async_trait]
pub trait Vectors: Send + Sync {
    /// Inserts or replaces records by id.
    ///
    /// # Behavior
    /// All vectors of one store share one dimension: a record of another dimension than the
    /// ones stored is `Invalid`, as is an empty or all-zero vector.
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<()>;

    /// The `top_k` records most similar to `vector` whose metadata contains every
    /// `(key, value)` of `filter`.
    ///
    /// # Behavior
    /// Hits come best first by cosine similarity, ties by id. An empty store answers empty.
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>>;

    /// Deletes records by id.
    ///
    /// # Behavior
    /// Missing ids are ignored.
    async fn delete(&self, ids: &[String]) -> Result<()>;
}

/// Cosine similarity; 0 when either vector has no length.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Checks a vector is usable and, when `dim` is known, of that dimension.
pub fn validate_vector(vector: &[f32], dim: Option<usize>) -> Result<()> {
    if vector.is_empty()
        || vector.iter().all(|x| *x == 0.0)
        || vector.iter().any(|x| !x.is_finite())
    {
        return Err(PortError::invalid(
            "vector must be non-empty, finite and not all zero",
        ));
    }
    match dim {
        Some(d) if d != vector.len() => Err(PortError::invalid(format!(
            "vector has {} dimensions, store has {d}",
            vector.len()
        ))),
        _ => Ok(()),
    }
}

/// Whether `metadata` has every pair of `filter`.
pub fn matches(metadata: &BTreeMap<String, String>, filter: &BTreeMap<String, String>) -> bool {
    filter.iter().all(|(k, v)| metadata.get(k) == Some(v))
}

/// libsql's type byte for a half-precision vector, the last byte of its blob.
const F16_TYPE: u8 = 5;

/// A vector as the SQL and DynamoDB adapters store it: half-precision floats (IEEE 754
/// binary16, little-endian) and a last byte 5, libsql's own `FLOAT16` vector blob, so its
/// `vector_extract` and `vector_distance_cos` read it too. Half the size of f32: a cosine over
/// half-precision values differs from the f32 one by about 1e-4, far under the gap between
/// neighbours that ranking needs.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    let mut b: Vec<u8> = v
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect();
    b.push(F16_TYPE);
    b
}

/// The inverse of [`to_blob`]; also reads blobs of little-endian f32s (what earlier versions
/// stored: their length is a multiple of 4, a half-precision blob's is odd). Trailing bytes
/// short of a float are ignored.
pub fn from_blob(b: &[u8]) -> Vec<f32> {
    match b.split_last() {
        Some((&F16_TYPE, data)) if b.len() % 2 == 1 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    }
}

/// Sorts hits best first, ties by id, and keeps `top_k`.
pub fn rank(mut hits: Vec<VectorHit>, top_k: usize) -> Vec<VectorHit> {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    hits.truncate(top_k);
    hits
}

/// In-memory exact [`Vectors`].
#[derive(Default)]
pub struct MemoryVectors {
    records: Mutex<BTreeMap<String, VectorRecord>>,
}

impl MemoryVectors {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, VectorRecord>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Vectors for MemoryVectors {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<()> {
        let mut map = self.lock();
        let mut dim = map.values().next().map(|r| r.vector.len());
        for r in &records {
            validate_vector(&r.vector, dim)?;
            dim = Some(r.vector.len());
        }
        for r in records {
            map.insert(r.id.clone(), r);
        }
        Ok(())
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>> {
        let map = self.lock();
        validate_vector(vector, map.values().next().map(|r| r.vector.len()))?;
        let hits = map
            .values()
            .filter(|r| matches(&r.metadata, filter))
            .map(|r| VectorHit {
                id: r.id.clone(),
                score: cosine(vector, &r.vector),
                metadata: r.metadata.clone(),
            })
            .collect();
        Ok(rank(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<()> {
        let mut map = self.lock();
        for id in ids {
            map.remove(id);
        }
        Ok(())
    }
}

/// Conformance suite for [`Vectors`] adapters; `vectors` must start empty.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod conformance {
    use super::*;
    use crate::error::ErrorKind;

    fn rec(id: &str, vector: [f32; 3], kind: &str) -> VectorRecord {
        VectorRecord {
            id: id.into(),
            vector: vector.to_vec(),
            metadata: BTreeMap::from([("kind".into(), kind.into())]),
        }
    }

    pub async fn run(vectors: &dyn Vectors) {
        let none = BTreeMap::new();
        assert!(
            vectors
                .query(&[1.0, 0.0, 0.0], 3, &none)
                .await
                .unwrap()
                .is_empty(),
            "empty store answers empty"
        );
        vectors
            .upsert(vec![
                rec("x", [1.0, 0.0, 0.0], "axis"),
                rec("y", [0.0, 1.0, 0.0], "axis"),
                rec("xy", [1.0, 1.0, 0.0], "diag"),
                rec("neg", [-1.0, 0.0, 0.0], "axis"),
            ])
            .await
            .unwrap();
        let hits = vectors.query(&[1.0, 0.1, 0.0], 2, &none).await.unwrap();
        let ids: Vec<_> = hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["x", "xy"], "best first, top_k kept");
        assert!(
            (hits[0].score - 0.995).abs() < 0.01,
            "cosine score, got {}",
            hits[0].score
        );
        assert_eq!(
            hits[0].metadata.get("kind").map(String::as_str),
            Some("axis"),
            "metadata returned"
        );

        let filter = BTreeMap::from([("kind".to_string(), "diag".to_string())]);
        let hits = vectors.query(&[0.0, 1.0, 0.0], 5, &filter).await.unwrap();
        assert_eq!(
            hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
            ["xy"],
            "filter applies"
        );

        vectors
            .upsert(vec![rec("x", [0.0, 0.0, 1.0], "moved")])
            .await
            .unwrap();
        let hits = vectors.query(&[0.0, 0.0, 1.0], 1, &none).await.unwrap();
        assert_eq!(hits[0].id, "x", "upsert replaces by id");
        assert!(hits[0].score > 0.99);

        let all = vectors.query(&[1.0, 1.0, 1.0], 10, &none).await.unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(
            all.last().map(|h| h.id.as_str()),
            Some("neg"),
            "negative similarity ranks last"
        );

        vectors
            .delete(&["y".into(), "missing".into()])
            .await
            .unwrap();
        let all = vectors.query(&[1.0, 1.0, 1.0], 10, &none).await.unwrap();
        assert_eq!(all.len(), 3, "delete removes, missing ids ignored");

        let err = vectors
            .upsert(vec![VectorRecord {
                id: "bad".into(),
                vector: vec![1.0, 2.0],
                metadata: none.clone(),
            }])
            .await;
        assert_eq!(
            err.unwrap_err().kind,
            ErrorKind::Invalid,
            "wrong dimension refused"
        );
        let err = vectors
            .upsert(vec![rec("zero", [0.0, 0.0, 0.0], "z")])
            .await;
        assert_eq!(
            err.unwrap_err().kind,
            ErrorKind::Invalid,
            "zero vector refused"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{cosine, from_blob, to_blob};

    #[test]
    fn blobs_are_half_precision_and_f32_blobs_still_read() {
        let v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 173.0)
            .collect();
        let blob = to_blob(&v);
        assert_eq!(
            blob.len(),
            2 * 384 + 1,
            "two bytes a value and libsql's type byte"
        );
        assert_eq!(blob.last(), Some(&5));
        let back = from_blob(&blob);
        assert_eq!(back.len(), v.len());
        for (a, b) in v.iter().zip(&back) {
            assert!(
                (a - b).abs() <= a.abs() / 1024.0 + 1e-7,
                "{a} read back as {b}"
            );
        }
        let w: Vec<f32> = v.iter().rev().map(|x| x + 0.01).collect();
        assert!((cosine(&v, &w) - cosine(&back, &from_blob(&to_blob(&w)))).abs() < 1e-3);
        // What earlier versions stored: plain little-endian f32s.
        let old: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(from_blob(&old), v);
        assert!(from_blob(&[]).is_empty());
        assert!(from_blob(&[5]).is_empty());
        assert_eq!(from_blob(&to_blob(&[1.0, -2.5])), [1.0, -2.5]);
    }

    #[test]
    fn memory_vectors_conform() {
        futures::executor::block_on(super::conformance::run(&super::MemoryVectors::default()));
    }
}
