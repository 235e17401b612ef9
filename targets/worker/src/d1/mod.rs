//! Kv, Files, TextIndex and (when no Vectorize index is bound) Vectors over one D1 database:
//! the database handle, its schema and the row helpers here, one port per file ([`kv`],
//! [`files`], [`text`], [`vectors`]).
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
use std::sync::Arc;

use clawless_platform::sql;
use clawless_platform::text::fts5_sql;
use clawless_platform::{PortError, Result};
use js_sys::{Array, ArrayBuffer, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use worker::send::SendFuture;
use worker::{D1Database, D1PreparedStatement};

pub mod files;
pub mod kv;
pub mod text;
pub mod vectors;

pub use files::{D1Files, MAX_FILE_BYTES};
pub use kv::D1Kv;
pub use text::D1Text;
pub use vectors::D1Vectors;

/// The schema, checked by each isolate on first use ([`D1::ensure_schema`]). The Kv table and
/// the text index are the ones native has too ([`sql::kv`], [`fts5_sql`]). Every statement is a
/// `CREATE … IF NOT EXISTS <name>` ([`created_name`]).
pub const SCHEMA: &[&str] = &[
    sql::kv::SCHEMA,
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, data BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vectors (id TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec BLOB NOT NULL, metadata TEXT NOT NULL)",
    fts5_sql::SCHEMA[0],
    fts5_sql::SCHEMA[1],
];

/// Those of a JSON array of table and index names (`?1`) that exist.
const PRESENT: &str =
    "SELECT name FROM sqlite_master WHERE name IN (SELECT value FROM json_each(?1))";

/// The table or index a `CREATE … IF NOT EXISTS <name> …` statement makes.
pub fn created_name(statement: &str) -> Option<&str> {
    let (_, rest) = statement.split_once(" IF NOT EXISTS ")?;
    rest.split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .filter(|n| !n.is_empty())
}

/// Statements this isolate has sent to D1 (feature `test-routes` only): the test build's
/// webhook reports how many its ack sent (see `events::webhook`), which a workerd test holds
/// to two.
#[cfg(feature = "test-routes")]
pub static STATEMENTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts `n` statements sent (test builds only).
fn sent(n: usize) {
    #[cfg(feature = "test-routes")]
    STATEMENTS.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    let _ = n;
}

/// D1 queries one Worker invocation may make where it may make `subrequests` outbound
/// requests: D1's "Queries per Worker invocation", 50 on the free plan and 1,000 on Workers
/// Paid (<https://developers.cloudflare.com/d1/platform/limits/>), more subrequests than the
/// free plan's 50 meaning Workers Paid. Each adapter call is about one query (see
/// `clawless_core::allowance`, which counts them).
pub fn queries_per_invocation(subrequests: u64) -> u64 {
    match subrequests > 50 {
        false => 50,
        true => 1_000,
    }
}

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
    /// current one. A cold isolate pays one read when there is nothing to do (every name the
    /// schema creates is there, and no legacy table): the `CREATE`s are a write batch, which
    /// every isolate sent before.
    pub async fn ensure_schema(&self) -> Result<()> {
        let wanted: Vec<&str> = SCHEMA.iter().filter_map(|s| created_name(s)).collect();
        let asked = [wanted.as_slice(), &[fts5_sql::LEGACY_TABLE]].concat();
        let listed = serde_json::to_string(&asked).unwrap_or_default();
        let rows = self.rows(PRESENT, &[Arg::Text(&listed)]).await?;
        let present: Vec<String> = rows
            .iter()
            .filter_map(|r| r.first().and_then(Cell::text))
            .collect();
        let has = |name: &&str| present.iter().any(|p| p == name);
        if wanted.iter().all(has) && !has(&fts5_sql::LEGACY_TABLE) {
            return Ok(());
        }
        self.batch(SCHEMA.iter().map(|s| (*s, Vec::new())).collect())
            .await?;
        self.migrate_text_index().await
    }

    async fn has_table(&self, name: &str) -> Result<bool> {
        let rows = self.rows(sql::HAS_TABLE, &[Arg::Text(name)]).await?;
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
        sent(1);
        let result = SendFuture::new(stmt.run()).await.map_err(d1_err)?;
        let meta = result.meta().map_err(d1_err)?;
        Ok(meta.and_then(|m| m.changes).unwrap_or(0))
    }

    /// Runs a query; its rows as cells.
    pub async fn rows(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Vec<Cell>>> {
        let stmt = self.prepare(sql, args)?;
        sent(1);
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
        sent(prepared.len());
        SendFuture::new(self.db.batch(prepared))
            .await
            .map(drop)
            .map_err(d1_err)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_free_plan_makes_fifty_queries_an_invocation_workers_paid_a_thousand() {
        assert_eq!(queries_per_invocation(50), 50);
        assert_eq!(queries_per_invocation(20), 50);
        assert_eq!(queries_per_invocation(10_000), 1_000);
    }

    #[test]
    fn every_schema_statement_names_what_it_creates() {
        let names: Vec<&str> = SCHEMA.iter().filter_map(|s| created_name(s)).collect();
        assert_eq!(names, ["kv", "files", "vectors", "text_docs", "text_body"]);
        assert_eq!(
            created_name("CREATE INDEX IF NOT EXISTS kv_expiry ON kv (expires_at)"),
            Some("kv_expiry")
        );
        assert_eq!(created_name("CREATE TABLE t (x)"), None);
    }
}
