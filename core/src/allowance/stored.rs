//! The storage ports counted (see [`super`]): every call of the app's Kv, Files, Vectors and
//! TextIndex adds one to a shared count, as [`super::Counted`] does for the Http port. On a
//! Worker each is a D1 query (or a Vectorize call), which Cloudflare counts per invocation;
//! elsewhere the count is only read, never limited.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{
    Files, Kv, KvEntry, Platform, Result, TextDoc, TextHit, TextIndex, VectorHit, VectorRecord,
    Vectors,
};

/// `platform` with every storage call counted on `count`.
pub fn count_storage(platform: &mut Platform, count: &Arc<AtomicU64>) {
    platform.kv = Arc::new(Stored {
        inner: platform.kv.clone(),
        count: count.clone(),
    });
    platform.files = Arc::new(Stored {
        inner: platform.files.clone(),
        count: count.clone(),
    });
    platform.vectors = Arc::new(Stored {
        inner: platform.vectors.clone(),
        count: count.clone(),
    });
    platform.text = Arc::new(Stored {
        inner: platform.text.clone(),
        count: count.clone(),
    });
}

/// A storage port whose calls are counted.
struct Stored<P: ?Sized> {
    inner: Arc<P>,
    count: Arc<AtomicU64>,
}

impl<P: ?Sized> Stored<P> {
    /// The port, one call counted.
    fn one(&self) -> &P {
        self.count.fetch_add(1, Ordering::Relaxed);
        &self.inner
    }
}

#[async_trait]
impl Kv for Stored<dyn Kv> {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.one().get(key).await
    }
    async fn put(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        self.one().put(key, value, ttl).await
    }
    async fn delete(&self, key: &str) -> Result<()> {
        self.one().delete(key).await
    }
    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        self.one().list(prefix, limit).await
    }
    async fn list_after(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<String>> {
        self.one().list_after(prefix, after, limit).await
    }
    async fn scan(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<KvEntry>> {
        self.one().scan(prefix, after, limit).await
    }
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        ttl: Option<Duration>,
    ) -> Result<bool> {
        self.one().compare_and_swap(key, expected, new, ttl).await
    }
    async fn put_if_absent(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool> {
        self.one().put_if_absent(key, value, ttl).await
    }
    async fn purge_expired(&self) -> Result<u64> {
        self.one().purge_expired().await
    }
}

#[async_trait]
impl Files for Stored<dyn Files> {
    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.one().read(path).await
    }
    async fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        self.one().write(path, data).await
    }
    async fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        self.one().append(path, data).await
    }
    async fn list(&self, dir: &str) -> Result<Vec<String>> {
        self.one().list(dir).await
    }
    async fn delete(&self, path: &str) -> Result<()> {
        self.one().delete(path).await
    }
}

#[async_trait]
impl Vectors for Stored<dyn Vectors> {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<()> {
        self.one().upsert(records).await
    }
    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>> {
        self.one().query(vector, top_k, filter).await
    }
    async fn delete(&self, ids: &[String]) -> Result<()> {
        self.one().delete(ids).await
    }
}

#[async_trait]
impl TextIndex for Stored<dyn TextIndex> {
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<()> {
        self.one().upsert(docs).await
    }
    async fn search(
        &self,
        query: &str,
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<TextHit>> {
        self.one().search(query, top_k, filter).await
    }
    async fn delete(&self, ids: &[String]) -> Result<()> {
        self.one().delete(ids).await
    }
    async fn texts(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        self.one().texts(ids).await
    }
}
