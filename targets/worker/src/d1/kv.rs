//! Kv over the `kv` table: every D1 statement is atomic, so compare-and-swap is one
//! conditional statement and its `changes` count.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::kv::validate_key;
use clawless_platform::sql;
use clawless_platform::{Clock, Kv, KvEntry, Result};

use super::{Arg, Cell, D1};

/// Kv over the `kv` table; expiry checked on read by the platform clock.
pub struct D1Kv {
    pub d1: D1,
    pub clock: Arc<dyn Clock>,
}

impl D1Kv {
    fn expiry(&self, ttl: Option<Duration>) -> Arg<'static> {
        match ttl {
            Some(t) => Arg::Int(
                self.clock
                    .now_ms()
                    .saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
                    .min(i64::MAX as u64) as i64,
            ),
            None => Arg::Null,
        }
    }

    fn now(&self) -> Arg<'static> {
        Arg::Int(self.clock.now_ms() as i64)
    }
}

#[async_trait]
impl Kv for D1Kv {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        validate_key(key)?;
        let rows = self
            .d1
            .rows(
                "SELECT value FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)",
                &[Arg::Text(key), self.now()],
            )
            .await?;
        Ok(rows.first().and_then(|r| r.first()).and_then(Cell::bytes))
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        validate_key(key)?;
        self.d1
            .run(
                sql::kv::PUT,
                &[Arg::Text(key), Arg::Blob(value), self.expiry(ttl)],
            )
            .await
            .map(drop)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        self.d1
            .run(sql::kv::DELETE, &[Arg::Text(key)])
            .await
            .map(drop)
    }

    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        // Every key sorts after "": the whole prefix.
        self.list_after(prefix, "", limit).await
    }

    async fn list_after(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<String>> {
        let rows = self
            .d1
            .rows(
                sql::kv::LIST_AFTER,
                &[
                    Arg::Text(prefix),
                    self.now(),
                    Arg::Int(limit as i64),
                    Arg::Text(after),
                ],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.first().and_then(Cell::text))
            .collect())
    }

    async fn scan(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<KvEntry>> {
        let rows = self
            .d1
            .rows(
                sql::kv::SCAN,
                &[
                    Arg::Text(prefix),
                    self.now(),
                    Arg::Int(limit as i64),
                    Arg::Text(after),
                ],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(KvEntry {
                    key: r.first()?.text()?,
                    value: r.get(1)?.bytes()?,
                    expires_at_ms: r.get(2).and_then(Cell::int).map(|e| e.max(0) as u64),
                })
            })
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
        let now = self.now();
        let changed = match (expected, new) {
            // Insert, or take over an expired row; a live row makes the WHERE false.
            (None, Some(new)) => {
                self.d1
                    .run(
                        "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= ?4",
                        &[Arg::Text(key), Arg::Blob(new), self.expiry(ttl), now],
                    )
                    .await?
            }
            (Some(old), Some(new)) => {
                self.d1
                    .run(
                        "UPDATE kv SET value = ?2, expires_at = ?3 WHERE key = ?1 AND value = ?4 AND (expires_at IS NULL OR expires_at > ?5)",
                        &[Arg::Text(key), Arg::Blob(new), self.expiry(ttl), Arg::Blob(old), now],
                    )
                    .await?
            }
            (Some(old), None) => {
                self.d1
                    .run(
                        "DELETE FROM kv WHERE key = ?1 AND value = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
                        &[Arg::Text(key), Arg::Blob(old), now],
                    )
                    .await?
            }
            // "Absent → absent": true when nothing live is there.
            (None, None) => return Ok(self.get(key).await?.is_none()),
        };
        Ok(changed == 1)
    }

    async fn purge_expired(&self) -> Result<u64> {
        let purged = self.d1.run(sql::kv::PURGE_EXPIRED, &[self.now()]).await?;
        Ok(purged as u64)
    }
}
