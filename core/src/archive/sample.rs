//! A sample archive for the shells' tests (feature `testing`): a person's memory note, a
//! binary workspace file, a skill, a session, a pending and a recurring reminder with their due
//! entries, a pairing, and usage counters that expire.

use std::collections::BTreeMap;

use clawless_platform::KvEntry;

use super::{pack, ArchiveError, Contents, Manifest, FORMAT};
use crate::ids::{ConnectorId, SessionKey};
use crate::keys;
use crate::schedule::{Origin, Reminder, What};

/// The person whose data the sample holds.
pub const PERSON: i64 = 111_111_111;

/// When the sample's reminders fire next: the pending one once, the recurring one every
/// minute from `recurring_ms` (a whole minute).
#[derive(Debug, Clone, Copy)]
pub struct Due {
    pub pending_ms: u64,
    pub recurring_ms: u64,
}

impl Due {
    /// The pending reminder at the whole second an hour after `now_ms`, the recurring one at
    /// the next whole minute after it.
    pub fn in_an_hour(now_ms: u64) -> Due {
        let pending_ms = (now_ms / 1000 + 3600) * 1000;
        Due {
            pending_ms,
            recurring_ms: (pending_ms / 60_000 + 1) * 60_000,
        }
    }
}

/// The sample's contents, its reminders due in an hour.
pub fn contents(now_ms: u64) -> Contents {
    contents_due(now_ms, Due::in_an_hour(now_ms))
}

/// The sample's contents as of `now_ms` (its usage counted today and this month, its expiring
/// entries a day later), its reminders due at `due`.
pub fn contents_due(now_ms: u64, due: Due) -> Contents {
    use crate::usage::{period_at, Period};
    let day = now_ms + 86_400_000;
    let kv = |key: String, value: &str, exp: Option<u64>| KvEntry {
        key,
        value: value.as_bytes().to_vec(),
        expires_at_ms: exp,
    };
    let conn = ConnectorId::new("main");
    let reminder = |id, text, cron, next_ms| reminder_json(now_ms, id, text, cron, next_ms);
    let usage = serde_json::to_string(&crate::llm::Tally {
        calls: 1,
        input: 10,
        output: 5,
        cached_input: 0,
        cost_micros: 1050,
    })
    .unwrap_or_default();
    let mut entries = vec![
        kv(
            keys::session(&SessionKey::new(format!("{conn}:{PERSON}"))),
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}"#,
            None,
        ),
        kv(
            keys::paired(&conn, 222_222_222),
            r#"{"by":111111111,"at_ms":1700000000000}"#,
            None,
        ),
        kv(keys::chat_zone(&conn, PERSON), r#""Europe/Zurich""#, None),
        kv(
            keys::usage(
                &conn,
                &period_at(now_ms, Period::Day),
                &format!("u{PERSON}"),
            ),
            &usage,
            Some(day),
        ),
        kv(
            keys::usage(
                &conn,
                &period_at(now_ms, Period::Month),
                &format!("u{PERSON}"),
            ),
            &usage,
            Some(day),
        ),
        kv(keys::reminder_ids(&conn), "3", None),
        kv(
            keys::reminder(&conn, PERSON, 1),
            &reminder(1, "tea", None, due.pending_ms),
            None,
        ),
        kv(keys::due(due.pending_ms, &conn, PERSON, 1), "", None),
        kv(
            keys::reminder(&conn, PERSON, 2),
            &reminder(2, "stretch", Some("* * * * *"), due.recurring_ms),
            None,
        ),
        kv(keys::due(due.recurring_ms, &conn, PERSON, 2), "", None),
    ];
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let files = BTreeMap::from([
        (
            format!("memory/assistant/main/u{PERSON}/MEMORY.md"),
            b"# Notes\n\n- The door code is 2468.\n".to_vec(),
        ),
        (
            // Today's daily note: one of an earlier day would be folded into MEMORY.md by
            // the first bot that runs on it.
            format!(
                "memory/assistant/main/u{PERSON}/memory/{}.md",
                period_at(now_ms, Period::Day).trim_start_matches('d')
            ),
            "- Booked the dentist for Tuesday.\n- Café Grüezi, naïve déjà vu.\n"
                .as_bytes()
                .to_vec(),
        ),
        (
            format!("workspace/assistant/main/u{PERSON}/plan.bin"),
            vec![0, 159, 146, 150, 255],
        ),
        (
            "skills/weather/SKILL.md".to_owned(),
            b"---\nname: weather\ndescription: The weather.\n---\n".to_vec(),
        ),
    ]);
    Contents { kv: entries, files }
}

/// A reminder of [`PERSON`]'s in the sample's chat, as the store keeps it.
fn reminder_json(now_ms: u64, id: u64, text: &str, cron: Option<&str>, next_ms: u64) -> String {
    serde_json::to_string(&Reminder {
        id,
        origin: Origin {
            connector: ConnectorId::new("main"),
            chat: PERSON,
            chat_type: "private".into(),
            thread: None,
            user: PERSON,
            user_name: "Sam".into(),
        },
        what: What::Text(text.into()),
        cron: cron.map(str::to_owned),
        zone: "UTC".into(),
        next_ms,
        created_ms: now_ms,
    })
    .unwrap_or_default()
}

