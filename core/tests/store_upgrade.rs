//! The store's layout version: each earlier version's fixture (today's included) is brought up
//! to the current one, once; a second run changes nothing; a store without an owner for its
//! old memory waits; a store newer than the binary is refused and left as it was.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::upgrade::{check, set_version, UpgradeError, Upgraded, CURRENT};
use clawless_core::Config;

use clawless_testkit::fixtures::OWNER_ID;
use futures::executor::block_on;
use support::{Harness, Wire};

/// Every Kv key and value, and every file, as the store holds them.
async fn snapshot(h: &Harness) -> (Vec<(String, Vec<u8>)>, Vec<(String, Vec<u8>)>) {
    let kv = &h.platform.kv;
    let mut keys = Vec::new();
    for key in kv.list("", 100_000).await.unwrap() {
        keys.push((key.clone(), kv.get(&key).await.unwrap().unwrap_or_default()));
    }
    let files = &h.platform.files;
    let mut all = Vec::new();
    for path in files.list("").await.unwrap() {
        all.push((path.clone(), files.read(&path).await.unwrap()));
    }
    (keys, all)
}

const LEGACY: &str = "memory/assistant/main/MEMORY.md";

/// A store as version `v` left it.
async fn fixture(v: u32, h: &Harness) {
    match v {
        // Before versioning: the connector's memory was one, not per person.
        1 => {
            let files = &h.platform.files;
            files
                .write(LEGACY, b"- The door code is 2468.\n")
                .await
                .unwrap();
            files
                .write(
                    "memory/assistant/main/memory/2024-02-01.md",
                    b"- Old note.\n",
                )
                .await
                .unwrap();
        }
        // Today's: a record, memory per person.
        2 => {
            let owner = format!("memory/assistant/main/u{OWNER_ID}/MEMORY.md");
            h.platform
                .files
                .write(&owner, b"- Per person.\n")
                .await
                .unwrap();
            set_version(&*h.platform.kv, 2, "0.1.0").await.unwrap();
        }
        other => panic!("no fixture for store version {other}: add one with its upgrade step"),
    }
}

#[test]
fn every_earlier_version_is_brought_up_once_and_a_second_run_changes_nothing() {
    block_on(async {
        for v in 1..=CURRENT {
            let h = Harness::new(Wire::Anthropic);
            fixture(v, &h).await;
            assert_eq!(check(&*h.platform.kv).await.unwrap(), v);
            let done = h.app.upgrade_store().await.unwrap();
            let expected = match v == CURRENT {
                true => Upgraded::Current,
                false => Upgraded::From(v),
            };
            assert_eq!(done, expected, "from version {v}");
            assert_eq!(check(&*h.platform.kv).await.unwrap(), CURRENT);
            let once = snapshot(&h).await;
            assert_eq!(h.app.upgrade_store().await.unwrap(), Upgraded::Current);
            assert_eq!(
                snapshot(&h).await,
                once,
                "version {v}: the second run wrote nothing"
            );
        }
    });
}

#[test]
fn version_1_memory_moves_to_the_owner_and_is_found_there() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        fixture(1, &h).await;
        h.app.upgrade_store().await.unwrap();
        let files = &h.platform.files;
        let owner = format!("memory/assistant/main/u{OWNER_ID}");
        assert_eq!(
            files.read(&format!("{owner}/MEMORY.md")).await.unwrap(),
            b"- The door code is 2468.\n"
        );
        assert!(files
            .read(&format!("{owner}/memory/2024-02-01.md"))
            .await
            .is_ok());
        assert!(files.read(LEGACY).await.is_err(), "moved, not copied");
        let hits = h
            .app
            .admin()
            .search_memory(&"main".into(), None, "door code")
            .await
            .unwrap();
        assert!(hits.iter().any(|h| h.text.contains("2468")), "{hits:?}");
    });
}

#[test]
fn a_store_whose_old_memory_has_no_owner_waits_at_version_1() {
    block_on(async {
        let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
        config
            .connectors
            .get_mut("main")
            .unwrap()
            .allowed_users
            .clear();
        let env = [("TELEGRAM_ALLOWED_USERS", "")];
        let h = Harness::with_env(Wire::Anthropic, config, &env).unwrap();
        fixture(1, &h).await;
        assert_eq!(h.app.upgrade_store().await.unwrap(), Upgraded::Pending(1));
        assert_eq!(check(&*h.platform.kv).await.unwrap(), 1, "not recorded");
        assert!(
            h.platform.files.read(LEGACY).await.is_ok(),
            "left for its owner"
        );
    });
}

#[test]
fn a_newer_store_is_refused_and_left_as_it_was() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        fixture(1, &h).await;
        set_version(&*h.platform.kv, CURRENT + 1, "9.9.9")
            .await
            .unwrap();
        let before = snapshot(&h).await;
        let refused = check(&*h.platform.kv).await.unwrap_err();
        assert!(matches!(refused, UpgradeError::TooNew { .. }));
        let said = refused.to_string();
        assert!(
            said.contains("clawless 9.9.9") && said.contains("nothing was changed"),
            "{said}"
        );
        assert!(h.app.upgrade_store().await.is_err());
        assert_eq!(snapshot(&h).await, before, "nothing written");

        // A record that is not one is refused too, not taken for version 1.
        h.platform
            .kv
            .put("schema/store", b"not json", None)
            .await
            .unwrap();
        let unreadable = check(&*h.platform.kv).await.unwrap_err();
        assert!(matches!(unreadable, UpgradeError::Unreadable(_)));
    });
}
