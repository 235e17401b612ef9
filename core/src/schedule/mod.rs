//! Reminders and scheduled tasks: the bot writes first. A reminder belongs to one chat (and
//! forum topic) and holds either a text to send or a prompt to run as an agent turn there; it
//! fires once at a time, or on a cron expression in a time zone.
//!
//! Keys (built in [`crate::keys`]):
//! - `sched/<connector>/<chat>/<id>`: the [`Reminder`], with `next_ms`, its next firing. The
//!   record is the truth; everything else is derived from it.
//! - `sched-due/<at>/<connector>/<chat>/<id>`: the due index, in time order. **Invariant:** a
//!   record's `next_ms` always has its entry: the entry is written before the record names
//!   the time. An entry whose record is gone or names another time is stale, and is deleted
//!   when met.
//! - `sched-seq/<connector>`: the last id given out (compare-and-swap). Ids are a store's own.
//! - `sched-fired/<connector>/<chat>/<fingerprint>`: a fired one-off's tombstone, kept
//!   [`FIRED_TTL`] (a year), exported with the reminders.
//! - `tz/<connector>/<chat>`: the chat's time zone.
//!
//! Firing (`fire.rs`, from every shell's scheduler) goes through the durable inbox, so
//! delivery, retries, order and exactly-once are the inbox's:
//! 1. read the record; stale entry → delete it, done;
//! 2. enqueue a job in the chat's lane under [`fire_update_id`]`(id, time)`: deterministic,
//!    so a second enqueue of the same firing is dropped by the inbox (`put_if_absent` on the
//!    job while it is pending, the `seen/` marker once it finished);
//! 3. a one-off: write its tombstone ([`Schedules::mark_fired`]; a repeat writes the same);
//! 4. [`Schedules::advance`] the record by compare-and-swap against the bytes read in 1:
//!    a one-off is deleted; a recurring one gets its next time computed from *now* (after
//!    downtime it fires once, not once per missed period), its new index entry written first;
//! 5. delete the entry.
//!
//! Two overlapping runs: both enqueue the same id (one is dropped), one CAS wins, the loser
//! sees the record changed and stops. A crash after 2 or 3: the next run repeats 2 (dropped)
//! and goes on. A crash after 4: the stale entry is deleted when met. So each firing is
//! delivered once, as long as a run that crashed between 2 and 4 is repeated within
//! `inbox.dedupe_hours` (24 h or more; the schedulers run every minute).
//!
//! Beyond one store: an archive restored or merged ([`crate::archive`]). A reminder's
//! [`Reminder::fingerprint`] hashes what it never changes (chat, who set it, what, cron, zone,
//! creation time): the same reminder has it in every store, whatever its id there. Ids stay
//! per store rather than store-independent: short for people ("#3"), below 2^30 for the
//! update ids, the keys and due index unchanged, and no store to upgrade; an import renumbers
//! instead. Each reminder an archive holds is, in this order:
//! - the same reminder here (by fingerprint): kept; a recurring one takes the later of the
//!   two next times, so no period fires twice;
//! - tombstoned here: it fired, and is not brought back. An archive's tombstones are imported
//!   before its reminders, and one naming a reminder the store holds deletes it (it fired where
//!   the archive was made), so the order of two imports does not matter;
//! - a one-off due more than [`FIRED_TTL`] ago: refused, as its tombstone may be gone;
//! - recurring, its time passed: moved to its next time after the store's clock (the missed
//!   periods are not fired);
//! - written under its own id where no reminder of the chat has it, else under a new id from
//!   the counter (renumbered: neither it nor the store's own is dropped). The counter is
//!   the larger of the archive's and the store's and is raised to any id written, so no id is
//!   given out twice, and a new id makes a new [`fire_update_id`].
//!
//! So a one-off whose tombstone reached this store (its own firing, or any archive made after
//! the firing elsewhere) never fires here again; one restored from a backup into a store that
//! never saw its firing (a fresh store, the backup alone) cannot be known to have fired, and
//! fires if due. A tombstone is one small entry per fired one-off, for a year.

pub mod cron;
mod identity;
mod origin;
mod what;
pub mod when;
pub mod zone;

pub use identity::FIRED_TTL;
pub use origin::Origin;
pub use what::What;

use std::time::Duration;

use clawless_platform::{Clock, Kv, KvExt, PortError};
use serde::{Deserialize, Serialize};

use crate::ids::ConnectorId;
use crate::keys;
use zone::Zone;

