//! libsql on disk: the database handle ([`Db`]) every libsql adapter runs its statements
//! through, the helpers they share, and the adapters, one port per file: [`kv`]
//! (`clawless.db`), [`vectors`] and [`text`] (the memory index, `index.db`, opened by
//! [`crate::index`]).
//!
//! libsql's local "async" API blocks the calling thread. One connection per database file,
//! behind a mutex, runs every statement; holding it makes compare-and-swap atomic without
//! explicit transactions. A small call (a Kv row, a short listing, a search's rows: tens to
//! hundreds of microseconds) runs right on the calling task's thread, waiting there for
//! another small call to end ([`Db::call`]); a heavy one (purges, long scans, indexing,
//! loading the vectors) runs on tokio's blocking pool ([`Db::call_heavy`]), and a small call
//! that finds a heavy one holding the connection waits there too. A hop to a thread of the
//! database's own cost about 0.1 ms per call on this project's machine (two thread wake-ups),
//! more than the statement, and a turn makes about thirty. The Kv (`clawless.db`) and the
//! memory index (`index.db`) are two files with a connection each, so indexing never holds up
//! the inbox's writes (the webhook ack).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use clawless_platform::PortError;
use futures::executor::block_on;

use libsql::{Connection, Value};

pub mod kv;
pub mod text;
pub mod vectors;

pub use kv::{SqlKv, KV_SCHEMA};
pub use text::SqlText;
pub use vectors::SqlVectors;

/// One database file's connection, and how many heavy calls hold it or wait for it.
struct Shared {
    conn: Mutex<Connection>,
    heavy: AtomicUsize,
}

/// A handle to one database file's connection. Cloning shares it.
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
    /// Keeps the database open as long as a handle lives.
    _db: Arc<libsql::Database>,
}

pub(crate) fn db_err(e: libsql::Error) -> PortError {
    PortError::unavailable(format!("libsql: {e}"))
}

/// The connection, also after a statement panicked while holding it (the mutex is then
/// poisoned; SQLite's own state is still whole: an open transaction is rolled back by the
/// next `BEGIN` failing, see [`in_transaction`]).
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Counts a heavy call from before it takes the connection until dropped (also when the call
/// panics): a small call that finds the connection taken while the count is zero is behind
/// another small call, never behind a heavy one that took it a moment before marking it.
struct Heavy<'a>(&'a AtomicUsize);

impl<'a> Heavy<'a> {
    fn mark(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Heavy(count)
    }
}

impl Drop for Heavy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Db {
    /// Opens (creating) the database at `path` (`:memory:` for a private in-memory one) and
    /// runs the `schema` statements on it. SQLite's 4 KB pages: each commit writes every page
    /// it changed to the WAL, and the Kv's rows are small.
    pub fn open(path: &str, schema: &[&str]) -> Result<Db, PortError> {
        Self::open_paged(path, schema, None)
    }

    /// [`Db::open`] with pages of `page_size` bytes when the file is new, read through a
    /// memory map (the memory index: 16 KB, see [`crate::index`]).
    pub fn open_paged(
        path: &str,
        schema: &[&str],
        page_size: Option<u32>,
    ) -> Result<Db, PortError> {
        let (db, conn) = block_on(async {
            let db = libsql::Builder::new_local(path)
                .build()
                .await
                .map_err(db_err)?;
            let conn = db.connect().map_err(db_err)?;
            conn.query("PRAGMA busy_timeout=5000", ())
                .await
                .map_err(db_err)?;
            if let Some(bytes) = page_size {
                conn.execute(&format!("PRAGMA page_size={bytes}"), ())
                    .await
                    .map_err(db_err)?;
            }
            // The memory index is read through a memory map (up to 1 GiB of it): a search
            // reads its candidates' rows at random, and through `read` each cost a system
            // call and a 16 KB copy (at 100k vectors, 0.32 ms for 20 rows; mapped, 0.23).
            if page_size.is_some() {
                conn.query("PRAGMA mmap_size=1073741824", ())
                    .await
                    .map_err(db_err)?;
            }
            if path != ":memory:" {
                conn.query("PRAGMA journal_mode=WAL", ())
                    .await
                    .map_err(db_err)?;
                conn.execute("PRAGMA synchronous=NORMAL", ())
                    .await
                    .map_err(db_err)?;
            }
            for statement in schema {
                conn.execute(statement, ()).await.map_err(db_err)?;
            }
            Ok::<_, PortError>((db, conn))
        })?;
        Ok(Db {
            shared: Arc::new(Shared {
                conn: Mutex::new(conn),
                heavy: AtomicUsize::new(0),
            }),
            _db: Arc::new(db),
        })
    }

    /// Runs `f`, a small call, on the connection: right here, waiting for the connection if
    /// another small call holds it; on the blocking pool when a heavy call does.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, PortError> + Send + 'static,
    ) -> Result<R, PortError> {
        let shared = &*self.shared;
        match shared.conn.try_lock() {
            Ok(conn) => return f(&conn),
            Err(TryLockError::Poisoned(p)) => return f(&p.into_inner()),
            // Held by a small call: tens of microseconds, less than a hop to the pool.
            Err(TryLockError::WouldBlock) if shared.heavy.load(Ordering::Acquire) == 0 => {
                return f(&lock(&shared.conn));
            }
            Err(TryLockError::WouldBlock) => {}
        }
        self.call_heavy(f).await
    }

    /// Runs `f` on the connection on the blocking pool, never on the calling task's thread:
    /// for statements that may take milliseconds.
    pub async fn call_heavy<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, PortError> + Send + 'static,
    ) -> Result<R, PortError> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let _heavy = Heavy::mark(&shared.heavy);
            let conn = lock(&shared.conn);
            f(&conn)
        })
        .await
        .map_err(|e| PortError::unavailable(format!("libsql call failed: {e}")))?
    }
}

pub(crate) fn read_bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::Blob(b) => Some(b),
        Value::Text(t) => Some(t.into_bytes()),
        _ => None,
    }
}

pub(crate) fn read_i64(v: Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(i),
        _ => None,
    }
}

/// Runs `body` inside one IMMEDIATE transaction, rolled back if it fails.
pub(crate) fn in_transaction<T>(
    c: &Connection,
    body: impl FnOnce() -> Result<T, PortError>,
) -> Result<T, PortError> {
    block_on(c.execute("BEGIN IMMEDIATE", ())).map_err(db_err)?;
    match body() {
        Ok(t) => block_on(c.execute("COMMIT", ())).map(|_| t).map_err(db_err),
        Err(e) => {
            let _ = block_on(c.execute("ROLLBACK", ()));
            Err(e)
        }
    }
}
