//! The Kv port over the `kv` table of `clawless.db`, through its [`Db`].

use std::sync::Arc;
use std::time::Duration;

use clawless_platform::kv::{expiry, validate_key};
use clawless_platform::sql;
use clawless_platform::{async_trait, Clock, Kv, KvEntry, PortError};
use futures::executor::block_on;
use libsql::{params, Connection, Value};

use super::{db_err, read_bytes, read_i64, Db};

/// The Kv database's schema: the `kv` table D1 has too ([`sql::kv`]).
pub const KV_SCHEMA: [&str; 1] = [sql::kv::SCHEMA];

/// The live value of `key`, expired rows read as absent.
fn current(conn: &Connection, key: &str, now: u64) -> Result<Option<Vec<u8>>, PortError> {
    block_on(async {
        let mut rows = conn
            .query(
                "SELECT value, expires_at FROM kv WHERE key = ?1",
                params![key],
            )
            .await
            .map_err(db_err)?;
        let Some(row) = rows.next().await.map_err(db_err)? else {
            return Ok(None);
        };
        let exp = read_i64(row.get_value(1).map_err(db_err)?);
        if exp.is_some_and(|e| e as u64 <= now) {
            return Ok(None);
        }
        Ok(read_bytes(row.get_value(0).map_err(db_err)?))
    })
}

fn write(
    conn: &Connection,
    key: &str,
    value: Option<&[u8]>,
    expires: Option<u64>,
) -> Result<(), PortError> {
    block_on(async {
        match value {
            Some(v) => {
                let exp = expires
                    .map(|e| Value::Integer(e.min(i64::MAX as u64) as i64))
                    .unwrap_or(Value::Null);
                conn.execute(
                    sql::kv::PUT,
                    vec![Value::Text(key.to_owned()), Value::Blob(v.to_vec()), exp],
                )
                .await
            }
            None => conn.execute(sql::kv::DELETE, params![key]).await,
        }
        .map(drop)
        .map_err(db_err)
    })
}

/// Kv over the `kv` table.
pub struct SqlKv {
    db: Db,
    clock: Arc<dyn Clock>,
}

impl SqlKv {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }

    /// The database this Kv runs on.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The rows of a listing `statement` of [`sql::kv`] (`?1` prefix, `?2` now, `?3` limit,
    /// `?4` after), each read by `read` (`None` skips it): on the caller's thread when short,
    /// on the blocking pool when it may be long.
    async fn listing<T: Send + 'static>(
        &self,
        statement: &'static str,
        (prefix, after, limit): (&str, &str, usize),
        read: fn(&libsql::Row) -> Result<Option<T>, PortError>,
    ) -> Result<Vec<T>, PortError> {
        let (prefix, after) = (prefix.to_owned(), after.to_owned());
        let now = self.clock.now_ms() as i64;
        let limit = limit.min(i64::MAX as usize) as i64;
        let f = move |c: &Connection| {
            block_on(async {
                let mut rows = c
                    .query(statement, params![prefix, now, limit, after])
                    .await
                    .map_err(db_err)?;
                let mut out = Vec::new();
                while let Some(row) = rows.next().await.map_err(db_err)? {
                    out.extend(read(&row)?);
                }
                Ok(out)
            })
        };
        match limit > SHORT_LISTING {
            true => self.db.call_heavy(f).await,
            false => self.db.call(f).await,
        }
    }
}

/// Listings of at most this many rows run where they are called (see [`Db::call`]).
const SHORT_LISTING: i64 = 128;

#[async_trait]
impl Kv for SqlKv {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, PortError> {
        validate_key(key)?;
        let (key, now) = (key.to_owned(), self.clock.now_ms());
        self.db.call(move |c| current(c, &key, now)).await
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), PortError> {
        validate_key(key)?;
        let (key, value, exp) = (key.to_owned(), value.to_vec(), expiry(&*self.clock, ttl));
        self.db
            .call(move |c| write(c, &key, Some(&value), exp))
            .await
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        validate_key(key)?;
        let key = key.to_owned();
        self.db.call(move |c| write(c, &key, None, None)).await
    }

    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>, PortError> {
        // Every key sorts after "": the whole prefix.
        self.list_after(prefix, "", limit).await
    }

    async fn list_after(
        &self,
        prefix: &str,
        after: &str,
        limit: usize,
    ) -> Result<Vec<String>, PortError> {
        self.listing(sql::kv::LIST_AFTER, (prefix, after, limit), |row| {
            let key = read_bytes(row.get_value(0).map_err(db_err)?);
            Ok(key.map(|k| String::from_utf8_lossy(&k).into_owned()))
        })
        .await
    }

    async fn scan(
        &self,
        prefix: &str,
        after: &str,
        limit: usize,
    ) -> Result<Vec<KvEntry>, PortError> {
        self.listing(sql::kv::SCAN, (prefix, after, limit), |row| {
            let key = read_bytes(row.get_value(0).map_err(db_err)?);
            let value = read_bytes(row.get_value(1).map_err(db_err)?);
            let exp = read_i64(row.get_value(2).map_err(db_err)?);
            Ok(key.zip(value).map(|(key, value)| KvEntry {
                key: String::from_utf8_lossy(&key).into_owned(),
                value,
                expires_at_ms: exp.map(|e| e.max(0) as u64),
            }))
        })
        .await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        ttl: Option<Duration>,
    ) -> Result<bool, PortError> {
        validate_key(key)?;
        let (key, now, exp) = (
            key.to_owned(),
            self.clock.now_ms(),
            expiry(&*self.clock, ttl),
        );
        let (expected, new) = (expected.map(<[u8]>::to_vec), new.map(<[u8]>::to_vec));
        // Atomic: one closure at a time holds the connection.
        self.db
            .call(move |c| {
                if current(c, &key, now)? != expected {
                    return Ok(false);
                }
                write(c, &key, new.as_deref(), exp)?;
                Ok(true)
            })
            .await
    }

    async fn purge_expired(&self) -> Result<u64, PortError> {
        let now = self.clock.now_ms() as i64;
        self.db
            .call_heavy(move |c| {
                block_on(c.execute(sql::kv::PURGE_EXPIRED, params![now])).map_err(db_err)
            })
            .await
    }
}
