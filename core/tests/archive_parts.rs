//! An archive moved in parts, as `clawless export --remote` and `import --remote` move it
//! through a shell's admin endpoint: a store larger than one part (many small entries, values
//! and files of megabytes, one of each over what a request carries) exported part by part from
//! cursors holds what one export holds, but for the oversized ones, which each part names; cut
//! into parts and imported part by part, then indexed scope by scope, it gives a store that holds
//! the same and recalls the memory, and doing it again changes nothing. Every part stays within
//! what one request carries; a part naming a scope that is not one is refused, nothing written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::admin_http::MAX_ADMIN_BODY;
use clawless_core::archive::{
    reindex_parts, split, unpack, ArchiveError, Contents, Joined, Limits, Merge, Whom, PART_BYTES,
    PART_ITEMS,
};
use std::sync::Arc;

use clawless_core::ids::{ConnectorId, Scope, SessionKey};
use clawless_core::keys;
use clawless_core::schedule::{Origin, Reminder, What};
use clawless_core::Config;
use clawless_platform::{MemoryFiles, MemoryKv};
use clawless_testkit::fixtures::OWNER_ID;
use futures::executor::block_on;
use support::{Harness, Wire};

const PEOPLE: [i64; 3] = [OWNER_ID, 222_222_222, 333_333_333];

fn note_path(person: i64, day: u32) -> String {
    format!("memory/assistant/main/u{person}/memory/2026-10-{day:02}.md")
}

/// A harness whose Kv and Files count their operations (each a D1 query on the Worker).
fn counted() -> (Harness, Arc<MemoryKv>, Arc<MemoryFiles>) {
    let mut kept = None;
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let h = Harness::with_ports(Wire::Anthropic, config, |platform, _, clock| {
        let kv = Arc::new(MemoryKv::new(clock));
        let files = Arc::new(MemoryFiles::default());
        platform.kv = kv.clone();
        platform.files = files.clone();
        kept = Some((kv, files));
    });
    let (kv, files) = kept.unwrap();
    (h, kv, files)
}

/// Kv and Files operations of one request, at most: under a free-plan Worker's 50 D1 queries
/// with room for the request's own (an isolate's first checks its schema and the store's
/// version) and the memory index's writes of an index part.
const REQUEST_OPS: usize = 30;

type Counted = (Harness, Arc<MemoryKv>, Arc<MemoryFiles>);

/// A store of 150 sessions (five of 700 KB, one of 3.5 MB), 40 usage counters with their TTL,
/// 60 daily notes across three people, a 2.5 MB workspace file and a 3.5 MB one.
async fn filled() -> Counted {
    let (h, counted_kv, counted_files) = counted();
    let (kv, files) = (&h.platform.kv, &h.platform.files);
    let conn = ConnectorId::new("main");
    for i in 0..150i64 {
        let size = match i {
            0..=4 => 700_000,
            5 => PART_BYTES + 500_000,
            _ => 300,
        };
        let value: Vec<u8> = (0..size).map(|n| (n * 7 + i as usize) as u8).collect();
        let key = keys::session(&SessionKey::new(format!("main:{}", 1_000 + i)));
        kv.put(&key, &value, None).await.unwrap();
    }
    for day in 0..40 {
        let key = keys::usage(
            &conn,
            &format!("d2026-10-{:02}", day % 28 + 1),
            &format!("u{day}"),
        );
        let ttl = std::time::Duration::from_secs(86_400 * (day + 1));
        kv.put(
            &key,
            br#"{"calls":1,"input":3,"output":4,"cached_input":0,"cost_micros":9}"#,
            Some(ttl),
        )
        .await
        .unwrap();
    }
    // Reminders cost the most to import: each is written, then its due entry. The counter
    // says the ids were given out here (an import raises it to the ids it writes).
    kv.put(&keys::reminder_ids(&conn), b"25", None)
        .await
        .unwrap();
    for id in 1..=25u64 {
        let reminder = Reminder {
            id,
            origin: Origin {
                connector: conn.clone(),
                chat: OWNER_ID,
                chat_type: "private".into(),
                thread: None,
                user: OWNER_ID,
                user_name: "Sam".into(),
            },
            what: What::Text(format!("reminder {id}")),
            cron: None,
            zone: "UTC".into(),
            next_ms: 1_800_000_000_000 + id * 60_000,
            created_ms: 1_700_000_000_000,
        };
        let key = keys::reminder(&conn, OWNER_ID, id);
        kv.put(&key, &serde_json::to_vec(&reminder).unwrap(), None)
            .await
            .unwrap();
        let due = keys::due(reminder.next_ms, &conn, OWNER_ID, id);
        kv.put(&due, b"", None).await.unwrap();
    }
    for (n, person) in PEOPLE.iter().enumerate() {
        for day in 1..=20 {
            let text = format!(
                "- Day {day} of person {n}: the harbour crane number {}.\n",
                day * 31 + n as u32
            );
            files
                .write(&note_path(*person, day), text.as_bytes())
                .await
                .unwrap();
        }
    }
    let big: Vec<u8> = (0..2_500_000u32).map(|n| (n % 251) as u8).collect();
    files
        .write(
            &format!("workspace/assistant/main/u{OWNER_ID}/big.bin"),
            &big,
        )
        .await
        .unwrap();
    let over: Vec<u8> = vec![7; PART_BYTES + 500_000];
    files
        .write(
            &format!("workspace/assistant/main/u{OWNER_ID}/over.bin"),
            &over,
        )
        .await
        .unwrap();
    (h, counted_kv, counted_files)
}

