//! Reminders through restores and merges: a backup restored days later (past the 48 h `seen/`
//! markers) fires none of the one-offs that fired since, and the recurring ones go on from now
//! instead of firing for the past; the tombstones travel in later exports, so a fresh store
//! given the backup and a later export, in either order, fires nothing again; a merge of two
//! bots whose reminders share an id keeps both (one renumbered), with or without overwrite,
//! each firing once; a format-1 archive still imports.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::io::Read;
use std::time::Duration;

use clawless_core::archive::{unpack, ImportReport, Limits, Merge, Whom};
use clawless_core::ids::ConnectorId;
use clawless_core::schedule::{Reminder, Schedules, FIRED_TTL};
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const MIN: Duration = Duration::from_secs(60);
const DAYS_3: Duration = Duration::from_secs(3 * 86_400);

fn message(update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(100 + update_id);
    u["message"]["text"] = json!(text);
    u
}

/// The model sets a reminder with the schedule tool, as the owner asked.
async fn schedule(h: &Harness, update_id: i64, input: Value) {
    h.script(
        200,
        anthropic_tool_use(&format!("t{update_id}"), "schedule", input),
    );
    h.script(200, anthropic_text("Done."));
    h.deliver_raw(&message(update_id, "please schedule it"))
        .await;
}

/// A bot with a one-off in ten minutes ("tea") and an hourly one ("stretch"); its clock on a
/// whole hour.
async fn bot() -> Harness {
    let h = Harness::new(Wire::Anthropic);
    schedule(
        &h,
        1,
        json!({"action": "create", "in_minutes": 10, "text": "tea"}),
    )
    .await;
    schedule(
        &h,
        2,
        json!({"action": "create", "cron": "0 * * * *", "text": "stretch"}),
    )
    .await;
    h
}

fn alarms(h: &Harness) -> Vec<String> {
    h.sent_texts()
        .into_iter()
        .filter(|t| t.starts_with('⏰'))
        .collect()
}

/// Runs the scheduler twice (a firing, then whatever a repeat would add).
async fn tick(h: &Harness) {
    h.app.scheduled().await;
    h.app.scheduled().await;
}

async fn import(h: &Harness, archive: &[u8], merge: Merge) -> ImportReport {
    h.app
        .admin()
        .import(archive, &Limits::default(), merge)
        .await
        .unwrap()
}

async fn held(h: &Harness) -> Vec<Reminder> {
    let store = Schedules {
        kv: &*h.platform.kv,
        clock: &*h.platform.clock,
        wake: None,
    };
    store
        .list(&ConnectorId::new("main"), OWNER_ID)
        .await
        .unwrap()
}

/// `a`'s backup before anything fired, and its export after tea fired and stretch fired twice
/// (the second time after three days off), its clock then three days and an hour on.
async fn backup_and_later() -> (Harness, Vec<u8>, Vec<u8>) {
    let a = bot().await;
    let backup = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
    a.clock.advance(10 * MIN);
    tick(&a).await;
    a.clock.advance(50 * MIN);
    tick(&a).await;
    assert_eq!(alarms(&a), ["⏰ tea", "⏰ stretch"]);
    a.clock.advance(DAYS_3);
    tick(&a).await;
    assert_eq!(alarms(&a), ["⏰ tea", "⏰ stretch", "⏰ stretch"]);
    let later = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
    (a, backup, later)
}

/// A fresh store whose clock reads what `a`'s does.
fn fresh_beside(a: &Harness) -> Harness {
    let b = Harness::new(Wire::Anthropic);
    let behind = a.platform.clock.now_ms() - b.platform.clock.now_ms();
    b.clock.advance(Duration::from_millis(behind));
    b
}

#[test]
fn a_backup_restored_days_later_fires_nothing_again() {
    block_on(async {
        let (a, backup, _) = backup_and_later().await;
        let report = import(&a, &backup, Merge::KeepOurs).await;
        assert_eq!(report.reminders.fired, 1, "tea fired already: {report}");
        assert_eq!(report.reminders.kept, 1, "stretch is here: {report}");
        assert_eq!(report.reminders.added + report.reminders.renumbered, 0);
        tick(&a).await;
        assert_eq!(alarms(&a).len(), 3, "nothing again: {:?}", alarms(&a));
        a.clock.advance(60 * MIN);
        tick(&a).await;
        assert_eq!(alarms(&a).len(), 4);
        assert_eq!(alarms(&a).last().unwrap(), "⏰ stretch");
        // Overwriting changes none of it.
        let report = import(&a, &backup, Merge::Replace).await;
        assert_eq!((report.reminders.fired, report.reminders.kept), (1, 1));
        tick(&a).await;
        assert_eq!(alarms(&a).len(), 4);
    });
}

