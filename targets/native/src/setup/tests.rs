#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use clawless_platform::{Kv, KvExt};
use futures::executor::block_on;

fn temp_dir(name: &str) -> PathBuf {
    clawless_testkit::scratch::dir(&format!("setup-{name}"))
}

fn env_for(data: &Path) -> Env {
    Env::from_pairs([
        ("CLAWLESS_DATA", data.to_string_lossy().as_ref()),
        (
            "CLAWLESS_CONFIG",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"),
        ),
    ])
}

/// `(file of the main database, its tables)` as the connection of `db` sees them.
async fn describe(db: &Db) -> (String, Vec<String>) {
    db.call(|c| {
        block_on(async {
            let mut rows = c
                .query(
                    "SELECT file FROM pragma_database_list WHERE name = 'main'",
                    (),
                )
                .await
                .map_err(crate::store::db_err)?;
            let file: String = rows
                .next()
                .await
                .map_err(crate::store::db_err)?
                .and_then(|r| r.get(0).ok())
                .unwrap_or_default();
            let mut rows = c
                .query(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
                    (),
                )
                .await
                .map_err(crate::store::db_err)?;
            let mut tables = Vec::new();
            while let Some(row) = rows.next().await.map_err(crate::store::db_err)? {
                let name = row.get::<String>(0).map_err(crate::store::db_err)?;
                // FTS5's shadow tables (`<table>_data`, …) are not ours to list.
                let shadow = ["sqlite_", "text_body_", "text_fts_"]
                    .iter()
                    .any(|p| name.starts_with(p));
                if !shadow {
                    tables.push(name);
                }
            }
            Ok((file, tables))
        })
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_kv_and_the_memory_index_are_two_files_and_indexing_never_holds_the_kv() {
    let data = temp_dir("split");
    let n = build(&env_for(&data)).await.unwrap();
    let (kv_file, kv_tables) = describe(&n.kv_db).await;
    let (index_file, index_tables) = describe(&n.index_db).await;
    assert!(kv_file.ends_with("clawless.db"), "{kv_file}");
    assert!(index_file.ends_with("index.db"), "{index_file}");
    assert_eq!(kv_tables, ["kv"]);
    assert_eq!(index_tables, ["text_body", "text_docs", "vectors"]);
    // A heavy call holds the index (as indexing a large file does) until told to end; the
    // Kv still answers meanwhile, and so does a small call on the index, once it ends.
    let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
    let (end_tx, end) = std::sync::mpsc::channel::<()>();
    let index = n.index_db.clone();
    let held = tokio::spawn(async move {
        index
            .call_heavy(move |_| {
                let _ = started_tx.send(());
                let _ = end.recv_timeout(Duration::from_secs(20));
                Ok(())
            })
            .await
    });
    started.await.unwrap();
    let kv = n.app.platform().kv.clone();
    let wrote = tokio::time::timeout(Duration::from_secs(5), kv.put("split/probe", b"1", None));
    wrote.await.expect("the Kv waited on the index").unwrap();
    let small = tokio::spawn({
        let index = n.index_db.clone();
        async move { index.call(|_| Ok(7)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!small.is_finished(), "a small call waits for the heavy one");
    end_tx.send(()).unwrap();
    held.await.unwrap().unwrap();
    assert_eq!(small.await.unwrap().unwrap(), 7);
    let _ = std::fs::remove_dir_all(&data);
}

/// A data directory a newer release wrote is refused by every command, before anything in it
/// changes (the memory index is not even created); an older one is brought up and recorded.
#[tokio::test]
async fn a_store_from_a_newer_release_is_refused_and_left_alone() {
    let data = temp_dir("newer");
    {
        let db = Db::open(&data.join("clawless.db").to_string_lossy(), &KV_SCHEMA).unwrap();
        let kv = SqlKv::new(db, Arc::new(SystemClock));
        let newer = clawless_core::upgrade::CURRENT + 1;
        clawless_core::upgrade::set_version(&kv, newer, "9.9.9")
            .await
            .unwrap();
    }
    let refused = build(&env_for(&data)).await.err().unwrap().to_string();
    assert!(
        refused.contains("clawless.db")
            && refused.contains("clawless 9.9.9")
            && refused.contains("nothing was changed"),
        "{refused}"
    );
    assert!(!data.join("index.db").exists(), "nothing created");

    let fresh = temp_dir("fresh-store");
    let n = build(&env_for(&fresh)).await.unwrap();
    let kv = &n.app.platform().kv;
    assert_eq!(
        clawless_core::upgrade::check(&**kv).await.unwrap(),
        clawless_core::upgrade::CURRENT
    );
}

#[tokio::test]
async fn an_install_from_before_index_db_indexes_its_memory_again() {
    let data = temp_dir("legacy");
    let scope = "assistant/main";
    let path = format!("memory/{scope}/MEMORY.md");
    std::fs::create_dir_all(data.join("files/memory/assistant/main")).unwrap();
    std::fs::write(data.join("files").join(&path), "Our cat is called Miso.\n").unwrap();
    {
        // The previous layout: index tables beside the Kv, a manifest saying the file is indexed.
        let old = Db::open(
            &data.join("clawless.db").to_string_lossy(),
            &[
                KV_SCHEMA[0],
                "CREATE TABLE vectors (id TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec F32_BLOB NOT NULL, metadata TEXT NOT NULL)",
                "CREATE VIRTUAL TABLE text_fts USING fts5(id UNINDEXED, body, metadata UNINDEXED, tokenize = 'unicode61')",
            ],
        )
        .unwrap();
        let kv = SqlKv::new(old, Arc::new(SystemClock));
        kv.put_json(
            &format!("memidx/{scope}/{path}"),
            &serde_json::json!({"hash": 1, "embedder": "local-hash-v1-384", "ids": [format!("{scope}#{path}#0")]}),
            None,
        )
        .await
        .unwrap();
        kv.put("inbox/keep", b"1", None).await.unwrap();
    }
    let n = build(&env_for(&data)).await.unwrap();
    assert!(
        n.app
            .platform()
            .kv
            .list("memidx/", 100)
            .await
            .unwrap()
            .is_empty(),
        "manifests forgotten"
    );
    assert_eq!(
        n.app
            .platform()
            .kv
            .get("inbox/keep")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"1"[..]),
        "the rest of the Kv is kept"
    );
    assert_eq!(
        describe(&n.kv_db).await.1,
        ["kv"],
        "old index tables dropped"
    );
    assert_eq!(
        n.app.memory_store().reindex(&scope.into()).await.unwrap(),
        1
    );
    let hits = n
        .app
        .memory_store()
        .search(&scope.into(), "cat")
        .await
        .unwrap();
    assert!(hits[0].text.contains("Miso"), "{hits:?}");
    drop(n);

    // The next start finds index.db: nothing is forgotten or indexed again.
    let n = build(&env_for(&data)).await.unwrap();
    assert_eq!(
        n.app
            .platform()
            .kv
            .list("memidx/", 100)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        n.app.memory_store().reindex(&scope.into()).await.unwrap(),
        0
    );
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_data_directory_others_can_read_is_named_with_its_fix() {
    use std::os::unix::fs::PermissionsExt;
    let data = clawless_testkit::scratch::dir("modes");
    let env = Env::from_pairs([("CLAWLESS_DATA", data.to_str().unwrap())]);
    let about_data = |checks: Vec<clawless_core::doctor::Check>| {
        checks
            .into_iter()
            .filter(|c| c.detail.starts_with(data.to_str().unwrap()))
            .map(|c| c.detail)
            .collect::<Vec<_>>()
    };
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let found = about_data(machine_checks(&env, false));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].ends_with(&format!("chmod 700 {}", data.display())),
        "{found:?}"
    );
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(about_data(machine_checks(&env, false)).is_empty());
    std::fs::remove_dir_all(&data).unwrap();
}