/// At most this many reminders per chat.
pub const MAX_PER_CHAT: usize = 50;
/// A reminder's text or prompt is at most this many characters.
pub const MAX_TEXT_CHARS: usize = 2000;
/// A scheduled task (a prompt: a model turn each time) recurs at most this often.
pub const MIN_TASK_INTERVAL_S: i64 = 15 * 60;
/// A chat's scheduled tasks run at most this many times in any coming day, all together.
pub const MAX_TASK_RUNS_PER_DAY: usize = 100;
/// A one-off is at most this far ahead.
pub const MAX_AHEAD_MS: u64 = 366 * 86_400_000;
/// Ids stay below this, so [`fire_update_id`] is unique.
pub const MAX_ID: u64 = 1 << 30;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reminder {
    pub id: u64,
    pub origin: Origin,
    pub what: What,
    /// Recurring: the cron expression, read in `zone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    pub zone: String,
    /// The next firing (ms, a whole second).
    pub next_ms: u64,
    pub created_ms: u64,
}

/// One firing, carried by its inbox job: which reminder, at which time, doing what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fire {
    pub reminder: u64,
    pub at_ms: u64,
    pub what: What,
}

/// The update id of a firing: negative, so never a Telegram update id (those are positive),
/// unique per (reminder, time) (`id` < 2^30, seconds < 2^32), and ordered by time among
/// firings. In a lane, keys of negative ids sort before every Telegram update's: a firing
/// goes ahead of what waits there (a turn waiting for an approval included) instead of
/// behind it.
pub fn fire_update_id(id: u64, at_ms: u64) -> i64 {
    let secs = (at_ms / 1000).min(u64::from(u32::MAX)) as i64;
    -(secs * MAX_ID as i64 + (id % MAX_ID) as i64)
}

/// The update id of background task `id`'s answer joining its chat's session
/// ([`What::Done`]): `-id`, so in a lane it sorts before every firing (their ids are at most
/// -2^30) and every update: the record goes ahead of a turn waiting for an approval instead
/// of superseding it. Unique per task (reminder ids are per connector).
pub fn done_update_id(id: u64) -> i64 {
    -((id % MAX_ID) as i64)
}

/// The reminders' storage.
#[derive(Clone, Copy)]
pub struct Schedules<'a> {
    pub kv: &'a dyn Kv,
    pub clock: &'a dyn Clock,
    /// Told of every due time written, when a runner waits for them.
    pub wake: Option<&'a Wake>,
}

/// The earliest due time written since a runner last asked (ms since the epoch), so the
/// native runner learns of a new reminder without listing the due index after every turn.
#[derive(Debug)]
pub struct Wake(std::sync::atomic::AtomicU64);

impl Default for Wake {
    fn default() -> Self {
        Wake(std::sync::atomic::AtomicU64::new(u64::MAX))
    }
}

