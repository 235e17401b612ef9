//! libsql on disk: the Kv, Vectors and TextIndex (FTS5) ports.
//!
//! libsql's local "async" API blocks the calling thread, so one dedicated thread owns the
//! connection and runs every statement; callers send it closures and await the answer. That
//! one thread also makes compare-and-swap atomic without explicit transactions.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use clawless_platform::kv::{expiry, validate_key};
use clawless_platform::text::{fts5_query, rank_text};
use clawless_platform::vectors::{cosine, from_blob, matches, rank, to_blob, validate_vector};
use clawless_platform::{
    async_trait, Clock, Kv, PortError, TextDoc, TextHit, TextIndex, VectorHit, VectorRecord,
    Vectors,
};
use futures::executor::block_on;

use crate::vecindex::{candidates, Mirror};
use libsql::{params, Connection, Value};

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// A handle to the database thread. Cloning shares the thread.
#[derive(Clone)]
pub struct Db {
    tx: mpsc::Sender<Job>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER);
CREATE TABLE IF NOT EXISTS vectors (id TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec F32_BLOB NOT NULL, metadata TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS text_fts USING fts5(id UNINDEXED, body, metadata UNINDEXED, tokenize = 'unicode61');
";

fn db_err(e: libsql::Error) -> PortError {
    PortError::unavailable(format!("libsql: {e}"))
}

impl Db {
    /// Opens (creating) the database at `path` (`:memory:` for a private in-memory one).
    pub fn open(path: &str) -> Result<Db, PortError> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), PortError>>();
        let path = path.to_owned();
        std::thread::Builder::new()
            .name("libsql".into())
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
                    conn.execute_batch(SCHEMA).await.map_err(db_err)?;
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

impl Db {
    /// Runs `sql` (one `?1` parameter) once per id.
    async fn delete_ids(&self, sql: &'static str, ids: &[String]) -> Result<(), PortError> {
        let ids = ids.to_vec();
        self.call(move |c| {
            block_on(async {
                for id in ids {
                    c.execute(sql, params![id]).await.map_err(db_err)?;
                }
                Ok(())
            })
        })
        .await
    }
}

fn read_bytes(v: Value) -> Option<Vec<u8>> {
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
        let (prefix, now) = (prefix.to_owned(), self.clock.now_ms() as i64);
        let limit = limit.min(i64::MAX as usize) as i64;
        self.db
            .call(move |c| {
                block_on(async {
                    let mut rows = c
                        .query(
                            "SELECT key FROM kv WHERE key >= ?1 AND substr(key, 1, length(?1)) = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY key LIMIT ?3",
                            params![prefix, now, limit],
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

/// Vectors over the `vectors` table: each vector an `F32_BLOB` (libsql's f32 vector format:
/// little-endian floats, so `vector_distance_cos` works on it in SQL), searched through an
/// int8 [`Mirror`] loaded on first use and kept in step by every write, with the candidates
/// re-ranked exactly from their rows. One process owns a data directory, so the mirror cannot
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
        let mut rows = c
            .query("SELECT id, vec, metadata FROM vectors", ())
            .await
            .map_err(db_err)?;
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

/// Runs `body` inside one IMMEDIATE transaction, rolled back if it fails.
fn in_transaction(
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

#[async_trait]
impl Vectors for SqlVectors {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<(), PortError> {
        let mirror = self.mirror.clone();
        self.db
            .call(move |c| {
                ensure_loaded(c, &mirror)?;
                let mut dim = lock(&mirror).as_ref().and_then(|m| (m.dim > 0).then_some(m.dim));
                for r in &records {
                    validate_vector(&r.vector, dim)?;
                    dim = Some(r.vector.len());
                }
                in_transaction(c, || {
                    block_on(async {
                        for r in &records {
                            let meta = serde_json::to_string(&r.metadata).map_err(|e| PortError::invalid(e.to_string()))?;
                            c.execute(
                                "INSERT INTO vectors (id, dim, vec, metadata) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(id) DO UPDATE SET dim = excluded.dim, vec = excluded.vec, metadata = excluded.metadata",
                                vec![Value::Text(r.id.clone()), Value::Integer(r.vector.len() as i64), Value::Blob(to_blob(&r.vector)), Value::Text(meta)],
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
        let (vector, filter, mirror) = (vector.to_vec(), filter.clone(), self.mirror.clone());
        self.db
            .call(move |c| {
                ensure_loaded(c, &mirror)?;
                let ids = {
                    let guard = lock(&mirror);
                    let Some(m) = guard.as_ref().filter(|m| !m.is_empty()) else {
                        return Ok(Vec::new());
                    };
                    validate_vector(&vector, Some(m.dim))?;
                    m.scan(&vector, candidates(top_k), &filter)
                };
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
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
            .call(move |c| {
                in_transaction(c, || {
                    block_on(async {
                        for id in &ids {
                            c.execute("DELETE FROM vectors WHERE id = ?1", params![id.clone()])
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

/// TextIndex over an FTS5 table, ranked by FTS5's own `bm25()`.
pub struct SqlText {
    db: Db,
}

impl SqlText {
    pub fn new(db: Db) -> Self {
        Self { db }
    }
}

#[async_trait]
impl TextIndex for SqlText {
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<(), PortError> {
        self.db
            .call(move |c| {
                block_on(async {
                    for d in &docs {
                        let meta = serde_json::to_string(&d.metadata)
                            .map_err(|e| PortError::invalid(e.to_string()))?;
                        c.execute("DELETE FROM text_fts WHERE id = ?1", params![d.id.clone()])
                            .await
                            .map_err(db_err)?;
                        c.execute(
                            "INSERT INTO text_fts (id, body, metadata) VALUES (?1, ?2, ?3)",
                            params![d.id.clone(), d.text.clone(), meta],
                        )
                        .await
                        .map_err(db_err)?;
                    }
                    Ok(())
                })
            })
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
                        .query("SELECT id, metadata, bm25(text_fts) FROM text_fts WHERE text_fts MATCH ?1", params![q])
                        .await
                        .map_err(db_err)?;
                    let mut hits = Vec::new();
                    while let Some(row) = rows.next().await.map_err(db_err)? {
                        let id = read_bytes(row.get_value(0).map_err(db_err)?).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
                        let meta = read_bytes(row.get_value(1).map_err(db_err)?).unwrap_or_default();
                        let metadata: BTreeMap<String, String> = serde_json::from_slice(&meta).unwrap_or_default();
                        // bm25() is lower-is-better and negative; the port's score is positive.
                        let rank = match row.get_value(2).map_err(db_err)? {
                            Value::Real(r) => -r as f32,
                            Value::Integer(i) => -i as f32,
                            _ => 0.0,
                        };
                        if matches(&metadata, &filter) {
                            hits.push(TextHit { id, score: rank.max(f32::MIN_POSITIVE), metadata });
                        }
                    }
                    Ok(rank_text(hits, top_k))
                })
            })
            .await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), PortError> {
        self.db
            .delete_ids("DELETE FROM text_fts WHERE id = ?1", ids)
            .await
    }
}