/// The texts of [`other_bot`]'s reminders.
pub const OTHER_REMINDERS: [&str; 2] = ["water the plants", "stand up"];

/// Another bot's archive, exported at `now_ms`, holding only two reminders of [`PERSON`]'s,
/// 200 days ahead, under the ids the sample's reminders have (1 and 2): merged into a store
/// holding the sample, both collide and are renumbered.
pub fn other_bot(now_ms: u64) -> Result<Vec<u8>, ArchiveError> {
    let conn = ConnectorId::new("main");
    let at = (now_ms / 60_000 + 200 * 24 * 60) * 60_000;
    let mut kv = Vec::new();
    for (i, text) in OTHER_REMINDERS.iter().enumerate() {
        let id = i as u64 + 1;
        let next_ms = at + id * 60_000;
        kv.push(KvEntry {
            key: keys::reminder(&conn, PERSON, id),
            value: reminder_json(now_ms, id, text, None, next_ms).into_bytes(),
            expires_at_ms: None,
        });
        kv.push(KvEntry {
            key: keys::due(next_ms, &conn, PERSON, id),
            value: Vec::new(),
            expires_at_ms: None,
        });
    }
    kv.push(KvEntry {
        key: keys::reminder_ids(&conn),
        value: b"3".to_vec(),
        expires_at_ms: None,
    });
    kv.sort_by(|a, b| a.key.cmp(&b.key));
    let manifest = Manifest {
        source: "other".into(),
        ..manifest(now_ms)
    };
    pack(
        manifest,
        &Contents {
            kv,
            files: BTreeMap::new(),
        },
    )
}

/// The reminders (`sched/` entries) `contents` holds: (id, text).
pub fn reminders_in(contents: &Contents) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = (contents.kv.iter())
        .filter_map(|e| serde_json::from_slice::<Reminder>(&e.value).ok())
        .map(|r| match r.what {
            What::Text(text) => (r.id, text),
            other => (r.id, format!("{other:?}")),
        })
        .collect();
    out.sort();
    out
}

/// The sample packed, as a shell would have exported it at `now_ms`.
pub fn archive(now_ms: u64) -> Result<Vec<u8>, ArchiveError> {
    archive_due(now_ms, Due::in_an_hour(now_ms))
}

/// [`archive`] with its reminders due at `due`.
pub fn archive_due(now_ms: u64, due: Due) -> Result<Vec<u8>, ArchiveError> {
    pack(manifest(now_ms), &contents_due(now_ms, due))
}

/// A manifest of an archive of the whole bot made at `now_ms`.
fn manifest(now_ms: u64) -> Manifest {
    Manifest {
        format: FORMAT,
        source: "sample".into(),
        by: "test".into(),
        created_at_ms: now_ms,
        store_version: crate::upgrade::CURRENT,
        whom: "bot".into(),
        kv_entries: 0,
        files: 0,
        sha256: BTreeMap::new(),
        left_out: Vec::new(),
        next: None,
        reindex: None,
    }
}

/// Whether `b` holds what `a` does, but for expiry instants within `slack_ms` (a store counts
/// a TTL from its own clock) and a store's own one-time markers (`memscope/`, written when a
/// shell first starts on an empty store).
pub fn same(a: &Contents, b: &Contents, slack_ms: u64) -> Result<(), String> {
    let own = |e: &&KvEntry| !e.key.starts_with(keys::MEMORY_SCOPES_MOVED);
    let a = &Contents {
        kv: a.kv.iter().filter(own).cloned().collect(),
        files: a.files.clone(),
    };
    let b = &Contents {
        kv: b.kv.iter().filter(own).cloned().collect(),
        files: b.files.clone(),
    };
    if a.files != b.files {
        let names = |c: &Contents| c.files.keys().cloned().collect::<Vec<_>>();
        let changed = a.files.iter().find(|(p, x)| b.files.get(*p) != Some(x));
        return Err(format!(
            "files differ: {:?} vs {:?}, first {:?}",
            names(a),
            names(b),
            changed.map(|(p, _)| p)
        ));
    }
    if a.kv.len() != b.kv.len() {
        let keys = |c: &Contents| c.kv.iter().map(|e| e.key.clone()).collect::<Vec<_>>();
        return Err(format!("entries differ: {:?} vs {:?}", keys(a), keys(b)));
    }
    for (x, y) in a.kv.iter().zip(&b.kv) {
        let close = match (x.expires_at_ms, y.expires_at_ms) {
            (Some(p), Some(q)) => p.abs_diff(q) <= slack_ms,
            (p, q) => p == q,
        };
        if x.key != y.key || x.value != y.value || !close {
            return Err(format!("{x:?} vs {y:?}"));
        }
    }
    Ok(())
}