impl Wake {
    /// A due time was written.
    pub fn note(&self, at_ms: u64) {
        self.0.fetch_min(at_ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// The earliest due time noted since the last call, if any.
    pub fn take(&self) -> Option<u64> {
        let at = self.0.swap(u64::MAX, std::sync::atomic::Ordering::SeqCst);
        (at != u64::MAX).then_some(at)
    }
}

impl Schedules<'_> {
    /// Stores a new reminder: index entry first, then the record. `Err(text)` is a refusal
    /// to show the model.
    pub async fn create(
        &self,
        origin: Origin,
        what: What,
        first: when::First,
        zone: &Zone,
    ) -> Result<Result<Reminder, String>, PortError> {
        let id = match self.take_id(&origin).await? {
            Ok(id) => id,
            Err(why) => return Ok(Err(why)),
        };
        Ok(Ok(self.write_new(id, origin, what, first, zone).await?))
    }

    /// [`Schedules::create`], once per `call` (a tool call's durable name, see
    /// [`crate::tools::ToolContext::call`]): the same call made again after a crash finds the
    /// reminder the first made, or writes it under the id and first time the first took. The
    /// claim (`call/<call>`, two days) says those, then that the reminder was written, so one
    /// that fired or was cancelled since is not made again. An empty `call` creates.
    pub async fn create_once(
        &self,
        call: &str,
        origin: Origin,
        what: What,
        first: when::First,
        zone: &Zone,
    ) -> Result<Result<Reminder, String>, PortError> {
        if call.is_empty() {
            return self.create(origin, what, first, zone).await;
        }
        let claim = keys::tool_call(call);
        let held = self.kv.get(&claim).await?;
        let held = held.as_deref().map(String::from_utf8_lossy);
        // `<id> <first ms>`, then `<id> <first ms> done`.
        let taken = held.as_deref().and_then(|h| {
            let mut words = h.split(' ');
            let id = words.next()?.parse::<u64>().ok()?;
            let at = words.next()?.parse::<u64>().ok()?;
            Some((id, at, words.next() == Some("done")))
        });
        let ttl = Some(std::time::Duration::from_secs(2 * 86_400));
        let (connector, chat) = (origin.connector.clone(), origin.chat);
        let mut first = first;
        let id = match taken {
            Some((id, at, done)) => {
                let key = keys::reminder(&connector, chat, id);
                if let Some(r) = self.kv.get_json::<Reminder>(&key).await? {
                    return Ok(Ok(r));
                }
                if done {
                    return Ok(Err(format!(
                        "reminder #{id} was already created by this call, and has fired or been cancelled since"
                    )));
                }
                // The time the first call chose (`in_minutes` counts from then), so its due
                // entry is the one written.
                first.next_ms = at;
                id
            }
            None => {
                let id = match self.take_id(&origin).await? {
                    Ok(id) => id,
                    Err(why) => return Ok(Err(why)),
                };
                let held = format!("{id} {}", first.next_ms);
                self.kv.put(&claim, held.as_bytes(), ttl).await?;
                id
            }
        };
        let at = first.next_ms;
        let r = self.write_new(id, origin, what, first, zone).await?;
        self.kv
            .put(&claim, format!("{id} {at} done").as_bytes(), ttl)
            .await?;
        Ok(Ok(r))
    }

    /// A new reminder id for `origin`'s chat; `Err(text)` when the chat holds the most it
    /// may, or the ids are used up.
    async fn take_id(&self, origin: &Origin) -> Result<Result<u64, String>, PortError> {
        let held = self
            .kv
            .list(
                &keys::reminders(&origin.connector, origin.chat),
                MAX_PER_CHAT + 1,
            )
            .await?;
        if held.len() >= MAX_PER_CHAT {
            return Ok(Err(format!(
                "this chat already has {MAX_PER_CHAT} reminders, the most it may have: cancel some first"
            )));
        }
        Ok(self
            .next_id(&origin.connector)
            .await?
            .ok_or_else(|| "no more reminder ids on this bot".to_owned()))
    }

    /// Writes a new reminder under `id`: its due entry, then the record.
    async fn write_new(
        &self,
        id: u64,
        origin: Origin,
        what: What,
        first: when::First,
        zone: &Zone,
    ) -> Result<Reminder, PortError> {
        let (connector, chat) = (origin.connector.clone(), origin.chat);
        let connector = &connector;
        let r = Reminder {
            id,
            origin,
            what,
            cron: first.cron,
            zone: zone.name.clone(),
            next_ms: first.next_ms,
            created_ms: self.clock.now_ms(),
        };
        self.kv
            .put(&keys::due(r.next_ms, connector, chat, id), b"", None)
            .await?;
        if let Some(w) = self.wake {
            w.note(r.next_ms);
        }
        self.kv
            .put_json(&keys::reminder(connector, chat, id), &r, None)
            .await?;
        Ok(r)
    }

    /// A chat's reminders, in id order.
    pub async fn list(
        &self,
        connector: &ConnectorId,
        chat: i64,
    ) -> Result<Vec<Reminder>, PortError> {
        let keys = self
            .kv
            .list(&keys::reminders(connector, chat), MAX_PER_CHAT * 2)
            .await?;
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            match self.kv.get_json::<Reminder>(&k).await {
                Ok(Some(r)) => out.push(r),
                Ok(None) => {}
                Err(e) => tracing::warn!(key = k, error = %e, "unreadable reminder skipped"),
            }
        }
        Ok(out)
    }

    /// Cancels a chat's reminder; `None` when the chat has no such reminder.
    pub async fn cancel(
        &self,
        connector: &ConnectorId,
        chat: i64,
        id: u64,
    ) -> Result<Option<Reminder>, PortError> {
        let key = keys::reminder(connector, chat, id);
        // A firing may move a recurring record between our read and our swap: read again.
        for _ in 0..4 {
            let Some((bytes, r)) = self.load(&key).await? else {
                return Ok(None);
            };
            if self
                .kv
                .compare_and_swap(&key, Some(&bytes), None, None)
                .await?
            {
                self.kv
                    .delete(&keys::due(r.next_ms, connector, chat, id))
                    .await?;
                return Ok(Some(r));
            }
        }
        Err(PortError::new(
            clawless_platform::ErrorKind::Conflict,
            "reminder changed under every try to cancel it",
        ))
    }

