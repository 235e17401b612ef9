//! Export and import in one process: a bot with memory, a session, a workspace file, a pending
//! and a recurring reminder, a pairing and usage, exported and imported into a fresh store
//! holds the same (memory byte-identical, recalled alike, each reminder firing once at its
//! time, `/usage` unchanged); a second import changes nothing; an existing store keeps what
//! differs unless asked; one person's export holds nothing of another. (OpenClaw's:
//! `archive_openclaw.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use clawless_core::archive::{unpack, Limits, Merge, Whom};
use clawless_core::ids::{ConnectorId, Scope};
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const MIN: Duration = Duration::from_secs(60);
const FRIEND: i64 = 222_222_222;

fn message(update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(100 + update_id);
    u["message"]["text"] = json!(text);
    u
}

fn owner_scope() -> Scope {
    Scope::new(format!("assistant/main/u{OWNER_ID}"))
}

fn memory_path() -> String {
    format!("memory/assistant/main/u{OWNER_ID}/MEMORY.md")
}

/// Every Kv entry (key, value, expiry) and every file the store holds.
pub async fn snapshot(
    h: &Harness,
) -> (
    Vec<(String, Vec<u8>, Option<u64>)>,
    BTreeMap<String, Vec<u8>>,
) {
    let kv = h
        .platform
        .kv
        .scan("", "", 1_000_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.value, e.expires_at_ms))
        .collect();
    let mut files = BTreeMap::new();
    for path in h.platform.files.list("").await.unwrap() {
        files.insert(path.clone(), h.platform.files.read(&path).await.unwrap());
    }
    (kv, files)
}

/// A bot that has been used: a conversation, memory, a workspace file, two reminders, a
/// friend paired, and the friend's own memory.
async fn used_bot() -> Harness {
    let h = Harness::new(Wire::Anthropic);
    h.script(200, anthropic_text("Hello, Sam."));
    h.deliver_raw(&message(1, "hello")).await;
    for (id, input) in [
        (
            2,
            json!({"action": "create", "in_minutes": 10, "text": "tea"}),
        ),
        (
            3,
            json!({"action": "create", "cron": "0 * * * *", "text": "stretch"}),
        ),
    ] {
        h.script(
            200,
            anthropic_tool_use(&format!("t{id}"), "schedule", input),
        );
        h.script(200, anthropic_text("Done."));
        h.deliver_raw(&message(id, "please schedule it")).await;
    }
    let files = &h.platform.files;
    files
        .write(
            &memory_path(),
            b"# Notes\n\n- The door code is 2468.\n- Sam's cat is called Miso.\n",
        )
        .await
        .unwrap();
    files
        .write(
            &format!("workspace/assistant/main/u{OWNER_ID}/plan.txt"),
            &[0, 1, 2, 255, b'x'],
        )
        .await
        .unwrap();
    files
        .write(
            &format!("memory/assistant/main/u{FRIEND}/MEMORY.md"),
            b"- The friend's secret is 9999.\n",
        )
        .await
        .unwrap();
    let paired = json!({"by": OWNER_ID, "at_ms": 1_700_000_000_000u64}).to_string();
    h.platform
        .kv
        .put(&format!("paired/main/{FRIEND}"), paired.as_bytes(), None)
        .await
        .unwrap();
    h.app.memory_store().reindex(&owner_scope()).await.unwrap();
    h
}

fn alarms(h: &Harness) -> Vec<String> {
    h.sent_texts()
        .into_iter()
        .filter(|t| t.starts_with('⏰'))
        .collect()
}

async fn usage(h: &Harness, update_id: i64) -> String {
    h.deliver_raw(&message(update_id, "/usage")).await;
    h.sent_texts().last().unwrap().clone()
}

async fn recall(h: &Harness, query: &str) -> Vec<String> {
    let hits = h
        .app
        .memory_store()
        .search(&owner_scope(), query)
        .await
        .unwrap();
    hits.into_iter().map(|hit| hit.text).collect()
}