#[test]
fn the_tombstone_travels_so_a_fresh_store_fires_nothing_again_in_either_order() {
    block_on(async {
        let (a, backup, later) = backup_and_later().await;
        let (_, held_later) = unpack(&later, &Limits::default()).unwrap();
        let tomb = held_later
            .kv
            .iter()
            .find(|e| e.key.starts_with("sched-fired/main/"))
            .expect("the export holds tea's tombstone");
        let now = a.platform.clock.now_ms();
        let year = FIRED_TTL.as_millis() as u64;
        let exp = tomb.expires_at_ms.expect("a tombstone expires");
        assert!(
            exp > now + year - 4 * 86_400_000 && exp <= now + year,
            "{exp}"
        );

        for backup_first in [true, false] {
            let c = fresh_beside(&a);
            let order: [&[u8]; 2] = match backup_first {
                true => [&backup, &later],
                false => [&later, &backup],
            };
            let first = import(&c, order[0], Merge::KeepOurs).await;
            let second = import(&c, order[1], Merge::KeepOurs).await;
            if backup_first {
                assert_eq!(second.reminders.removed, 1, "tea deleted: {second}");
            } else {
                assert_eq!(second.reminders.fired, 1, "tea not brought back: {second}");
            }
            assert_eq!(first.reminders.refused + second.reminders.refused, 0);
            let texts: Vec<String> = held(&c)
                .await
                .iter()
                .map(|r| r.what.body().to_owned())
                .collect();
            assert_eq!(texts, ["stretch"], "backup first: {backup_first}");
            tick(&c).await;
            assert!(
                alarms(&c).is_empty(),
                "nothing for the past: {:?}",
                alarms(&c)
            );
            c.clock.advance(60 * MIN);
            tick(&c).await;
            assert_eq!(alarms(&c), ["⏰ stretch"], "backup first: {backup_first}");
        }
    });
}

#[test]
fn a_backup_alone_in_a_fresh_store_goes_on_from_now() {
    block_on(async {
        let (a, backup, _) = backup_and_later().await;
        let c = fresh_beside(&a);
        let report = import(&c, &backup, Merge::KeepOurs).await;
        assert_eq!(report.reminders.added, 2, "{report}");
        // Nothing here can know tea fired: it is owed, once. Stretch waits for its hour.
        tick(&c).await;
        assert_eq!(alarms(&c), ["⏰ tea"]);
        c.clock.advance(60 * MIN);
        tick(&c).await;
        assert_eq!(alarms(&c), ["⏰ tea", "⏰ stretch"]);

        // A year and more after tea was due, it is refused: its tombstone could be gone.
        let d = fresh_beside(&a);
        d.clock.advance(FIRED_TTL);
        let report = import(&d, &backup, Merge::KeepOurs).await;
        assert_eq!((report.reminders.added, report.reminders.refused), (1, 1));
        assert!(
            report.to_string().contains("more than a year ago"),
            "{report}"
        );
        tick(&d).await;
        assert!(alarms(&d).is_empty());
    });
}

/// A second bot whose own reminder "call mum", in twenty minutes, has tea's id.
async fn other_bot() -> Harness {
    let b = Harness::new(Wire::Anthropic);
    schedule(
        &b,
        1,
        json!({"action": "create", "in_minutes": 20, "text": "call mum"}),
    )
    .await;
    b
}

#[test]
fn a_merge_renumbers_a_colliding_id_and_loses_nothing() {
    block_on(async {
        let a = Harness::new(Wire::Anthropic);
        schedule(
            &a,
            1,
            json!({"action": "create", "in_minutes": 10, "text": "tea"}),
        )
        .await;
        let archive = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
        for merge in [Merge::KeepOurs, Merge::Replace] {
            let b = other_bot().await;
            assert_eq!(
                held(&b).await[0].id,
                held(&a).await[0].id,
                "the ids collide"
            );
            let report = import(&b, &archive, merge).await;
            assert_eq!(report.reminders.renumbered, 1, "{merge:?}: {report}");
            assert!(report.to_string().contains("1 renumbered"), "{report}");
            let mut texts: Vec<(u64, String)> = held(&b)
                .await
                .into_iter()
                .map(|r| (r.id, r.what.body().to_owned()))
                .collect();
            texts.sort();
            assert_eq!(
                texts,
                [(1, "call mum".to_owned()), (2, "tea".to_owned())],
                "{merge:?}: the bot's own is not lost"
            );
            // Importing again finds tea under its new id.
            let again = import(&b, &archive, merge).await;
            assert!(!again.changed(), "{merge:?}: {again}");
            assert_eq!(again.reminders.kept, 1);
            assert_eq!(held(&b).await.len(), 2);
            // A reminder made after the merge takes an id neither had.
            schedule(
                &b,
                2,
                json!({"action": "create", "in_minutes": 30, "text": "water"}),
            )
            .await;
            assert_eq!(held(&b).await.last().unwrap().id, 3, "{merge:?}");

            for _ in 0..3 {
                b.clock.advance(10 * MIN);
                tick(&b).await;
            }
            tick(&b).await;
            assert_eq!(
                alarms(&b),
                ["⏰ tea", "⏰ call mum", "⏰ water"],
                "{merge:?}: each once"
            );
        }
    });
}

#[test]
fn a_format_1_archive_still_imports() {
    block_on(async {
        let a = bot().await;
        let archive = a.app.admin().export(&Whom::Bot, "native").await.unwrap();
        let old = with_format(&archive, 1);
        let (manifest, _) = unpack(&old, &Limits::default()).unwrap();
        assert_eq!(manifest.format, 1);
        let b = fresh_beside(&a);
        let report = import(&b, &old, Merge::KeepOurs).await;
        assert_eq!(report.reminders.added, 2, "{report}");
        b.clock.advance(10 * MIN);
        tick(&b).await;
        b.clock.advance(50 * MIN);
        tick(&b).await;
        assert_eq!(alarms(&b), ["⏰ tea", "⏰ stretch"]);
    });
}

/// `archive` with its manifest saying `format` (the manifest is in no checksum).
fn with_format(archive: &[u8], format: u32) -> Vec<u8> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut out = tar::Builder::new(gz);
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        if name == "manifest.json" {
            let mut m: Value = serde_json::from_slice(&data).unwrap();
            m["format"] = json!(format);
            data = serde_json::to_vec(&m).unwrap();
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        out.append_data(&mut header, &name, data.as_slice())
            .unwrap();
    }
    out.into_inner().unwrap().finish().unwrap()
}
