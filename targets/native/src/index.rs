//! The memory index on libsql: `index.db`, a database file of its own with its own
//! connection (indexing on the blocking pool), apart from the Kv's `clawless.db`, holding the
//! Vectors and TextIndex (FTS5) ports ([`crate::store::vectors`], [`crate::store::text`]):
//! indexing a large memory file never holds the connection or the write lock the webhook ack
//! needs. The index is only a search layer over the memory files; [`open`] starts it over
//! (empty, and the core's manifests forgotten) when the file is new.

use std::path::Path;

use clawless_platform::sql;
use clawless_platform::text::fts5_sql;
use clawless_platform::{Kv, PortError};
use futures::executor::block_on;
use libsql::params;

use crate::store::{db_err, Db};

/// The index database's schema: the vectors table, then [`fts5_sql::SCHEMA`].
pub fn schema() -> Vec<&'static str> {
    let vectors = "CREATE TABLE IF NOT EXISTS vectors (id TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec F16_BLOB NOT NULL, metadata TEXT NOT NULL)";
    std::iter::once(vectors).chain(fts5_sql::SCHEMA).collect()
}

/// Opens an index database at `path` (`:memory:` for a private one) with no migration: tests
/// and benchmarks.
pub fn open_db(path: &str) -> Result<Db, PortError> {
    // 16 KB pages (new files only): a 1.5 KB vector row wastes a third of a 4 KB page, and a
    // few percent of a 16 KB one.
    Db::open_paged(path, &schema(), Some(16_384))
}

/// The index tables older versions kept in the Kv database.
const LEGACY_TABLES: [&str; 2] = ["vectors", fts5_sql::LEGACY_TABLE];

/// Opens the memory index at `path` beside the Kv database `kv_db` (whose Kv port is `kv`).
/// When the file does not exist yet (a new install, an install from before the index had a
/// file of its own, or an index deleted to rebuild it), first every manifest is forgotten, so
/// the next scheduled re-index indexes every memory file into it, and the index tables older
/// versions kept in the Kv database are dropped. In that order: a crash in between repeats
/// the work at the next start, and never leaves manifests claiming an index that is not there.
pub async fn open(path: &Path, kv_db: &Db, kv: &dyn Kv) -> Result<Db, PortError> {
    if !path.exists() {
        let forgotten = clawless_core::memory::store::forget_index(kv).await?;
        let dropped = drop_legacy_tables(kv_db).await?;
        tracing::info!(
            path = %path.display(),
            manifests = forgotten,
            legacy_tables = dropped,
            "new memory index: every memory file is indexed again"
        );
    }
    open_db(&path.to_string_lossy())
}

/// Drops the index tables older versions kept in the Kv database, and compacts the file if
/// there were any; returns how many were dropped.
pub async fn drop_legacy_tables(kv_db: &Db) -> Result<usize, PortError> {
    kv_db
        .call_heavy(|c| {
            block_on(async {
                let mut dropped = 0;
                for table in LEGACY_TABLES {
                    let mut rows = c
                        .query(sql::HAS_TABLE, params![table])
                        .await
                        .map_err(db_err)?;
                    if rows.next().await.map_err(db_err)?.is_some() {
                        drop(rows);
                        c.execute(&format!("DROP TABLE {table}"), ())
                            .await
                            .map_err(db_err)?;
                        dropped += 1;
                    }
                }
                if dropped > 0 {
                    c.execute("VACUUM", ()).await.map_err(db_err)?;
                }
                Ok(dropped)
            })
        })
        .await
}

#[cfg(test)]
mod tests;
