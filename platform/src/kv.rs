//! Kv port: a key-value store with optional TTL, prefix listing and an atomic
//! compare-and-swap (what dedupe records, leases and the inbox need).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::clock::Clock;
use crate::error::{PortError, Result};

/// Longest key any adapter must accept (Workers KV allows 512 bytes).
pub const MAX_KEY_LEN: usize = 512;

#[async_trait]
pub trait Kv: Send + Sync {
    /// Reads a value.
    ///
    /// # Behavior
    /// A missing or expired key is `Ok(None)`.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// Writes a value, replacing any previous one.
    ///
    /// # Behavior
    /// With `ttl`, the key reads as absent once `ttl` has passed (by the platform clock).
    /// Without, it never expires. An empty key or one longer than [`MAX_KEY_LEN`] is `Invalid`.
    async fn put(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()>;

    /// Removes a key.
    ///
    /// # Behavior
    /// Deleting a missing key is `Ok`.
    async fn delete(&self, key: &str) -> Result<()>;

    /// Lists live keys starting with `prefix`.
    ///
    /// # Behavior
    /// Keys come in lexical (byte) order, at most `limit` of them, expired keys left out.
    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>>;

    /// Lists live keys starting with `prefix` that sort after `after`: the next page of a
    /// listing, or a skip past a whole group of keys.
    ///
    /// # Behavior
    /// As [`Kv::list`], restricted to keys strictly greater than `after`. The default lists
    /// the whole prefix and filters; adapters that can seek should override it.
    async fn list_after(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<String>> {
        Ok(self
            .list(prefix, usize::MAX)
            .await?
            .into_iter()
            .filter(|k| k.as_str() > after)
            .take(limit)
            .collect())
    }

    /// Reads live entries starting with `prefix` that sort after `after`, each with its value
    /// and expiry: a page of an export.
    ///
    /// # Behavior
    /// As [`Kv::list_after`], with each key's value and its expiry instant (ms by the platform
    /// clock; `None` never expires), so a copy written with the remaining TTL expires when the
    /// original would have.
    async fn scan(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<KvEntry>>;

    /// Atomically replaces the value of `key` if its current value equals `expected`.
    ///
    /// # Behavior
    /// `expected = None` means "the key is absent (or expired)". `new = None` deletes the key.
    /// Returns `Ok(true)` when the swap happened, `Ok(false)` when the current value differed;
    /// of two concurrent swaps from the same `expected`, at most one returns `true`.
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        ttl: Option<Duration>,
    ) -> Result<bool>;

    /// Writes `value` only if `key` is absent; `Ok(true)` when it was written.
    ///
    /// # Behavior
    /// Same as `compare_and_swap(key, None, Some(value), ttl)`.
    async fn put_if_absent(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool> {
        self.compare_and_swap(key, None, Some(value), ttl).await
    }

    /// Removes the stored rows of expired keys; returns how many it removed. The core's
    /// scheduled job calls it (`App::scheduled`), so no shell needs its store's handle.
    ///
    /// # Behavior
    /// Removes keys whose TTL has passed by the platform clock, and only those: keys without a
    /// TTL and keys still live stay. It reclaims space and nothing else: reads (`get`, `list`,
    /// `compare_and_swap`) never return an expired key, purged or not. The default removes
    /// nothing and returns 0, for stores that delete expired items themselves (DynamoDB's TTL)
    /// or never outlive the process; adapters that keep expired rows override it.
    async fn purge_expired(&self) -> Result<u64> {
        Ok(0)
    }
}

/// JSON helpers over any [`Kv`].
#[async_trait]
pub trait KvExt {
    async fn get_json<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>>;
    async fn put_json<T: Serialize + Sync>(
        &self,
        key: &str,
        value: &T,
        ttl: Option<Duration>,
    ) -> Result<()>;
}

#[async_trait]
impl<K: Kv + ?Sized> KvExt for K {
    async fn get_json<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        match self.get(key).await? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                PortError::invalid(format!(
                    "stored value at {key} is not the expected JSON: {e}"
                ))
            }),
        }
    }
    async fn put_json<T: Serialize + Sync>(
        &self,
        key: &str,
        value: &T,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let bytes = serde_json::to_vec(value).map_err(|e| PortError::invalid(e.to_string()))?;
        self.put(key, &bytes, ttl).await
    }
}

/// Checks a key against the rules every adapter shares.
pub fn validate_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(PortError::invalid(format!(
            "key must be 1..={MAX_KEY_LEN} bytes, got {}",
            key.len()
        )));
    }
    Ok(())
}

/// Expiry instant (ms) for a TTL starting now.
pub fn expiry(clock: &dyn Clock, ttl: Option<Duration>) -> Option<u64> {
    ttl.map(|t| clock.now_ms().saturating_add(t.as_millis() as u64))
}

