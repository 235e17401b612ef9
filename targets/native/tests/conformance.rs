//! The port conformance suites, run on the native adapters: libsql Kv and Vectors, the
//! directory Files, reqwest Http against a local server, the system clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use clawless_native::fs::FsFiles;
use clawless_native::index::open_db;
use clawless_native::store::{Db, SqlKv, SqlText, SqlVectors, KV_SCHEMA};
use clawless_platform::native_io::{ReqwestHttp, SystemClock};
use clawless_platform::{clock, files, http, kv, text, vectors, Files};

#[tokio::test]
async fn libsql_kv_conforms_in_memory_and_on_disk() {
    let clock = Arc::new(SystemClock);
    let kv_mem = SqlKv::new(Db::open(":memory:", &KV_SCHEMA).unwrap(), clock.clone());
    kv::conformance::run(&kv_mem, &*clock, "mem").await;
    let dir = common::temp_dir("kv");
    let path = dir.join("t.db");
    let kv_disk = SqlKv::new(
        Db::open(&path.to_string_lossy(), &KV_SCHEMA).unwrap(),
        clock.clone(),
    );
    kv::conformance::run(&kv_disk, &*clock, "disk").await;
    use clawless_platform::Kv;
    kv_disk
        .put("short", b"x", Some(Duration::from_millis(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        kv_disk.purge_expired().await.unwrap() >= 1,
        "expired rows are purged"
    );
}

#[tokio::test]
async fn libsql_kv_survives_reopen() {
    let dir = common::temp_dir("kv-reopen");
    let path = dir.join("t.db").to_string_lossy().into_owned();
    let clock = Arc::new(SystemClock);
    {
        let kv = SqlKv::new(Db::open(&path, &KV_SCHEMA).unwrap(), clock.clone());
        use clawless_platform::Kv;
        kv.put("a", b"1", None).await.unwrap();
    }
    let kv = SqlKv::new(Db::open(&path, &KV_SCHEMA).unwrap(), clock);
    use clawless_platform::Kv;
    assert_eq!(kv.get("a").await.unwrap().as_deref(), Some(&b"1"[..]));
}

#[tokio::test]
async fn libsql_vectors_conform() {
    vectors::conformance::run(&SqlVectors::new(open_db(":memory:").unwrap())).await;
}

/// Vectors are stored as libsql's own half-precision blobs (its SQL functions read them), and
/// rows of plain f32s, what earlier versions wrote, are still found.
#[tokio::test]
async fn vector_rows_are_libsql_f16_blobs_and_f32_rows_still_read() {
    use clawless_platform::{VectorRecord, Vectors};
    use std::collections::BTreeMap;
    let db = open_db(":memory:").unwrap();
    let store = SqlVectors::new(db.clone());
    let meta = BTreeMap::from([("scope".to_owned(), "s".to_owned())]);
    let record = |id: &str, v: Vec<f32>| VectorRecord {
        id: id.into(),
        vector: v,
        metadata: meta.clone(),
    };
    store
        .upsert(vec![record("new", vec![1.0, -2.5, 0.5, 0.0])])
        .await
        .unwrap();
    let (extracted, len) = db
        .call(|c| {
            futures::executor::block_on(async {
                let mut rows = c
                    .query(
                        "SELECT vector_extract(vec), length(vec) FROM vectors WHERE id = 'new'",
                        (),
                    )
                    .await
                    .unwrap();
                let row = rows.next().await.unwrap().unwrap();
                Ok((row.get::<String>(0).unwrap(), row.get::<i64>(1).unwrap()))
            })
        })
        .await
        .unwrap();
    assert_eq!(len, 4 * 2 + 1);
    assert_eq!(
        extracted, "[1,-2.5,0.5,0]",
        "libsql reads the blob as its FLOAT16 vector"
    );

    // A row as an earlier version wrote it: little-endian f32s, the same metadata JSON.
    let old: Vec<u8> = [0.0f32, 1.0, 0.0, 0.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    db.call(move |c| {
        futures::executor::block_on(c.execute(
            "INSERT INTO vectors (id, dim, vec, metadata) VALUES ('old', 4, ?1, '{\"scope\":\"s\"}')",
            libsql::params![old],
        ))
        .unwrap();
        Ok(())
    })
    .await
    .unwrap();
    // A new port: its mirror is loaded from both rows.
    let store = SqlVectors::new(db);
    let hits = store.query(&[0.0, 1.0, 0.0, 0.0], 2, &meta).await.unwrap();
    assert_eq!(hits[0].id, "old", "{hits:?}");
    assert!((hits[0].score - 1.0).abs() < 1e-6, "{hits:?}");
    assert_eq!(hits[1].id, "new");
}

#[tokio::test]
async fn libsql_vectors_are_its_f16_blobs_and_survive_reopen() {
    use clawless_platform::{VectorRecord, Vectors};
    use std::collections::BTreeMap;
    let dir = common::temp_dir("vec-reopen");
    let path = dir.join("v.db").to_string_lossy().into_owned();
    let rec = |id: &str, v: [f32; 3]| VectorRecord {
        id: id.into(),
        vector: v.to_vec(),
        metadata: BTreeMap::from([("scope".to_owned(), "s".to_owned())]),
    };
    {
        let db = open_db(&path).unwrap();
        let v = SqlVectors::new(db.clone());
        v.upsert(vec![rec("a", [1.0, 0.0, 0.0]), rec("b", [0.0, 1.0, 0.0])])
            .await
            .unwrap();
        // libsql reads the stored blobs as its own half-precision vectors.
        let d: f64 = db
            .call(|c| {
                futures::executor::block_on(async {
                    let mut rows = c
                        .query("SELECT vector_distance_cos(vec, vector16('[1,0,0]')) FROM vectors WHERE id = 'b'", ())
                        .await
                        .unwrap();
                    let row = rows.next().await.unwrap().unwrap();
                    Ok(row.get::<f64>(0).unwrap())
                })
            })
            .await
            .unwrap();
        assert!(
            (d - 1.0).abs() < 1e-6,
            "cosine distance of orthogonal vectors, got {d}"
        );
    }
    let v = SqlVectors::new(open_db(&path).unwrap());
    let hits = v
        .query(&[0.1, 1.0, 0.0], 1, &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(hits[0].id, "b", "the mirror is rebuilt from the table");
    v.delete(&["b".into()]).await.unwrap();
    let hits = v
        .query(&[0.1, 1.0, 0.0], 5, &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "delete reaches the mirror");
}

/// The search reads its candidates' rows by rowid: each id finds its own row through
/// inserts, updates (one id twice in a batch, between others), deletes that move slots, and a
/// new port whose mirror is loaded from the table.
#[tokio::test]
async fn every_hit_is_its_own_row_through_updates_deletes_and_reopen() {
    use clawless_platform::{VectorRecord, Vectors};
    use std::collections::BTreeMap;
    let db = open_db(":memory:").unwrap();
    let axis = |i: usize| {
        let mut v = vec![0.0f32; 8];
        v[i] = 1.0;
        v
    };
    let rec = |id: &str, i: usize| VectorRecord {
        id: id.into(),
        vector: axis(i),
        metadata: BTreeMap::from([("name".to_owned(), id.to_owned())]),
    };
    let store = SqlVectors::new(db.clone());
    store
        .upsert(vec![rec("a", 0), rec("b", 1), rec("a", 2), rec("c", 3)])
        .await
        .unwrap();
    each_finds_its_row(&store, &[("a", 2), ("b", 1), ("c", 3)]).await;
    store.upsert(vec![rec("d", 4), rec("b", 5)]).await.unwrap();
    each_finds_its_row(&store, &[("a", 2), ("b", 5), ("c", 3), ("d", 4)]).await;
    store.delete(&["a".into()]).await.unwrap();
    store.upsert(vec![rec("e", 6), rec("a", 7)]).await.unwrap();
    let all = &[("a", 7), ("b", 5), ("c", 3), ("d", 4), ("e", 6)];
    each_finds_its_row(&store, all).await;
    each_finds_its_row(&SqlVectors::new(db), all).await;
}

/// Each `(id, axis)` is the one hit of a query along its axis, with its own metadata.
async fn each_finds_its_row(port: &SqlVectors, want: &[(&str, usize)]) {
    use clawless_platform::Vectors;
    for &(id, i) in want {
        let mut axis = vec![0.0f32; 8];
        axis[i] = 1.0;
        let hits = port.query(&axis, 1, &Default::default()).await.unwrap();
        assert_eq!(hits.len(), 1, "{id}: {hits:?}");
        assert_eq!(hits[0].id, id, "{hits:?}");
        assert_eq!(hits[0].metadata["name"], id, "{hits:?}");
        assert!((hits[0].score - 1.0).abs() < 1e-6, "{hits:?}");
    }
}

#[tokio::test]
async fn fs_files_conform_and_refuse_symlink_escape() {
    let dir = common::temp_dir("files");
    let root = dir.join("root");
    let fs = FsFiles::new(&root).unwrap();
    files::conformance::run(&fs).await;
    let beside: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        beside,
        ["root"],
        "the escape corpus wrote nothing outside the root"
    );
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "s").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
    let err = fs.read("link/secret.txt").await.unwrap_err();
    assert_eq!(err.kind, clawless_platform::ErrorKind::Invalid);
    assert_eq!(
        fs.write("link/x.txt", b"x").await.unwrap_err().kind,
        clawless_platform::ErrorKind::Invalid
    );
    assert!(!outside.join("x.txt").exists());
}

#[tokio::test]
async fn fs_files_never_write_through_a_planted_temporary_link() {
    let dir = common::temp_dir("files-tmp");
    let root = dir.join("root");
    let fs = FsFiles::new(&root).unwrap();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "untouched").unwrap();
    std::fs::create_dir_all(root.join("memory")).unwrap();
    // Links at every temporary name an old or a new build would use for MEMORY.md.
    std::os::unix::fs::symlink(&victim, root.join("memory/MEMORY.clawless-tmp")).unwrap();
    for n in 0..4 {
        let name = format!(".MEMORY.md.{}-{n}.clawless-tmp", std::process::id());
        std::os::unix::fs::symlink(&victim, root.join("memory").join(name)).unwrap();
    }
    fs.write("memory/MEMORY.md", b"new").await.unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    assert_eq!(fs.read("memory/MEMORY.md").await.unwrap(), b"new");
}

#[tokio::test]
async fn reqwest_http_conforms() {
    let base = clawless_testkit::servers::echo_server().await;
    http::conformance::run(&ReqwestHttp::new().unwrap(), &base).await;
}

/// A URL from outside whose name resolves to a loopback address is refused at resolution: the
/// address checked is the one connected to. With the private network allowed it is fetched.
#[tokio::test]
async fn reqwest_http_refuses_names_resolving_to_private_addresses() {
    use clawless_platform::{Http, HttpRequest, Outside};
    let base = clawless_testkit::servers::echo_server().await;
    let by_name = base.replace("127.0.0.1", "localhost");
    let http = ReqwestHttp::new().unwrap();
    let get = |allow_private| {
        HttpRequest::get(format!("{by_name}/big"), Duration::from_secs(5)).outside(Outside {
            max_body: 10,
            allow_private,
        })
    };
    let err = http.send(get(false)).await.unwrap_err();
    assert_eq!(err.kind, clawless_platform::ErrorKind::Invalid, "{err}");
    assert!(err.message.contains("not a public address"), "{err}");
    let resp = http.send(get(true)).await.unwrap();
    assert_eq!(
        (resp.status, resp.body.len(), resp.truncated),
        (200, 10, true)
    );
    // Not from outside: the usual client, no check (the Bot API and model URLs are config).
    let resp = http
        .send(HttpRequest::get(
            format!("{by_name}/status/204"),
            Duration::from_secs(5),
        ))
        .await
        .unwrap();
    assert_eq!(resp.status, 204);
}

#[tokio::test]
async fn reqwest_http_connection_refused_is_unavailable() {
    use clawless_platform::{Http, HttpRequest};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = ReqwestHttp::new()
        .unwrap()
        .send(HttpRequest::get(
            format!("http://127.0.0.1:{port}/bot123456:SECRET-TOKEN/getMe"),
            Duration::from_secs(2),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.kind, clawless_platform::ErrorKind::Unavailable);
    // Bot API URLs hold the token: the error (which is logged) never carries the URL.
    assert!(!err.to_string().contains("SECRET-TOKEN"), "{err}");
    assert!(!format!("{err:?}").contains("SECRET-TOKEN"), "{err:?}");
}

#[tokio::test]
async fn system_clock_conforms() {
    clock::conformance::run(&SystemClock).await;
}

#[tokio::test]
async fn libsql_fts5_text_index_conforms() {
    text::conformance::run(&SqlText::new(open_db(":memory:").unwrap())).await;
}
