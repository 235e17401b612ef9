//! Sign-outs, kept in the store: one record per person (`panel-out/<connector>/<user>`), the
//! one Kv read every panel request makes after its signature is checked. A cookie is
//! stateless, so signing out must be remembered here, or the same cookie replayed would work
//! until it expires.
//!
//! - "Sign out" ends one browser session: the session's id (a digest of its cookie) is kept
//!   with the time the cookie expires anyway. Ids past that time are dropped at the next
//!   write; past [`MAX_ENDED`] ids the sign-out becomes "everywhere" (the safe side).
//! - "Sign out everywhere" keeps a time: a session, launch data or sign-in link issued at or
//!   before it is refused.
//! - Every write is a compare-and-swap (two browsers signing out at once both count), with a
//!   TTL of a session's life: by then nothing the record refuses would be taken anyway.
//!   A record an earlier release wrote (the time alone, a number) reads as "everywhere".

use clawless_platform::{ErrorKind, Kv, PortError};
use serde::{Deserialize, Serialize};

use super::auth;
use crate::ids::ConnectorId;
use crate::keys;

/// Sessions ended one by one that a record keeps (each at most a session's life).
pub const MAX_ENDED: usize = 64;
/// How long a record is kept after its last write: a session's life and the clock skew a
/// cookie is allowed.
const KEPT_MS: u64 = auth::SESSION_TTL_MS + 60_000;
/// Compare-and-swap attempts before a sign-out gives up (only the person writes here).
const TRIES: usize = 5;

/// A person's sign-outs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedOut {
    /// "Sign out everywhere": nothing issued at or before this (ms) is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    everywhere_ms: Option<u64>,
    /// Sessions signed out one by one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ended: Vec<Ended>,
}

/// One ended session: its id and when its cookie expires anyway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Ended {
    id: String,
    until_ms: u64,
}

impl SignedOut {
    /// The record as stored: this shape, or an earlier release's bare time.
    fn parse(bytes: &[u8]) -> Option<SignedOut> {
        if let Ok(at) = serde_json::from_slice::<u64>(bytes) {
            return Some(SignedOut {
                everywhere_ms: Some(at),
                ended: Vec::new(),
            });
        }
        serde_json::from_slice(bytes).ok()
    }

    /// `user`'s record on `conn` (empty when none): one Kv read.
    pub async fn read(kv: &dyn Kv, conn: &ConnectorId, user: i64) -> Result<SignedOut, PortError> {
        match kv.get(&keys::panel_signed_out(conn, user)).await? {
            None => Ok(SignedOut::default()),
            Some(bytes) => SignedOut::parse(&bytes).ok_or_else(unreadable),
        }
    }

    /// Whether what was issued at `issued_ms` (a session, launch data, a sign-in link) is
    /// refused; `cookie` is a browser session's cookie value.
    pub fn refuses(&self, issued_ms: u64, cookie: Option<&str>) -> bool {
        if self.everywhere_ms.is_some_and(|out| issued_ms <= out) {
            return true;
        }
        cookie.is_some_and(|c| {
            let id = session_id(c);
            self.ended.iter().any(|e| e.id == id)
        })
    }

    /// This record with the session of `cookie` (issued at `issued_ms`) ended at `now_ms`.
    fn with_ended(mut self, cookie: &str, issued_ms: u64, now_ms: u64) -> SignedOut {
        self.ended.retain(|e| e.until_ms >= now_ms);
        if self.ended.len() >= MAX_ENDED {
            tracing::info!("panel: too many sessions signed out one by one; signing out all");
            return self.with_everywhere(now_ms);
        }
        self.ended.push(Ended {
            id: session_id(cookie),
            until_ms: issued_ms.saturating_add(auth::SESSION_TTL_MS),
        });
        self
    }

    /// This record with everything issued up to `now_ms` refused (ended sessions are then
    /// covered by the time).
    fn with_everywhere(self, now_ms: u64) -> SignedOut {
        SignedOut {
            everywhere_ms: Some(self.everywhere_ms.map_or(now_ms, |t| t.max(now_ms))),
            ended: Vec::new(),
        }
    }
}

/// Ends the browser session of `cookie` (issued at `issued_ms`): the same cookie is refused
/// from now on.
pub async fn end_session(
    kv: &dyn Kv,
    conn: &ConnectorId,
    user: i64,
    cookie: &str,
    issued_ms: u64,
    now_ms: u64,
) -> Result<(), PortError> {
    update(kv, conn, user, |r| r.with_ended(cookie, issued_ms, now_ms)).await
}

/// Ends every session, launch data and sign-in link of `user` issued up to `now_ms`.
pub async fn everywhere(
    kv: &dyn Kv,
    conn: &ConnectorId,
    user: i64,
    now_ms: u64,
) -> Result<(), PortError> {
    update(kv, conn, user, |r| r.with_everywhere(now_ms)).await
}

/// Reads the record, changes it and swaps it in, again if another write came between.
async fn update(
    kv: &dyn Kv,
    conn: &ConnectorId,
    user: i64,
    change: impl Fn(SignedOut) -> SignedOut,
) -> Result<(), PortError> {
    let key = keys::panel_signed_out(conn, user);
    let ttl = Some(std::time::Duration::from_millis(KEPT_MS));
    for _ in 0..TRIES {
        let old = kv.get(&key).await?;
        let record = match &old {
            None => SignedOut::default(),
            Some(bytes) => SignedOut::parse(bytes).ok_or_else(unreadable)?,
        };
        let new = serde_json::to_vec(&change(record))
            .map_err(|e| PortError::invalid(format!("sign-out record: {e}")))?;
        if kv
            .compare_and_swap(&key, old.as_deref(), Some(&new), ttl)
            .await?
        {
            return Ok(());
        }
    }
    Err(PortError::new(
        ErrorKind::Conflict,
        "the sign-out record kept changing",
    ))
}

/// A session's id: a digest of its cookie (the Kv never holds a usable cookie).
fn session_id(cookie: &str) -> String {
    auth::token_digest(cookie)
}

fn unreadable() -> PortError {
    PortError::invalid("the panel sign-out record is unreadable")
}

#[cfg(test)]
mod tests;