/// `whom`'s export of `h` taken part by part from the cursors; the joined archive's manifest
/// and contents, and how many parts it took.
async fn export_in_parts(
    (h, kv, files): &Counted,
    whom: &Whom,
) -> (clawless_core::archive::Manifest, Contents, usize) {
    let (mut joined, mut cursor) = (Joined::default(), String::new());
    let (mut parts, mut most) = (0, 0);
    loop {
        let before = kv.ops() + files.ops();
        let part = h
            .app
            .admin()
            .export_part(whom, "native", &cursor)
            .await
            .unwrap();
        let ops = kv.ops() + files.ops() - before;
        parts += 1;
        assert!(ops <= REQUEST_OPS, "part {parts}: {ops} store operations");
        most = most.max(ops);
        assert!(
            part.len() <= MAX_ADMIN_BODY,
            "part {parts}: {} bytes",
            part.len()
        );
        let (manifest, contents) = unpack(&part, &Limits::export_part()).unwrap();
        match joined.add(manifest, contents).unwrap() {
            Some(next) => {
                assert_ne!(next, cursor, "part {parts} moved on");
                cursor = next;
            }
            None => break,
        }
        assert!(parts < 1_000);
    }
    eprintln!("export: {parts} parts, at most {most} store operations each");
    let archive = joined.archive(&Limits::default()).unwrap();
    let (manifest, contents) = unpack(&archive, &Limits::default()).unwrap();
    (manifest, contents, parts)
}

#[test]
fn an_export_in_parts_holds_what_one_export_holds_but_the_oversized() {
    block_on(async {
        let store = filled().await;
        let h = &store.0;
        let (whole, _) = h.app.admin().export_contents(&Whom::Bot).await.unwrap();
        let (manifest, joined, parts) = export_in_parts(&store, &Whom::Bot).await;
        assert!(parts > 3, "{parts} parts");
        let oversized_key = keys::session(&SessionKey::new("main:1005"));
        let oversized_file = format!("workspace/assistant/main/u{OWNER_ID}/over.bin");
        let mut expected = whole.clone();
        expected.kv.retain(|e| e.key != oversized_key);
        expected.files.remove(&oversized_file);
        assert_eq!(joined.kv.len(), expected.kv.len());
        assert!(joined == expected, "the parts hold what one export holds");
        assert_eq!(manifest.left_out.len(), 2, "{:?}", manifest.left_out);
        assert!(manifest
            .left_out
            .iter()
            .any(|l| l.starts_with(&oversized_key)));
        assert!(manifest
            .left_out
            .iter()
            .any(|l| l.starts_with(&oversized_file)));
        assert!(manifest.next.is_none());

        // One person's, in parts, is their export.
        let person = Whom::Person {
            connector: ConnectorId::new("main"),
            user: PEOPLE[1],
        };
        let (mine, _) = h.app.admin().export_contents(&person).await.unwrap();
        let (_, joined, _) = export_in_parts(&store, &person).await;
        assert_eq!(joined, mine);
        assert_eq!(joined.files.len(), 20);

        // A cursor this build did not give is refused.
        for bad in ["x", "k99:", "kq:a"] {
            let e = h
                .app
                .admin()
                .export_part(&Whom::Bot, "native", bad)
                .await
                .unwrap_err();
            assert!(matches!(e, ArchiveError::Damaged(_)), "{bad}: {e}");
        }
    });
}

