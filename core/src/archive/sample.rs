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

/// The sample's contents, its expiring entries a day after `now_ms`.
pub fn contents(now_ms: u64) -> Contents {
    let day = now_ms + 86_400_000;
    // A whole second, as every reminder's time is.
    let at = (now_ms / 1000 + 3600) * 1000;
    let kv = |key: String, value: &str, exp: Option<u64>| KvEntry {
        key,
        value: value.as_bytes().to_vec(),
        expires_at_ms: exp,
    };
    let conn = ConnectorId::new("main");
    let reminder = serde_json::to_string(&Reminder {
        id: 1,
        origin: Origin {
            connector: conn.clone(),
            chat: PERSON,
            chat_type: "private".into(),
            thread: None,
            user: PERSON,
            user_name: "Sam".into(),
        },
        what: What::Text("tea".into()),
        cron: None,
        zone: "UTC".into(),
        next_ms: at,
        created_ms: now_ms,
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
            keys::usage(&conn, "d2026-11-27", &format!("u{PERSON}")),
            r#"{"input":10,"output":5,"cost_micros":105}"#,
            Some(day),
        ),
        kv(keys::reminder_ids(&conn), "2", None),
        kv(keys::reminder(&conn, PERSON, 1), &reminder, None),
        kv(keys::due(at, &conn, PERSON, 1), "", None),
    ];
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let files = BTreeMap::from([
        (
            format!("memory/assistant/main/u{PERSON}/MEMORY.md"),
            b"# Notes\n\n- The door code is 2468.\n".to_vec(),
        ),
        (
            format!("memory/assistant/main/u{PERSON}/memory/2026-11-26.md"),
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

/// The sample packed, as a shell would have exported it at `now_ms`.
pub fn archive(now_ms: u64) -> Result<Vec<u8>, ArchiveError> {
    let manifest = Manifest {
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
    };
    pack(manifest, &contents(now_ms))
}

/// Whether `b` holds what `a` does, but for expiry instants within `slack_ms` (a store counts
/// a TTL from its own clock) and a store's own one-time markers (`memscope/`, written when a
/// shell first starts on an empty store).
pub fn same(a: &Contents, b: &Contents, slack_ms: u64) -> Result<(), String> {
    let own = |e: &&KvEntry| !e.key.starts_with(keys::MEMORY_SCOPES_MOVED);
    let b = &Contents {
        kv: b.kv.iter().filter(own).cloned().collect(),
        files: b.files.clone(),
    };
    if a.files != b.files {
        let names = |c: &Contents| c.files.keys().cloned().collect::<Vec<_>>();
        return Err(format!("files differ: {:?} vs {:?}", names(a), names(b)));
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
