//! A reminder beyond one store, what an import needs ([`crate::archive`]): its fingerprint (the
//! same reminder has the same one in every store, whatever its id there), the tombstone a
//! fired one-off leaves, and the ids a store gives out. Why each firing stays once through
//! restores and merges is written in [`super`].

use std::collections::BTreeSet;
use std::time::Duration;

use clawless_platform::PortError;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::zone::Zone;
use super::{cron, Origin, Reminder, Schedules, What, MAX_ID, MAX_PER_CHAT};
use crate::ids::ConnectorId;
use crate::keys;

/// How long a fired one-off's tombstone is kept: a year. An import refuses a one-off that was
/// due longer ago than this ([`Reminder::overdue_past_tombstones`]), so any one-off it could
/// bring back either still has its tombstone (where it fired) or never fired.
pub const FIRED_TTL: Duration = Duration::from_secs(365 * 86_400);

/// A chat's tombstones read in one listing ([`Schedules::fired_in`]); a chat with more has
/// its reminders looked up one at a time.
const FIRED_PAGE: usize = 100;

/// What a reminder never changes: all but its id (a store's own) and next time (it moves).
/// A field added to [`Reminder`] later joins it only when it is not left at its default, or
/// every tombstone written before stops matching.
#[derive(Serialize)]
struct Identity<'a> {
    origin: &'a Origin,
    what: &'a What,
    cron: Option<&'a str>,
    zone: &'a str,
    created_ms: u64,
}

impl Reminder {
    /// The reminder's identity in every store: 16 hex digits of the SHA-256 of what it never
    /// changes. Two reminders alike in all of it (made in one chat in the same millisecond,
    /// saying the same, at the same time) are one reminder to an import.
    pub fn fingerprint(&self) -> String {
        let identity = Identity {
            origin: &self.origin,
            what: &self.what,
            cron: self.cron.as_deref(),
            zone: &self.zone,
            created_ms: self.created_ms,
        };
        // A struct of strings and numbers always serialises.
        let json = serde_json::to_vec(&identity).unwrap_or_default();
        Sha256::digest(&json)
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether it fires again after a firing: a cron, or a watch's period. A one-off leaves a
    /// tombstone when it fires.
    pub fn repeats(&self) -> bool {
        self.cron.is_some() || matches!(self.what, What::Watch { .. })
    }

    /// The first time its cron names after both `now_ms` and its next time (ms); `None` for a
    /// one-off, or a cron that names no time to come.
    pub fn next_after(&self, now_ms: u64) -> Option<u64> {
        if let What::Watch { every_secs, .. } = &self.what {
            // Every period from its first time; after downtime the next one to come, once.
            let every = every_secs.max(&1).saturating_mul(1000);
            let periods = now_ms.saturating_sub(self.next_ms) / every + 1;
            return Some(self.next_ms.saturating_add(periods.saturating_mul(every)));
        }
        let zone = Zone::find(&self.zone).unwrap_or_else(Zone::utc);
        let from = (now_ms.max(self.next_ms) / 1000) as i64;
        let at = cron::Cron::parse(self.cron.as_deref()?)
            .ok()?
            .next_after(from, &zone)?;
        u64::try_from(at).ok().map(|s| s * 1000)
    }

    /// Whether it is a one-off due more than [`FIRED_TTL`] before `now_ms`: had it fired, its
    /// tombstone may be gone, so an import does not bring it back.
    pub fn overdue_past_tombstones(&self, now_ms: u64) -> bool {
        let kept = FIRED_TTL.as_millis() as u64;
        !self.repeats() && self.next_ms.saturating_add(kept) < now_ms
    }
}

impl Schedules<'_> {
    /// Step 2b of a one-off's firing: its tombstone (its id here and the time), kept
    /// [`FIRED_TTL`]. A repeated firing writes the same again.
    pub async fn mark_fired(&self, r: &Reminder, at_ms: u64) -> Result<(), PortError> {
        let key = keys::fired(&r.origin.connector, r.origin.chat, &r.fingerprint());
        let value = format!("{} {at_ms}", r.id);
        self.kv.put(&key, value.as_bytes(), Some(FIRED_TTL)).await
    }

    /// Whether `r` fired: its tombstone is here (written by this store, or brought by an
    /// archive).
    pub async fn has_fired(&self, r: &Reminder) -> Result<bool, PortError> {
        let key = keys::fired(&r.origin.connector, r.origin.chat, &r.fingerprint());
        Ok(self.kv.get(&key).await?.is_some())
    }

