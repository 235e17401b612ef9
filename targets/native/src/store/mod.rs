//! libsql on disk: the database thread ([`Db`]) every libsql adapter runs on, the helpers
//! they share, and the adapters, one port per file: [`kv`] (`clawless.db`), [`vectors`] and
//! [`text`] (the memory index, `index.db`, opened by [`crate::index`]).
//!
//! libsql's local "async" API blocks the calling thread, so one dedicated thread per database
//! file owns the connection and runs every statement; callers send it closures and await the
//! answer. That one thread also makes compare-and-swap atomic without explicit transactions.
//! The Kv (`clawless.db`) and the memory index ([`crate::index`], `index.db`) are two files
//! with a thread each, so indexing never holds up the inbox's writes (the webhook ack).

use std::sync::mpsc;

use clawless_platform::PortError;
use futures::executor::block_on;

use libsql::{Connection, Value};

pub mod kv;
pub mod text;
pub mod vectors;

pub use kv::{SqlKv, KV_SCHEMA};
pub use text::SqlText;
pub use vectors::SqlVectors;

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// A handle to the database thread. Cloning shares the thread.
#[derive(Clone)]
pub struct Db {
    tx: mpsc::Sender<Job>,
}

pub(crate) fn db_err(e: libsql::Error) -> PortError {
    PortError::unavailable(format!("libsql: {e}"))
}

impl Db {
    /// Opens (creating) the database at `path` (`:memory:` for a private in-memory one) on a
    /// thread of its own, and runs the `schema` statements on it. SQLite's 4 KB pages: each
    /// commit writes every page it changed to the WAL, and the Kv's rows are small.
    pub fn open(path: &str, schema: &[&str]) -> Result<Db, PortError> {
        Self::open_paged(path, schema, None)
    }

    /// [`Db::open`] with pages of `page_size` bytes when the file is new (the memory index:
    /// 16 KB, see [`crate::index`]).
    pub fn open_paged(
        path: &str,
        schema: &[&str],
        page_size: Option<u32>,
    ) -> Result<Db, PortError> {
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
                    if let Some(bytes) = page_size {
                        conn.execute(&format!("PRAGMA page_size={bytes}"), ())
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

pub(crate) fn read_i64(v: Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(i),
        _ => None,
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
