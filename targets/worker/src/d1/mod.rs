//! Kv, Files, TextIndex and (when no Vectorize index is bound) Vectors over one D1 database.
//!
//! Why D1 and not Workers KV for the Kv port: the inbox needs an atomic compare-and-swap (dedupe
//! markers, per-chat leases) and read-your-writes; Workers KV has neither (eventually
//! consistent, last write wins, 1 write/s per key) and its free plan allows 1,000 writes a day,
//! which one busy chat would spend before lunch. Every D1 statement is atomic and runs on the
//! primary, so a conditional `UPDATE`/`INSERT … ON CONFLICT … WHERE` is a real CAS. Files live
//! in D1 too (memory files are small; `data = data || ?` appends atomically, which R2 cannot, and
//! R2 needs a payment method even on the free plan). See ARCHITECTURE.md.
//!
//! Rows are read with `raw()` and decoded by hand ([`Cell`]) instead of through serde: smaller
//! wasm and no surprises with how D1 hands back BLOBs (an `Array` of numbers).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::files::{normalize, normalize_dir};
use clawless_platform::kv::validate_key;
use clawless_platform::text::{fts5_query, fts5_sql, rank_text};
use clawless_platform::vectors::{cosine, from_blob, matches, rank, to_blob, validate_vector};
use clawless_platform::{
    Clock, Files, Kv, PortError, Result, TextDoc, TextHit, TextIndex, VectorHit, VectorRecord,
    Vectors,
};
use js_sys::{Array, ArrayBuffer, Uint8Array};
use std::sync::Arc;
use wasm_bindgen::{JsCast, JsValue};
use worker::send::SendFuture;
use worker::{D1Database, D1PreparedStatement};

/// The schema, created on first use by each isolate (`IF NOT EXISTS`: one cheap round trip).
/// The text index is in the layout shared with native ([`fts5_sql`]).
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER)",
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, data BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vectors (id TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec BLOB NOT NULL, metadata TEXT NOT NULL)",
    fts5_sql::SCHEMA[0],
    fts5_sql::SCHEMA[1],
];

/// One D1 database shared by the adapters.
#[derive(Clone)]
pub struct D1 {
    db: Arc<D1Database>,
}

fn d1_err(e: worker::Error) -> PortError {
    PortError::unavailable(format!("d1: {e}"))
}

/// A bound statement argument.
pub enum Arg<'a> {
    Text(&'a str),
    Blob(&'a [u8]),
    Int(i64),
    Null,
}

impl Arg<'_> {
    fn js(&self) -> JsValue {
        match self {
            Arg::Text(s) => JsValue::from_str(s),
            // D1 stores an ArrayBuffer as a BLOB.
            Arg::Blob(b) => Uint8Array::from(*b).buffer().into(),
            Arg::Int(i) => JsValue::from_f64(*i as f64),
            Arg::Null => JsValue::NULL,
        }
    }
}

/// One value of a result row.
pub struct Cell(JsValue);

impl Cell {
    pub fn text(&self) -> Option<String> {
        self.0.as_string()
    }
    pub fn int(&self) -> Option<i64> {
        self.0.as_f64().map(|f| f as i64)
    }
    pub fn float(&self) -> Option<f64> {
        self.0.as_f64()
    }
    /// A BLOB (an `Array` of numbers from D1, or a buffer), or a TEXT's UTF-8 bytes.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        if let Some(s) = self.0.as_string() {
            return Some(s.into_bytes());
        }
        if let Some(a) = self.0.dyn_ref::<Uint8Array>() {
            return Some(a.to_vec());
        }
        if let Some(b) = self.0.dyn_ref::<ArrayBuffer>() {
            return Some(Uint8Array::new(b).to_vec());
        }
        let array = self.0.dyn_ref::<Array>()?;
        Some(
            array
                .iter()
                .map(|v| v.as_f64().unwrap_or(0.0) as u8)
                .collect(),
        )
    }
}

impl D1 {
    pub fn new(db: D1Database) -> Self {
        Self { db: Arc::new(db) }
    }