    /// A record and the bytes it was read from (for a compare-and-swap). An unreadable one
    /// is logged and deleted.
    pub async fn load(&self, key: &str) -> Result<Option<(Vec<u8>, Reminder)>, PortError> {
        let Some(bytes) = self.kv.get(key).await? else {
            return Ok(None);
        };
        match serde_json::from_slice(&bytes) {
            Ok(r) => Ok(Some((bytes, r))),
            Err(e) => {
                tracing::error!(key, error = %e, "unreadable reminder dropped");
                self.kv.delete(key).await?;
                Ok(None)
            }
        }
    }

    /// Step 3 of a firing: the record moved past the firing at `r.next_ms`, by
    /// compare-and-swap against `read`. `false`: another run (or a cancel) changed it first.
    pub async fn advance(&self, r: &Reminder, read: &[u8], now_ms: u64) -> Result<bool, PortError> {
        match r.next_after(now_ms) {
            Some(next) => self.move_to(r, read, next).await,
            None => {
                let key = keys::reminder(&r.origin.connector, r.origin.chat, r.id);
                self.kv.compare_and_swap(&key, Some(read), None, None).await
            }
        }
    }

    /// The record `r`, read as `read`, moved to `next`: its due entry first (the invariant;
    /// left behind if the swap fails, as another run may have written the same entry for its
    /// own swap), then a compare-and-swap. `false`: the record changed first.
    pub async fn move_to(&self, r: &Reminder, read: &[u8], next: u64) -> Result<bool, PortError> {
        let (connector, chat) = (&r.origin.connector, r.origin.chat);
        self.kv
            .put(&keys::due(next, connector, chat, r.id), b"", None)
            .await?;
        let moved = Reminder {
            next_ms: next,
            ..r.clone()
        };
        let bytes = serde_json::to_vec(&moved).map_err(|e| PortError::invalid(e.to_string()))?;
        let key = keys::reminder(connector, chat, r.id);
        self.kv
            .compare_and_swap(&key, Some(read), Some(&bytes), None)
            .await
    }

    /// Due index entries at or before `now_ms`, earliest first, at most `limit`.
    pub async fn due(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<(String, u64, ConnectorId, i64, u64)>, PortError> {
        let keys = self.kv.list(keys::DUE, limit).await?;
        let mut out = Vec::new();
        for k in keys {
            match keys::parse_due(&k) {
                Some((at, ..)) if at > now_ms => break,
                Some((at, c, chat, id)) => out.push((k, at, c, chat, id)),
                None => self.kv.delete(&k).await?,
            }
        }
        Ok(out)
    }

    /// The earliest next firing of any reminder.
    pub async fn next_due(&self) -> Result<Option<u64>, PortError> {
        let first = self.kv.list(keys::DUE, 1).await?;
        Ok(first
            .first()
            .and_then(|k| keys::parse_due(k))
            .map(|(at, ..)| at))
    }

    /// The chat's time zone: its `/timezone`, else UTC.
    pub async fn zone_of(&self, connector: &ConnectorId, chat: i64) -> Result<Zone, PortError> {
        let stored = self.kv.get(&keys::chat_zone(connector, chat)).await?;
        Ok(stored
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(Zone::find)
            .unwrap_or_else(Zone::utc))
    }

    pub async fn set_zone(
        &self,
        connector: &ConnectorId,
        chat: i64,
        zone: &Zone,
    ) -> Result<(), PortError> {
        self.kv
            .put(
                &keys::chat_zone(connector, chat),
                zone.name.as_bytes(),
                None,
            )
            .await
    }
}

/// How long until `at_ms`, roughly, for people: "in 3 h 5 min".
pub fn until(now_ms: u64, at_ms: u64) -> String {
    let d = Duration::from_millis(at_ms.saturating_sub(now_ms)).as_secs();
    match d {
        0..=59 => format!("in {d} s"),
        60..=3599 => format!("in {} min", d.div_ceil(60)),
        3600..=86_399 => format!("in {} h {} min", d / 3600, d % 3600 / 60),
        _ => format!("in {} days", d / 86_400),
    }
}

#[cfg(test)]
mod tests;