    /// The fingerprints of a chat's fired one-offs, in one listing; `None` when there are more
    /// than it reads (ask [`Schedules::has_fired`] then).
    pub async fn fired_in(
        &self,
        connector: &ConnectorId,
        chat: i64,
    ) -> Result<Option<BTreeSet<String>>, PortError> {
        let prefix = keys::fired_in(connector, chat);
        let held = self.kv.list(&prefix, FIRED_PAGE).await?;
        if held.len() >= FIRED_PAGE {
            return Ok(None);
        }
        Ok(Some(
            (held.iter())
                .filter_map(|k| k.strip_prefix(&prefix))
                .map(str::to_owned)
                .collect(),
        ))
    }

    /// A chat's reminders in one read, each with the bytes it was read from (for a
    /// compare-and-swap); an unreadable one is left out (a firing deletes it when met).
    pub async fn held_in(
        &self,
        connector: &ConnectorId,
        chat: i64,
    ) -> Result<Vec<(Vec<u8>, Reminder)>, PortError> {
        let page = self
            .kv
            .scan(&keys::reminders(connector, chat), "", MAX_PER_CHAT * 2)
            .await?;
        Ok(page
            .into_iter()
            .filter_map(|e| {
                let r: Reminder = serde_json::from_slice(&e.value).ok()?;
                Some((e.value, r))
            })
            .collect())
    }

    /// Writes an imported reminder `r` (its record `bytes`) where the store has no record
    /// under its id: its due entry, then the record (the invariant of [`super`]). `false`: a
    /// record is there, nothing else written but a due entry, stale and deleted when met.
    pub async fn adopt(&self, r: &Reminder, bytes: &[u8]) -> Result<bool, PortError> {
        let (connector, chat) = (&r.origin.connector, r.origin.chat);
        (self.kv)
            .put(&keys::due(r.next_ms, connector, chat, r.id), b"", None)
            .await?;
        let key = keys::reminder(connector, chat, r.id);
        if !self.kv.put_if_absent(&key, bytes, None).await? {
            return Ok(false);
        }
        if let Some(w) = self.wake {
            w.note(r.next_ms);
        }
        Ok(true)
    }

    /// Writes the due entry of the stored reminder `r` where it is missing; whether it was.
    pub async fn index(&self, r: &Reminder) -> Result<bool, PortError> {
        let due = keys::due(r.next_ms, &r.origin.connector, r.origin.chat, r.id);
        let added = self.kv.put_if_absent(&due, b"", None).await?;
        if let (true, Some(w)) = (added, self.wake) {
            w.note(r.next_ms);
        }
        Ok(added)
    }

    /// A new reminder id on `connector`; `None` when they are used up.
    pub async fn next_id(&self, connector: &ConnectorId) -> Result<Option<u64>, PortError> {
        let key = keys::reminder_ids(connector);
        for _ in 0..32 {
            let old = self.kv.get(&key).await?;
            let id = last_id(old.as_deref()) + 1;
            if id >= MAX_ID {
                return Ok(None);
            }
            let new = id.to_string();
            if self
                .kv
                .compare_and_swap(&key, old.as_deref(), Some(new.as_bytes()), None)
                .await?
            {
                return Ok(Some(id));
            }
        }
        Err(too_busy())
    }

    /// Raises `connector`'s id counter to `id` if it is lower, so no id an import wrote is
    /// given out again.
    pub async fn raise_ids(&self, connector: &ConnectorId, id: u64) -> Result<(), PortError> {
        let key = keys::reminder_ids(connector);
        for _ in 0..32 {
            let old = self.kv.get(&key).await?;
            if last_id(old.as_deref()) >= id {
                return Ok(());
            }
            let new = id.to_string();
            if self
                .kv
                .compare_and_swap(&key, old.as_deref(), Some(new.as_bytes()), None)
                .await?
            {
                return Ok(());
            }
        }
        Err(too_busy())
    }
}

/// The id a counter's value names (none or unreadable: 0).
fn last_id(held: Option<&[u8]>) -> u64 {
    held.and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn too_busy() -> PortError {
    PortError::new(
        clawless_platform::ErrorKind::Conflict,
        "reminder id counter: too many concurrent writers",
    )
}