#[test]
fn a_bot_moves_whole_and_a_second_import_changes_nothing() {
    block_on(async {
        let a = used_bot().await;
        let archive = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
        let (manifest, held) = unpack(&archive, &Limits::default()).unwrap();
        assert_eq!(manifest.whom, "bot");
        assert_eq!(manifest.source, "native");
        assert!(held.kv.iter().any(|e| e.key.starts_with("session/")));
        assert!(held.kv.iter().any(|e| e.key.starts_with("usage/")));
        assert_eq!(
            held.kv
                .iter()
                .filter(|e| e.key.starts_with("sched/"))
                .count(),
            2,
            "both reminders"
        );
        assert!(
            !held.kv.iter().any(|e| e.key.starts_with("inbox/")
                || e.key.starts_with("memidx/")
                || e.key.starts_with("seen/")),
            "nothing in flight or rebuilt"
        );

        let b = Harness::new(Wire::Anthropic);
        let report = b
            .app
            .admin()
            .import(&archive, &Limits::default(), Merge::KeepOurs)
            .await
            .unwrap();
        assert_eq!(report.added, held.kv.len(), "{report}");
        assert_eq!(report.files_added, held.files.len());
        assert!(
            report.reindexed >= 2,
            "both people's memory indexed: {report}"
        );

        // The same again, byte for byte, and once more changes nothing.
        let again = b.app.admin().export(&Whom::Bot, "native").await.unwrap();
        assert_eq!(unpack(&again, &Limits::default()).unwrap().1, held);
        let before = snapshot(&b).await;
        let second = b
            .app
            .admin()
            .import(&archive, &Limits::default(), Merge::KeepOurs)
            .await
            .unwrap();
        assert!(!second.changed(), "{second}");
        assert_eq!(second.same, held.kv.len());
        assert_eq!(
            snapshot(&b).await,
            before,
            "the second import wrote nothing"
        );

        assert_eq!(
            b.platform.files.read(&memory_path()).await.unwrap(),
            a.platform.files.read(&memory_path()).await.unwrap()
        );
        for query in ["door code", "cat"] {
            assert_eq!(recall(&b, query).await, recall(&a, query).await, "{query}");
            assert!(!recall(&b, query).await.is_empty(), "{query} recalled");
        }
        assert_eq!(usage(&b, 50).await, usage(&a, 50).await);

        // Each reminder fires once at its time on the new store.
        b.app.scheduled().await;
        assert!(alarms(&b).is_empty(), "nothing before its time");
        b.clock.advance(10 * MIN);
        b.app.scheduled().await;
        b.app.scheduled().await;
        assert_eq!(alarms(&b), ["⏰ tea"]);
        b.clock.advance(50 * MIN);
        b.app.scheduled().await;
        b.app.scheduled().await;
        assert_eq!(alarms(&b), ["⏰ tea", "⏰ stretch"]);
    });
}

#[test]
fn an_existing_store_keeps_what_differs_unless_asked() {
    block_on(async {
        let a = used_bot().await;
        let archive = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
        let b = Harness::new(Wire::Anthropic);
        b.platform
            .files
            .write(&memory_path(), b"- Newer here.\n")
            .await
            .unwrap();
        let kept = b
            .app
            .admin()
            .import(&archive, &Limits::default(), Merge::KeepOurs)
            .await
            .unwrap();
        assert_eq!(kept.files_kept, 1, "{kept}");
        assert_eq!(
            b.platform.files.read(&memory_path()).await.unwrap(),
            b"- Newer here.\n"
        );
        let replaced = b
            .app
            .admin()
            .import(&archive, &Limits::default(), Merge::Replace)
            .await
            .unwrap();
        assert_eq!(replaced.files_replaced, 1, "{replaced}");
        assert_eq!(
            b.platform.files.read(&memory_path()).await.unwrap(),
            a.platform.files.read(&memory_path()).await.unwrap()
        );
    });
}

#[test]
fn a_persons_export_holds_theirs_and_nothing_of_another() {
    block_on(async {
        let a = used_bot().await;
        let friend = Whom::Person {
            connector: ConnectorId::new("main"),
            user: FRIEND,
        };
        let archive = a.app.admin().export(&friend, "native").await.unwrap();
        let (manifest, held) = unpack(&archive, &Limits::default()).unwrap();
        assert_eq!(manifest.whom, format!("person main {FRIEND}"));
        assert_eq!(
            held.files.keys().collect::<Vec<_>>(),
            [&format!("memory/assistant/main/u{FRIEND}/MEMORY.md")]
        );
        for (path, bytes) in &held.files {
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.contains("2468") && !text.contains("Miso"), "{path}");
        }
        for e in &held.kv {
            assert!(!e.key.contains(&OWNER_ID.to_string()), "{}", e.key);
            let value = String::from_utf8_lossy(&e.value);
            assert!(!value.contains("Hello, Sam"), "{}", e.key);
        }
        assert!(held
            .kv
            .iter()
            .any(|e| e.key == format!("paired/main/{FRIEND}")));
    });
}

#[test]
fn a_due_entry_older_than_its_reminder_is_rebuilt_and_the_reminder_fires_once() {
    block_on(async {
        let a = used_bot().await;
        let archive = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
        let (mut manifest, mut held) = unpack(&archive, &Limits::default()).unwrap();
        // As an export of a live store can be: the due entries a moment behind the records.
        let due: Vec<usize> = (0..held.kv.len())
            .filter(|i| held.kv[*i].key.starts_with("sched-due/"))
            .collect();
        assert_eq!(due.len(), 2);
        for i in due {
            let (at, conn, chat, id) = clawless_core::keys::parse_due(&held.kv[i].key).unwrap();
            held.kv[i].key = clawless_core::keys::due(at - 60_000, &conn, chat, id);
        }
        held.kv.sort_by(|x, y| x.key.cmp(&y.key));
        manifest.sha256.clear();
        let skewed = clawless_core::archive::pack(manifest, &held).unwrap();
        let b = Harness::new(Wire::Anthropic);
        b.app
            .admin()
            .import(&skewed, &Limits::default(), Merge::KeepOurs)
            .await
            .unwrap();
        b.clock.advance(9 * MIN);
        b.app.scheduled().await;
        assert!(alarms(&b).is_empty(), "not at the stale time");
        b.clock.advance(MIN);
        b.app.scheduled().await;
        b.app.scheduled().await;
        assert_eq!(alarms(&b), ["⏰ tea"], "once, at the reminder's own time");
    });
}