/// A live key as [`Kv::scan`] reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct KvEntry {
    pub key: String,
    pub value: Vec<u8>,
    /// When it expires, in ms by the platform clock; `None`: never.
    pub expires_at_ms: Option<u64>,
}

impl std::fmt::Debug for KvEntry {
    // Values may hold anything a person wrote: only their size is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvEntry")
            .field("key", &self.key)
            .field("value_bytes", &self.value.len())
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

/// A stored value and its expiry instant (ms), if any.
type Entry = (Vec<u8>, Option<u64>);

/// In-memory [`Kv`] with expiry by the given clock.
pub struct MemoryKv {
    clock: Arc<dyn Clock>,
    entries: Mutex<BTreeMap<String, Entry>>,
    ops: std::sync::atomic::AtomicUsize,
}

impl MemoryKv {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            entries: Mutex::new(BTreeMap::new()),
            ops: Default::default(),
        }
    }

    /// Operations so far (what a database adapter would send as queries).
    pub fn ops(&self) -> usize {
        self.ops.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.ops.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A poisoned lock only means another test thread panicked; the map itself is intact.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live entries of `map` under `prefix` after `after`, in key order.
    fn live_after<'m>(
        &'m self,
        map: &'m BTreeMap<String, Entry>,
        prefix: &'m str,
        after: &str,
    ) -> impl Iterator<Item = (&'m String, &'m Entry)> + 'm {
        use std::ops::Bound;
        let start = if after < prefix {
            Bound::Included(prefix.to_owned())
        } else {
            Bound::Excluded(after.to_owned())
        };
        map.range((start, Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
            .filter(|(_, e)| self.live(e))
    }

    fn live(&self, entry: &Entry) -> bool {
        entry.1.is_none_or(|at| at > self.clock.now_ms())
    }
}

#[async_trait]
impl Kv for MemoryKv {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        validate_key(key)?;
        Ok(self
            .lock()
            .get(key)
            .filter(|e| self.live(e))
            .map(|e| e.0.clone()))
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        validate_key(key)?;
        let at = expiry(&*self.clock, ttl);
        self.lock().insert(key.to_owned(), (value.to_vec(), at));
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        self.lock().remove(key);
        Ok(())
    }

    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        // Every key sorts after "": the whole prefix.
        self.list_after(prefix, "", limit).await
    }

    async fn list_after(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<String>> {
        let map = self.lock();
        Ok(self
            .live_after(&map, prefix, after)
            .map(|(k, _)| k.clone())
            .take(limit)
            .collect())
    }

    async fn scan(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<KvEntry>> {
        let map = self.lock();
        Ok(self
            .live_after(&map, prefix, after)
            .map(|(key, (value, expires_at_ms))| KvEntry {
                key: key.clone(),
                value: value.clone(),
                expires_at_ms: *expires_at_ms,
            })
            .take(limit)
            .collect())
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        ttl: Option<Duration>,
    ) -> Result<bool> {
        validate_key(key)?;
        let mut map = self.lock();
        let current = map
            .get(key)
            .filter(|e| self.live(e))
            .map(|e| e.0.as_slice());
        if current != expected {
            return Ok(false);
        }
        match new {
            Some(value) => {
                map.insert(key.to_owned(), (value.to_vec(), expiry(&*self.clock, ttl)));
            }
            None => {
                map.remove(key);
            }
        }
        Ok(true)
    }

    async fn purge_expired(&self) -> Result<u64> {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, e| self.live(e));
        Ok((before - map.len()) as u64)
    }
}

/// Conformance suite for [`Kv`] adapters.
#[cfg(any(test, feature = "testing"))]
pub mod conformance;

/// A Kv whose calls a hook sees, fails or follows (tests and benches).
#[cfg(any(test, feature = "testing"))]
pub mod tap;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    #[test]
    fn memory_kv_conforms() {
        let clock = Arc::new(FakeClock::new(1_700_000_000_000));
        let kv = MemoryKv::new(clock.clone());
        futures::executor::block_on(conformance::run(&kv, &*clock, "t"));
    }

    #[test]
    fn memory_kv_purges_only_expired_keys() {
        let clock = Arc::new(FakeClock::new(1_700_000_000_000));
        let kv = MemoryKv::new(clock.clone());
        futures::executor::block_on(async {
            kv.put("a", b"1", Some(Duration::from_secs(1)))
                .await
                .unwrap();
            kv.put("b", b"2", Some(Duration::from_secs(10)))
                .await
                .unwrap();
            kv.put("c", b"3", None).await.unwrap();
            assert_eq!(kv.purge_expired().await.unwrap(), 0);
            clock.sleep(Duration::from_secs(2)).await;
            assert_eq!(kv.purge_expired().await.unwrap(), 1);
            assert_eq!(kv.lock().len(), 2, "the expired row is gone from the map");
        });
    }
}