#[test]
fn an_import_in_parts_gives_the_same_store_and_again_changes_nothing() {
    block_on(async {
        let (a, _, _) = filled().await;
        let whole = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
        let (manifest, held) = unpack(&whole, &Limits::default()).unwrap();
        // Refused before anything is sent: a file and an entry over one part.
        let e = split(&manifest, &held).unwrap_err();
        assert!(
            e.to_string().contains("one request to a shell carries"),
            "{e}"
        );
        let mut movable = held.clone();
        movable.files.retain(|_, b| b.len() <= PART_BYTES);
        let over = |e: &clawless_platform::KvEntry| e.key.len() + e.value.len() > PART_BYTES;
        assert!(split(
            &manifest,
            &Contents {
                kv: held.kv.clone(),
                files: movable.files.clone()
            }
        )
        .is_err());
        movable.kv.retain(|e| !over(e));

        let (parts, notes) = split(&manifest, &movable).unwrap();
        assert!(parts.len() >= (movable.kv.len() + movable.files.len()) / PART_ITEMS);
        assert_eq!(notes.len(), 20 * PEOPLE.len());
        for part in &parts {
            assert!(part.len() <= MAX_ADMIN_BODY, "{} bytes", part.len());
            let (m, c) = unpack(part, &Limits::part()).unwrap();
            assert!(c.kv.len() + c.files.len() <= PART_ITEMS);
            assert_eq!(
                m.reindex,
                Some(Vec::new()),
                "the index waits for the last part"
            );
        }
        let (b, kv, files) = counted();
        let count = parts.len();
        let all: Vec<Vec<u8>> = parts
            .into_iter()
            .chain(reindex_parts(&manifest, &notes).unwrap())
            .collect();
        let mut first = clawless_core::archive::ImportReport::default();
        let mut most = [0, 0];
        for (i, part) in all.iter().enumerate() {
            let before = kv.ops() + files.ops();
            first.add(
                b.app
                    .admin()
                    .import(part, &Limits::part(), Merge::KeepOurs)
                    .await
                    .unwrap(),
            );
            let ops = kv.ops() + files.ops() - before;
            let what = if i < count { "data" } else { "index" };
            assert!(
                ops <= REQUEST_OPS,
                "{what} part {i}: {ops} store operations"
            );
            most[usize::from(i >= count)] = most[usize::from(i >= count)].max(ops);
        }
        eprintln!(
            "import: {count} data parts, at most {} store operations each; {} index parts, at most {}",
            most[0],
            all.len() - count,
            most[1]
        );
        assert_eq!(first.added + first.same, movable.kv.len(), "{first}");
        assert_eq!(first.files_added, movable.files.len());
        assert_eq!(first.reindexed, 60, "each note indexed once: {first}");

        let (again, _) = b.app.admin().export_contents(&Whom::Bot).await.unwrap();
        let own = |c: &Contents| Contents {
            kv: c
                .kv
                .iter()
                .filter(|e| !e.key.starts_with(keys::MEMORY_SCOPES_MOVED))
                .cloned()
                .collect(),
            files: c.files.clone(),
        };
        assert_eq!(own(&again).files, movable.files);
        assert_eq!(own(&again).kv.len(), own(&movable).kv.len());
        let scope = Scope::new(format!("assistant/main/u{}", PEOPLE[2]));
        let hits = b
            .app
            .memory_store()
            .search(&scope, "harbour crane number 622")
            .await
            .unwrap();
        assert!(
            hits.iter().any(|h| h.text.contains("622")),
            "recalled: {hits:?}"
        );

        let mut second = clawless_core::archive::ImportReport::default();
        for part in &all[..count] {
            second.add(
                b.app
                    .admin()
                    .import(part, &Limits::part(), Merge::KeepOurs)
                    .await
                    .unwrap(),
            );
        }
        assert!(!second.changed(), "{second}");

        // A part naming a scope that is not one is refused, nothing of it written.
        let mut forged = manifest.clone();
        forged.reindex = Some(vec!["memory/assistant/../../etc/MEMORY.md".into()]);
        let one = Contents {
            kv: vec![clawless_platform::KvEntry {
                key: keys::session(&SessionKey::new("main:42")),
                value: b"{}".to_vec(),
                expires_at_ms: None,
            }],
            files: Default::default(),
        };
        let part = clawless_core::archive::pack(forged, &one).unwrap();
        let e = b
            .app
            .admin()
            .import(&part, &Limits::part(), Merge::KeepOurs)
            .await
            .unwrap_err();
        assert!(matches!(e, ArchiveError::BadName(_)), "{e}");
        assert!(b.platform.kv.get(&one.kv[0].key).await.unwrap().is_none());
    });
}
