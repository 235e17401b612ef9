//! An archive of a version-1 store (before memory was per person: a connector's notes under
//! `memory/<agent>/<connector>/`) imported into today's store, whole and in parts: the notes
//! land in the owner's memory, where recall reads them, though this store's own move was
//! marked done when it was brought up; a second import changes nothing; notes of a connector
//! with no owner here stay where they were, said, and move once an owner is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::collections::BTreeMap;

use clawless_core::archive::{pack, reindex_parts, split, Contents, Limits, Manifest, Merge};
use clawless_core::ids::Scope;
use clawless_testkit::fixtures::OWNER_ID;
use futures::executor::block_on;
use support::{Harness, Wire};

fn v1_archive(connector: &str) -> (Manifest, Contents) {
    let manifest = Manifest {
        format: 1,
        source: "native".into(),
        by: "0.0.9".into(),
        created_at_ms: 1_700_000_000_000,
        store_version: 1,
        whom: "bot".into(),
        kv_entries: 0,
        files: 2,
        sha256: BTreeMap::new(),
        left_out: Vec::new(),
        next: None,
        reindex: None,
    };
    let mut files = BTreeMap::new();
    files.insert(
        format!("memory/assistant/{connector}/MEMORY.md"),
        b"- The door code is 2468.\n".to_vec(),
    );
    files.insert(
        format!("memory/assistant/{connector}/memory/2024-02-01.md"),
        b"- The boiler was serviced on 1 February.\n".to_vec(),
    );
    (
        manifest,
        Contents {
            kv: Vec::new(),
            files,
        },
    )
}

/// A bot as a shell leaves it at start: its store brought up to today's layout.
async fn today() -> Harness {
    let h = Harness::new(Wire::Anthropic);
    h.app.upgrade_store().await.unwrap();
    h
}

async fn recall(h: &Harness, query: &str) -> String {
    let scope = Scope::new(format!("assistant/main/u{OWNER_ID}"));
    let hits = h.app.memory_store().search(&scope, query).await.unwrap();
    hits.into_iter()
        .map(|hit| hit.text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_version_1_archive_s_notes_land_where_recall_reads_them() {
    block_on(async {
        let (manifest, contents) = v1_archive("main");
        let archive = pack(manifest, &contents).unwrap();
        let h = today().await;
        let admin = h.app.admin();
        let report = admin
            .import(&archive, &Limits::default(), Merge::KeepOurs)
            .await
            .unwrap();
        assert_eq!(report.files_added, 2, "{report}");
        let files = &h.platform.files;
        let owner = format!("memory/assistant/main/u{OWNER_ID}");
        assert_eq!(
            files.read(&format!("{owner}/MEMORY.md")).await.unwrap(),
            b"- The door code is 2468.\n"
        );
        assert!(files.read("memory/assistant/main/MEMORY.md").await.is_err());
        assert!(recall(&h, "door code").await.contains("2468"));
        assert!(recall(&h, "boiler serviced").await.contains("1 February"));
        let again = admin
            .import(&archive, &Limits::default(), Merge::KeepOurs)
            .await
            .unwrap();
        assert!(!again.changed(), "{again}");
        assert_eq!(again.files_same, 2, "{again}");
    });
}

#[test]
fn in_parts_too() {
    block_on(async {
        let (manifest, contents) = v1_archive("main");
        let (parts, notes) = split(&manifest, &contents).unwrap();
        let h = today().await;
        let admin = h.app.admin();
        for part in parts
            .iter()
            .chain(&reindex_parts(&manifest, &notes).unwrap())
        {
            let report = admin
                .import(part, &Limits::part(), Merge::KeepOurs)
                .await
                .unwrap();
            assert!(report.not_indexed.is_empty(), "{report}");
        }
        assert!(recall(&h, "door code").await.contains("2468"));
    });
}

#[test]
fn a_connector_without_an_owner_here_keeps_them_until_one_is_set() {
    block_on(async {
        let (manifest, contents) = v1_archive("other");
        let archive = pack(manifest, &contents).unwrap();
        let h = today().await;
        let report = h
            .app
            .admin()
            .import(&archive, &Limits::default(), Merge::KeepOurs)
            .await
            .unwrap();
        assert_eq!(report.unplaced, ["assistant/other"], "{report}");
        assert!(report.to_string().contains("once one is set"), "{report}");
        let held = h
            .platform
            .files
            .read("memory/assistant/other/MEMORY.md")
            .await;
        assert_eq!(held.unwrap(), b"- The door code is 2468.\n");
        let marker = clawless_core::keys::memory_scopes_moved(&Scope::new("assistant/other"));
        assert_eq!(h.platform.kv.get(&marker).await.unwrap(), None);
    });
}
