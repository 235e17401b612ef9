//! Ports: the only way the clawless core reaches the outside world.
//!
//! # Layout
//! - [`error`]: the one error type every port returns, with a kind the core branches on.
//! - [`kv`]: key-value store with TTL and compare-and-swap (dedupe, leases, sessions, inbox).
//! - [`files`]: a sandboxed file tree (memory files, skills).
//! - [`exec`]: running a shell command (native only; `Platform::exec` is empty elsewhere).
//! - [`http`]: one request, one response, with a timeout; [`net`]: which addresses a request
//!   from outside may reach.
//! - [`vectors`]: vector upsert / top-k query / delete.
//! - [`text`]: keyword search (BM25) over documents with metadata.
//! - [`clock`]: wall-clock time and sleeping (core never reads the system clock itself).
//! - [`sql`]: the SQL statements the SQLite adapters (libsql on native, D1 on the Worker) share;
//!   the FTS5 text index's are [`text::fts5_sql`].
//! - `native_io` (feature `native-io`): reqwest Http and system Clock for tokio shells.
//! - [`Platform`]: the ports gathered as `Arc<dyn Port>` for injection.
//!
//! Each port file holds the trait with a `# Behavior` contract per method, an in-memory fake,
//! and (behind the `testing` feature) the conformance suite every adapter must pass.
//!
//! Send: every port trait is `Send + Sync` and every future it returns is `Send`. Adapters over
//! `!Send` JS futures (the Worker) wrap them in `worker::send::SendFuture`, which is sound
//! because a Worker isolate is single-threaded. See ARCHITECTURE.md.

pub mod clock;
pub mod error;
pub mod exec;
pub mod files;
pub mod http;
pub mod kv;
#[cfg(feature = "native-io")]
pub mod native_io;
pub mod net;
pub mod sql;
pub mod text;
pub mod vectors;

use std::sync::Arc;

pub use async_trait::async_trait;
pub use clock::{Clock, FakeClock};
pub use error::{ErrorKind, PortError, Result};
pub use exec::{Exec, ExecOutput, ExecRequest, Program, Reach};
pub use files::{Files, MemoryFiles};
pub use http::{
    BodyStream, FakeHttp, FakeStream, Http, HttpRequest, HttpResponse, HttpStreamResponse, Method,
    Outside,
};
pub use kv::{Kv, KvEntry, KvExt, MemoryKv};
pub use text::{MemoryText, TextDoc, TextHit, TextIndex};
pub use vectors::{MemoryVectors, VectorHit, VectorRecord, Vectors};

/// All ports, as shared trait objects. Built by a target from its environment.
#[derive(Clone)]
pub struct Platform {
    pub kv: Arc<dyn Kv>,
    pub files: Arc<dyn Files>,
    pub http: Arc<dyn Http>,
    pub vectors: Arc<dyn Vectors>,
    pub text: Arc<dyn TextIndex>,
    pub clock: Arc<dyn Clock>,
    /// Running commands: only the native binary has it.
    pub exec: Option<Arc<dyn Exec>>,
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Platform { .. }")
    }
}

impl Platform {
    /// A platform of in-memory fakes sharing one [`FakeClock`]; the HTTP fake answers 404 until
    /// routes are added.
    pub fn in_memory() -> (Platform, Arc<FakeClock>, Arc<FakeHttp>) {
        let clock = Arc::new(FakeClock::new(1_700_000_000_000));
        let http = Arc::new(FakeHttp::new());
        let platform = Platform {
            kv: Arc::new(MemoryKv::new(clock.clone())),
            files: Arc::new(MemoryFiles::default()),
            http: http.clone(),
            vectors: Arc::new(MemoryVectors::default()),
            text: Arc::new(MemoryText::default()),
            clock: clock.clone(),
            exec: None,
        };
        (platform, clock, http)
    }
}