    fn prepare(&self, sql: &str, args: &[Arg<'_>]) -> Result<D1PreparedStatement> {
        let values: Vec<JsValue> = args.iter().map(Arg::js).collect();
        self.db.prepare(sql).bind(&values).map_err(d1_err)
    }

    /// Creates the tables if missing, and moves a text index of the first layout into the
    /// current one.
    pub async fn ensure_schema(&self) -> Result<()> {
        self.batch(SCHEMA.iter().map(|s| (*s, Vec::new())).collect())
            .await?;
        self.migrate_text_index().await
    }

    async fn has_table(&self, name: &str) -> Result<bool> {
        let rows = self
            .rows(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                &[Arg::Text(name)],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// A database from before the [`fts5_sql`] layout keeps its documents (so the manifests
    /// that name them stay true): one batch moves them over and drops the old table. Two
    /// isolates may try at once; the batch is a transaction, and the loser finds it done.
    async fn migrate_text_index(&self) -> Result<()> {
        if !self.has_table(fts5_sql::LEGACY_TABLE).await? {
            return Ok(());
        }
        let statements = fts5_sql::MIGRATE_LEGACY
            .iter()
            .map(|s| (*s, Vec::new()))
            .collect();
        match self.batch(statements).await {
            Ok(()) => Ok(()),
            Err(_) if !self.has_table(fts5_sql::LEGACY_TABLE).await? => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Runs a statement; the number of rows it changed.
    pub async fn run(&self, sql: &str, args: &[Arg<'_>]) -> Result<usize> {
        let stmt = self.prepare(sql, args)?;
        let result = SendFuture::new(stmt.run()).await.map_err(d1_err)?;
        let meta = result.meta().map_err(d1_err)?;
        Ok(meta.and_then(|m| m.changes).unwrap_or(0))
    }

    /// Runs a query; its rows as cells.
    pub async fn rows(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Vec<Cell>>> {
        let stmt = self.prepare(sql, args)?;
        let rows = SendFuture::new(stmt.raw_js_value()).await.map_err(d1_err)?;
        Ok(rows
            .into_iter()
            .map(|row| match row.dyn_into::<Array>() {
                Ok(a) => a.iter().map(Cell).collect(),
                Err(_) => Vec::new(),
            })
            .collect())
    }

    /// Runs several statements in one round trip, atomically (a D1 batch is a transaction).
    pub async fn batch(&self, statements: Vec<(&str, Vec<Arg<'_>>)>) -> Result<()> {
        let prepared = statements
            .iter()
            .map(|(sql, args)| self.prepare(sql, args))
            .collect::<Result<Vec<_>>>()?;
        if prepared.is_empty() {
            return Ok(());
        }
        SendFuture::new(self.db.batch(prepared))
            .await
            .map(drop)
            .map_err(d1_err)
    }
}

/// Kv over the `kv` table; expiry checked on read by the platform clock.
pub struct D1Kv {
    pub d1: D1,
    pub clock: Arc<dyn Clock>,
}

impl D1Kv {
    fn expiry(&self, ttl: Option<Duration>) -> Arg<'static> {
        match ttl {
            Some(t) => Arg::Int((self.clock.now_ms() + t.as_millis() as u64) as i64),
            None => Arg::Null,
        }
    }

    fn now(&self) -> Arg<'static> {
        Arg::Int(self.clock.now_ms() as i64)
    }

    /// Deletes expired rows (run by the scheduled job); how many went.
    pub async fn purge_expired(&self) -> Result<usize> {
        self.d1
            .run(
                "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                &[self.now()],
            )
            .await
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
                "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                &[Arg::Text(key), Arg::Blob(value), self.expiry(ttl)],
            )
            .await
            .map(drop)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        self.d1
            .run("DELETE FROM kv WHERE key = ?1", &[Arg::Text(key)])
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
                "SELECT key FROM kv WHERE key >= ?1 AND key > ?4 AND substr(key, 1, length(?1)) = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY key LIMIT ?3",
                &[Arg::Text(prefix), self.now(), Arg::Int(limit as i64), Arg::Text(after)],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.first().and_then(Cell::text))
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
}

/// Files over the `files` table (a row per file; append is one atomic `||`).
pub struct D1Files(pub D1);

/// D1 refuses rows over 2 MB; memory files stay far below.
pub const MAX_FILE_BYTES: usize = 1_900_000;

fn check_size(len: usize) -> Result<()> {
    if len > MAX_FILE_BYTES {
        return Err(PortError::invalid(format!(
            "file of {len} bytes is over the {MAX_FILE_BYTES}-byte limit"
        )));
    }
    Ok(())
}

#[async_trait]
impl Files for D1Files {
    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        let path = normalize(path)?;
        let rows = self
            .0
            .rows(
                "SELECT data FROM files WHERE path = ?1",
                &[Arg::Text(&path)],
            )
            .await?;
        rows.first()
            .and_then(|r| r.first())
            .and_then(Cell::bytes)
            .ok_or_else(|| PortError::not_found(path))
    }

    async fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        let path = normalize(path)?;
        check_size(data.len())?;
        self.0
            .run(
                "INSERT INTO files (path, data) VALUES (?1, ?2) ON CONFLICT(path) DO UPDATE SET data = excluded.data",
                &[Arg::Text(&path), Arg::Blob(data)],
            )
            .await
            .map(drop)
    }

    async fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        let path = normalize(path)?;
        check_size(data.len())?;
        self.0
            .run(
                "INSERT INTO files (path, data) VALUES (?1, ?2) ON CONFLICT(path) DO UPDATE SET data = CAST(files.data || excluded.data AS BLOB)",
                &[Arg::Text(&path), Arg::Blob(data)],
            )
            .await
            .map(drop)
    }

    async fn list(&self, dir: &str) -> Result<Vec<String>> {
        let dir = normalize_dir(dir)?;
        let prefix = if dir.is_empty() {
            dir
        } else {
            format!("{dir}/")
        };
        let rows = self
            .0
            .rows(
                "SELECT path FROM files WHERE substr(path, 1, length(?1)) = ?1 ORDER BY path",
                &[Arg::Text(&prefix)],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.first().and_then(Cell::text))
            .collect())
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let path = normalize(path)?;
        self.0
            .run("DELETE FROM files WHERE path = ?1", &[Arg::Text(&path)])
            .await
            .map(drop)
    }
}

fn metadata_of(cell: Option<&Cell>) -> BTreeMap<String, String> {
    cell.and_then(Cell::text)
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn metadata_json(metadata: &BTreeMap<String, String>) -> Result<String> {
    serde_json::to_string(metadata).map_err(|e| PortError::invalid(e.to_string()))
}

/// TextIndex over D1's FTS5 in the layout shared with native ([`fts5_sql`]), ranked by its
/// `bm25()`. Each call is one batch, so one transaction.
pub struct D1Text(pub D1);

impl D1Text {
    /// Runs each of `statements` with each of `params` (one `?1` each), in one batch.
    async fn run_grouped(&self, statements: &[&str], params: &[String]) -> Result<()> {
        let batch = params
            .iter()
            .flat_map(|p| statements.iter().map(move |sql| (*sql, vec![Arg::Text(p)])))
            .collect();
        self.0.batch(batch).await
    }
}

#[async_trait]
impl TextIndex for D1Text {
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<()> {
        let params = fts5_sql::upsert_params(&docs)?;
        self.run_grouped(&fts5_sql::UPSERT, &params).await
    }

    async fn search(
        &self,
        query: &str,
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<TextHit>> {
        let Some(q) = fts5_query(query) else {
            return Ok(Vec::new());
        };
        let rows = self.0.rows(fts5_sql::SEARCH, &[Arg::Text(&q)]).await?;
        let mut hits = Vec::new();
        for row in &rows {
            let metadata = metadata_of(row.get(1));
            if !matches(&metadata, filter) {
                continue;
            }
            // bm25() is lower-is-better and negative; the port's score is positive.
            let score = -(row.get(2).and_then(Cell::float).unwrap_or(0.0) as f32);
            hits.push(TextHit {
                id: row.first().and_then(Cell::text).unwrap_or_default(),
                score: score.max(f32::MIN_POSITIVE),
                metadata,
            });
        }
        Ok(rank_text(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<()> {
        let params = fts5_sql::ids_params(ids);
        self.run_grouped(&fts5_sql::DELETE, &params).await
    }
}

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
                    "INSERT INTO vectors (id, dim, vec, metadata) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(id) DO UPDATE SET dim = excluded.dim, vec = excluded.vec, metadata = excluded.metadata",
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
        let rows = self
            .0
            .rows("SELECT id, vec, metadata FROM vectors", &[])
            .await?;
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
            .map(|id| ("DELETE FROM vectors WHERE id = ?1", vec![Arg::Text(id)]))
            .collect();
        self.0.batch(statements).await
    }
}
