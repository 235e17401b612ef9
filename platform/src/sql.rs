//! SQL that both SQLite adapters run word for word: libsql on native and D1 on the Worker (D1
//! is SQLite). One copy here, so the two cannot drift apart; each adapter binds the `?N`
//! parameters the way its driver does. Statements only one adapter runs stay in that adapter
//! (native reads a Kv row and compares in Rust while it holds its one connection, D1 compares
//! in SQL; native's vectors column is libsql's `F16_BLOB`, D1's a plain `BLOB`; only D1 keeps
//! files in a table). The FTS5 text index, layout and statements, is [`crate::text::fts5_sql`].
//!
//! Plain constants, no feature flags, no runtime dependencies: the wasm32 build uses them too.

/// Whether the table named `?1` exists: a row (`1`) when it does, none when it does not.
pub const HAS_TABLE: &str = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1";

/// The `kv` table: a row per key, `expires_at` the expiry instant in ms by the platform clock
/// (`NULL`: never). An expired row may still be there until [`kv::PURGE_EXPIRED`] runs: every
/// read filters on `expires_at`.
pub mod kv {
    /// Creates the table (`IF NOT EXISTS`).
    pub const SCHEMA: &str =
        "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER)";

    /// Writes `?1` = key, `?2` = value, `?3` = expiry (ms, or `NULL`), replacing any row.
    pub const PUT: &str = "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at";

    /// Deletes the row of key `?1` (live or expired).
    pub const DELETE: &str = "DELETE FROM kv WHERE key = ?1";

    /// The live keys starting with `?1` that sort after `?4`, in key order, at most `?3` of
    /// them; `?2` is now (ms).
    pub const LIST_AFTER: &str = "SELECT key FROM kv WHERE key >= ?1 AND key > ?4 AND substr(key, 1, length(?1)) = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY key LIMIT ?3";

    /// [`LIST_AFTER`] with each key's value and expiry: `key, value, expires_at`.
    pub const SCAN: &str = "SELECT key, value, expires_at FROM kv WHERE key >= ?1 AND key > ?4 AND substr(key, 1, length(?1)) = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY key LIMIT ?3";

    /// Deletes every row expired at `?1` (now, ms); its change count is how many went.
    pub const PURGE_EXPIRED: &str =
        "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1";
}

/// The `vectors` table: `id`, `dim`, `vec` (half-precision, [`crate::vectors::to_blob`]),
/// `metadata` (a JSON object). Its `CREATE` differs (the column type of `vec`), so each
/// adapter keeps its own.
pub mod vectors {
    /// Writes `?1` = id, `?2` = dimension, `?3` = vector blob, `?4` = metadata JSON,
    /// replacing any row.
    pub const UPSERT: &str = "INSERT INTO vectors (id, dim, vec, metadata) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(id) DO UPDATE SET dim = excluded.dim, vec = excluded.vec, metadata = excluded.metadata";

    /// Deletes the row of id `?1`.
    pub const DELETE: &str = "DELETE FROM vectors WHERE id = ?1";

    /// Every row, as `(id, vec, metadata)`.
    pub const ALL: &str = "SELECT id, vec, metadata FROM vectors";
}
