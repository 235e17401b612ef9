//! How an import merges reminders, by the rules written in [`crate::schedule`]: the same
//! reminder (by fingerprint) is kept, a tombstoned one is not brought back, a recurring one
//! goes on from now, and one whose id another reminder of the chat has here is renumbered.
//! Each chat's reminders and tombstones are read once per import (or part of one).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use clawless_platform::{KvEntry, PortError};
use serde::{Deserialize, Serialize};

use crate::ids::ConnectorId;
use crate::keys;
use crate::schedule::{Reminder, Schedules, MAX_ID, MAX_PER_CHAT};

/// Reasons for refusals an import report names one by one; past these it counts them.
const MAX_WHY: usize = 20;

/// What an import did with the reminders an archive holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReminderReport {
    /// Written under their own id.
    pub added: usize,
    /// Already here (the same reminder, kept as the store has it or moved to the archive's
    /// later next time).
    pub kept: usize,
    /// Written under a new id: theirs was another reminder's here.
    pub renumbered: usize,
    /// Fired already (a tombstone here): not brought back.
    pub fired: usize,
    /// Held here, but fired where the archive was made (its tombstone came with it): deleted.
    pub removed: usize,
    /// Not taken (see `why`).
    pub refused: usize,
    /// Why each refused one was, the first [`MAX_WHY`].
    pub why: Vec<String>,
}

impl ReminderReport {
    pub fn add(&mut self, part: ReminderReport) {
        self.added += part.added;
        self.kept += part.kept;
        self.renumbered += part.renumbered;
        self.fired += part.fired;
        self.removed += part.removed;
        self.refused += part.refused;
        for why in part.why {
            self.refuse_why(why);
        }
    }

    fn refuse_why(&mut self, why: String) {
        if self.why.len() < MAX_WHY {
            self.why.push(why);
        }
    }
}

/// What became of one reminder of an archive, for the entries' counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Took {
    /// Written under its own id or a new one, with its due entry.
    Written,
    /// The same reminder was here at an earlier next time: moved to the archive's (or on from
    /// now), with its due entry.
    Moved,
    /// The same reminder was here; whether its due entry was missing and is written now.
    Kept { due_added: bool },
    /// Not written: fired already, or refused.
    Not,
}

/// A chat's reminders as this import knows them.
struct Chat {
    /// Each record, the bytes it was read from, and whether it already answers for one of the
    /// archive's (so two alike in the archive are two here: each held one matches once).
    held: Vec<(Vec<u8>, Reminder, bool)>,
    /// The chat's tombstones, read when first needed; `Some(None)`: too many to list.
    fired: Option<Option<BTreeSet<String>>>,
}

/// One import's (or part's) merge of reminders into a store.
pub(super) struct Merging<'a> {
    store: Schedules<'a>,
    now_ms: u64,
    chats: BTreeMap<(ConnectorId, i64), Chat>,
    /// The largest id written under its own number, per connector: the counter is raised to it.
    highest: BTreeMap<ConnectorId, u64>,
    pub report: ReminderReport,
}

impl<'a> Merging<'a> {
    pub fn new(store: Schedules<'a>) -> Self {
        let now_ms = store.clock.now_ms();
        Merging {
            store,
            now_ms,
            chats: BTreeMap::new(),
            highest: BTreeMap::new(),
            report: ReminderReport::default(),
        }
    }

    async fn chat(&mut self, connector: &ConnectorId, chat: i64) -> Result<&mut Chat, PortError> {
        match self.chats.entry((connector.clone(), chat)) {
            Entry::Occupied(known) => Ok(known.into_mut()),
            Entry::Vacant(slot) => {
                let held = self.store.held_in(connector, chat).await?;
                let held = held.into_iter().map(|(b, r)| (b, r, false)).collect();
                Ok(slot.insert(Chat { held, fired: None }))
            }
        }
    }

    /// An imported tombstone (its key): the reminder it names, if the store holds it, fired
    /// where the archive was made, and is deleted here.
    pub async fn fired_elsewhere(&mut self, key: &str) -> Result<bool, PortError> {
        let Some((connector, chat, fingerprint)) = keys::parse_fired(key) else {
            return Ok(false);
        };
        let held = &mut self.chat(&connector, chat).await?.held;
        // Only a one-off leaves a tombstone.
        let gone: Vec<u64> = (held.iter())
            .filter(|(_, r, _)| !r.repeats() && r.fingerprint() == fingerprint)
            .map(|(_, r, _)| r.id)
            .collect();
        held.retain(|(_, r, _)| !gone.contains(&r.id));
        for id in &gone {
            if self.store.cancel(&connector, chat, *id).await?.is_some() {
                self.report.removed += 1;
            }
        }
        Ok(!gone.is_empty())
    }

