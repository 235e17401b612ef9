//! libsql on disk: the database thread ([`Db`]) and the Kv port over it.
//!
//! libsql's local "async" API blocks the calling thread, so one dedicated thread per database
//! file owns the connection and runs every statement; callers send it closures and await the
//! answer. That one thread also makes compare-and-swap atomic without explicit transactions.
//! The Kv (`clawless.db`) and the memory index ([`crate::index`], `index.db`) are two files
//! with a thread each, so indexing never holds up the inbox's writes (the webhook ack).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use clawless_platform::kv::{expiry, validate_key};
use clawless_platform::{async_trait, Clock, Kv, PortError};
use futures::executor::block_on;

use libsql::{params, Connection, Value};

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// A handle to the database thread. Cloning shares the thread.
#[derive(Clone)]
pub struct Db {
    tx: mpsc::Sender<Job>,
}

/// The Kv database's schema.
pub const KV_SCHEMA: [&str; 1] = [
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER)",
];

pub(crate) fn db_err(e: libsql::Error) -> PortError {
    PortError::unavailable(format!("libsql: {e}"))
}

impl Db {
    /// Opens (creating) the database at `path` (`:memory:` for a private in-memory one) on a
    /// thread of its own, and runs the `schema` statements on it.
    pub fn open(path: &str, schema: &[&str]) -> Result<Db, PortError> {
        let schema: Vec<String> = schema.iter().map(|s| (*s).to_owned()).collect();
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), PortError>>();
        let path = path.to_owned();
        let file = std::path::Path::new(&path)
            .file_name()
            .map_or_else(|| path.clone(), |f| f.to_string_lossy().into_owned());
        std::thread::Builder::new()
            .name(format!("libsql {file}"))
            .spawn(move || {
                let opened = block_on(async {
                    let db = libsql::Builder::new_local(&path)
                        .build()
                        .await
                        .map_err(db_err)?;
                    let conn = db.connect().map_err(db_err)?;
                    conn.query("PRAGMA busy_timeout=5000", ())
                        .await
                        .map_err(db_err)?;
                    // 16 KB pages (new databases only): a 1.5 KB vector row wastes a third
                    // of a 4 KB page, and a few percent of a 16 KB one.
                    conn.execute("PRAGMA page_size=16384", ())
                        .await
                        .map_err(db_err)?;
                    if path != ":memory:" {
                        conn.query("PRAGMA journal_mode=WAL", ())
                            .await
                            .map_err(db_err)?;
                        conn.execute("PRAGMA synchronous=NORMAL", ())
                            .await
                            .map_err(db_err)?;
                    }
                    for statement in &schema {
                        conn.execute(statement, ()).await.map_err(db_err)?;
                    }
                    Ok::<_, PortError>((db, conn))
                });
                match opened {
                    Ok((_db, conn)) => {
                        let _ = ready_tx.send(Ok(()));
                        while let Ok(job) = rx.recv() {
                            job(&conn);
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| PortError::unavailable(format!("libsql thread: {e}")))?;
        ready_rx
            .recv()
            .map_err(|_| PortError::unavailable("libsql thread died"))??;
        Ok(Db { tx })
    }

    /// Runs `f` on the database thread.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, PortError> + Send + 'static,
    ) -> Result<R, PortError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = tx.send(f(conn));
        });
        self.tx
            .send(job)
            .map_err(|_| PortError::unavailable("libsql thread stopped"))?;
        rx.await
            .map_err(|_| PortError::unavailable("libsql thread dropped the call"))?
    }
}

pub(crate) fn read_bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::Blob(b) => Some(b),
        Value::Text(t) => Some(t.into_bytes()),
        _ => None,
    }
}

fn read_i64(v: Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(i),
        _ => None,
    }
}

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
                let exp = expires.map(|e| Value::Integer(e as i64)).unwrap_or(Value::Null);
                conn.execute(
                    "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                    vec![Value::Text(key.to_owned()), Value::Blob(v.to_vec()), exp],
                )
                .await
            }
            None => conn.execute("DELETE FROM kv WHERE key = ?1", params![key]).await,
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

    /// The database thread this Kv runs on.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Deletes expired rows; returns how many.
    pub async fn purge_expired(&self) -> Result<u64, PortError> {
        let now = self.clock.now_ms() as i64;
        self.db
            .call(move |c| {
                block_on(c.execute(
                    "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                    params![now],
                ))
                .map_err(db_err)
            })
            .await
    }
}

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
        let (prefix, after) = (prefix.to_owned(), after.to_owned());
        let now = self.clock.now_ms() as i64;
        let limit = limit.min(i64::MAX as usize) as i64;
        self.db
            .call(move |c| {
                block_on(async {
                    let mut rows = c
                        .query(
                            "SELECT key FROM kv WHERE key >= ?1 AND key > ?4 AND substr(key, 1, length(?1)) = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY key LIMIT ?3",
                            params![prefix, now, limit, after],
                        )
                        .await
                        .map_err(db_err)?;
                    let mut out = Vec::new();
                    while let Some(row) = rows.next().await.map_err(db_err)? {
                        if let Some(k) = read_bytes(row.get_value(0).map_err(db_err)?) {
                            out.push(String::from_utf8_lossy(&k).into_owned());
                        }
                    }
                    Ok(out)
                })
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
        // Atomic: the database thread runs one closure at a time.
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
}

/// Runs `body` inside one IMMEDIATE transaction, rolled back if it fails.
pub(crate) fn in_transaction(
    c: &Connection,
    body: impl FnOnce() -> Result<(), PortError>,
) -> Result<(), PortError> {
    block_on(c.execute("BEGIN IMMEDIATE", ())).map_err(db_err)?;
    match body() {
        Ok(()) => block_on(c.execute("COMMIT", ())).map(drop).map_err(db_err),
        Err(e) => {
            let _ = block_on(c.execute("ROLLBACK", ()));
            Err(e)
        }
    }
}