    /// One reminder record of the archive, merged.
    pub async fn record(&mut self, entry: &KvEntry) -> Result<Took, PortError> {
        let shown: String = entry.key.chars().take(80).collect();
        let mut r = match serde_json::from_slice::<Reminder>(&entry.value) {
            Ok(r) => r,
            Err(_) => return Ok(self.refuse(format!("{shown}: unreadable"))),
        };
        let (connector, chat) = (r.origin.connector.clone(), r.origin.chat);
        if keys::reminder(&connector, chat, r.id) != entry.key {
            return Ok(self.refuse(format!("{shown}: not the reminder its key names")));
        }
        let fingerprint = r.fingerprint();
        if let Some(took) = self.same(&r, &fingerprint).await? {
            self.report.kept += 1;
            return Ok(took);
        }
        if self.has_fired(&r, &fingerprint).await? {
            self.report.fired += 1;
            return Ok(Took::Not);
        }
        if r.overdue_past_tombstones(self.now_ms) {
            return Ok(self.refuse(format!(
                "{shown}: a one-off due more than a year ago (had it fired, its tombstone is gone)"
            )));
        }
        let mut bytes = entry.value.clone();
        if r.repeats() && r.next_ms < self.now_ms {
            // Recurring: it goes on from now; the times missed are not fired.
            let Some(next) = r.next_after(self.now_ms) else {
                return Ok(self.refuse(format!("{shown}: its schedule names no time to come")));
            };
            r.next_ms = next;
            bytes = to_bytes(&r)?;
        }
        let held = &self.chat(&connector, chat).await?.held;
        if held.len() >= MAX_PER_CHAT {
            return Ok(self.refuse(format!(
                "{shown}: the chat holds {MAX_PER_CHAT} reminders, the most it may"
            )));
        }
        // An id no store gives (0, or past the update ids' room) is renumbered too.
        let own_free = (1..MAX_ID).contains(&r.id) && !held.iter().any(|(_, h, _)| h.id == r.id);
        if own_free && self.store.adopt(&r, &bytes).await? {
            let top = self.highest.entry(connector.clone()).or_default();
            *top = (*top).max(r.id);
            self.report.added += 1;
            return Ok(self.written(r, bytes));
        }
        let Some(id) = self.store.next_id(&connector).await? else {
            return Ok(self.refuse(format!("{shown}: no more reminder ids on this bot")));
        };
        r.id = id;
        let bytes = to_bytes(&r)?;
        if !self.store.adopt(&r, &bytes).await? {
            return Ok(self.refuse(format!("{shown}: its new id {id} is taken")));
        }
        self.report.renumbered += 1;
        Ok(self.written(r, bytes))
    }

    /// The ids written under their own number are never given out again.
    pub async fn finish(&self) -> Result<(), PortError> {
        for (connector, id) in &self.highest {
            self.store.raise_ids(connector, *id).await?;
        }
        Ok(())
    }

    /// The same reminder held here, not yet matched in this import: kept (a recurring one moved
    /// to the archive's later next time), its due entry written if missing.
    async fn same(&mut self, r: &Reminder, fingerprint: &str) -> Result<Option<Took>, PortError> {
        let now_ms = self.now_ms;
        let store = self.store;
        let held = &mut self.chat(&r.origin.connector, r.origin.chat).await?.held;
        let Some(at) =
            (held.iter()).position(|(_, h, matched)| !matched && h.fingerprint() == fingerprint)
        else {
            return Ok(None);
        };
        held[at].2 = true;
        let (read, ours, _) = &held[at];
        if r.repeats() && r.next_ms > ours.next_ms {
            let next = r.next_after(now_ms).filter(|_| r.next_ms < now_ms);
            let next = next.unwrap_or(r.next_ms);
            if store.move_to(ours, read, next).await? {
                let moved = Reminder {
                    next_ms: next,
                    ..ours.clone()
                };
                held[at] = (to_bytes(&moved)?, moved, true);
                return Ok(Some(Took::Moved));
            }
            // Changed meanwhile (fired, cancelled): the store's own goes on.
            return Ok(Some(Took::Kept { due_added: false }));
        }
        let due_added = store.index(ours).await?;
        Ok(Some(Took::Kept { due_added }))
    }

    /// Whether the one-off `r` left a tombstone here: from the chat's listing, or asked.
    async fn has_fired(&mut self, r: &Reminder, fingerprint: &str) -> Result<bool, PortError> {
        if r.repeats() {
            return Ok(false); // only one-offs leave tombstones
        }
        let store = self.store;
        let chat = self.chat(&r.origin.connector, r.origin.chat).await?;
        if chat.fired.is_none() {
            chat.fired = Some(store.fired_in(&r.origin.connector, r.origin.chat).await?);
        }
        match chat.fired.as_ref().and_then(Option::as_ref) {
            Some(listed) => Ok(listed.contains(fingerprint)),
            None => store.has_fired(r).await,
        }
    }

    /// A reminder just written, known to this import's later ones.
    fn written(&mut self, r: Reminder, bytes: Vec<u8>) -> Took {
        let key = (r.origin.connector.clone(), r.origin.chat);
        if let Some(chat) = self.chats.get_mut(&key) {
            chat.held.push((bytes, r, true));
        }
        Took::Written
    }

    fn refuse(&mut self, why: String) -> Took {
        self.report.refused += 1;
        self.report.refuse_why(why);
        Took::Not
    }
}

fn to_bytes(r: &Reminder) -> Result<Vec<u8>, PortError> {
    serde_json::to_vec(r).map_err(|e| PortError::invalid(e.to_string()))
}
