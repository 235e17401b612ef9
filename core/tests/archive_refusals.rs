//! Hostile and damaged archives: each refused with a clear message, and nothing written. A
//! corrupted or truncated archive, a checksum that differs, a newer format or store, names
//! that would escape (a zip-slip corpus), links, an archive bomb (size and entry caps), a key
//! no export carries.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::io::Write;

use clawless_core::archive::{unpack, ArchiveError, Limits, Merge, Whom};
use futures::executor::block_on;
use sha2::{Digest, Sha256};
use support::{Harness, Wire};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A tar.gz of `entries` (name, type, data) exactly as given: names are written into the
/// header raw, so they can say what `tar::Builder` would refuse.
fn raw_tar(entries: &[(&[u8], tar::EntryType, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (name, kind, data) in entries {
        // GNU headers: long names and pax extensions are read from them.
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        header.set_size(data.len() as u64);
        header.set_entry_type(*kind);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append(&header, *data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// A manifest naming `kv` and `files` with their checksums.
fn manifest(format: u32, store: u32, kv: &[u8], files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut sums = serde_json::Map::new();
    sums.insert("kv.jsonl".into(), sha(kv).into());
    for (name, data) in files {
        sums.insert(format!("files/{name}"), sha(data).into());
    }
    serde_json::json!({
        "format": format, "source": "native", "by": "test", "created_at_ms": 0,
        "store_version": store, "whom": "bot",
        "kv_entries": kv.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count(),
        "files": files.len(), "sha256": sums,
    })
    .to_string()
    .into_bytes()
}

/// An archive with one file at `name`, every checksum right.
fn with_file(name: &str) -> Vec<u8> {
    let kv = b"";
    let data = b"hello";
    let head = manifest(
        1,
        2,
        kv,
        &[(name.strip_prefix("files/").unwrap_or(name), data)],
    );
    raw_tar(&[
        (b"manifest.json", tar::EntryType::Regular, &head),
        (b"kv.jsonl", tar::EntryType::Regular, kv),
        (name.as_bytes(), tar::EntryType::Regular, data),
    ])
}

async fn refused(h: &Harness, archive: &[u8], limits: &Limits) -> ArchiveError {
    let before = snapshot(h).await;
    let e = h
        .app
        .admin()
        .import(archive, limits, Merge::Replace)
        .await
        .unwrap_err();
    assert_eq!(snapshot(h).await, before, "nothing written for: {e}");
    e
}

/// Every entry (key, value, expiry) and every file (path, bytes) of the store.
async fn snapshot(h: &Harness) -> (Vec<(String, Vec<u8>, Option<u64>)>, Vec<(String, Vec<u8>)>) {
    let kv = h.platform.kv.scan("", "", 1_000_000).await.unwrap();
    let kv = kv
        .into_iter()
        .map(|e| (e.key, e.value, e.expires_at_ms))
        .collect();
    let mut files = Vec::new();
    for path in h.platform.files.list("").await.unwrap() {
        let bytes = h.platform.files.read(&path).await.unwrap();
        files.push((path, bytes));
    }
    (kv, files)
}

/// A real archive of a store with a note and a session.
async fn real() -> Vec<u8> {
    let h = Harness::new(Wire::Anthropic);
    h.platform
        .files
        .write("memory/assistant/main/u1/MEMORY.md", b"- a note\n")
        .await
        .unwrap();
    h.platform
        .kv
        .put("session/main:1", b"{\"messages\":[]}", None)
        .await
        .unwrap();
    h.app.admin().export(&Whom::Bot, "native").await.unwrap()
}

#[test]
fn damaged_truncated_or_altered_archives_are_refused() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let good = real().await;
        assert!(unpack(&good, &Limits::default()).is_ok());
        let half = &good[..good.len() / 2];
        let e = refused(&h, half, &Limits::default()).await;
        assert!(matches!(e, ArchiveError::Damaged(_)), "truncated: {e}");
        let mut flipped = good.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x55;
        let e = refused(&h, &flipped, &Limits::default()).await;
        assert!(
            matches!(e, ArchiveError::Damaged(_) | ArchiveError::Checksum(_)),
            "{e}"
        );
        let e = refused(&h, b"not an archive at all", &Limits::default()).await;
        assert!(
            e.to_string().contains("damaged or not a clawless archive"),
            "{e}"
        );

        // A file whose bytes differ from the manifest's checksum.
        let kv = b"";
        let head = manifest(1, 2, kv, &[("memory/a/MEMORY.md", b"original")]);
        let altered = raw_tar(&[
            (b"manifest.json", tar::EntryType::Regular, &head),
            (b"kv.jsonl", tar::EntryType::Regular, kv),
            (
                b"files/memory/a/MEMORY.md",
                tar::EntryType::Regular,
                b"altered!",
            ),
        ]);
        let e = refused(&h, &altered, &Limits::default()).await;
        assert_eq!(e, ArchiveError::Checksum("files/memory/a/MEMORY.md".into()));
        assert!(e.to_string().contains("does not match its checksum"));

        // The manifest lists a file the archive does not hold: cut short.
        let missing = raw_tar(&[
            (b"manifest.json", tar::EntryType::Regular, &head),
            (b"kv.jsonl", tar::EntryType::Regular, kv),
        ]);
        let e = refused(&h, &missing, &Limits::default()).await;
        assert!(e.to_string().contains("cut short"), "{e}");
    });
}

#[test]
fn newer_formats_and_stores_are_refused_by_name() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let kv = b"";
        for (format, store, says) in [(3, 2, "format 3"), (1, 99, "store is version 99")] {
            let head = manifest(format, store, kv, &[]);
            let archive = raw_tar(&[
                (b"manifest.json", tar::EntryType::Regular, &head),
                (b"kv.jsonl", tar::EntryType::Regular, kv),
            ]);
            let e = refused(&h, &archive, &Limits::default()).await;
            assert!(e.to_string().contains(says), "{e}");
            assert!(e.to_string().contains("newer clawless"), "{e}");
        }
    });
}

#[test]
fn names_that_could_escape_and_links_are_refused() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let corpus = [
            "../evil.md",
            "/etc/passwd",
            "files/../../outside",
            "files/memory/../../../etc/cron.d/x",
            "files/a/../../b",
            "files//etc/passwd",
            "files/./MEMORY.md",
            "files/..\\..\\windows.ini",
            "files/C:/boot.ini",
            "files/a\u{0}b",
            "files/new\nline",
            "files/..",
            "other/thing",
            "manifest.json.bak",
        ];
        assert!(corpus.len() >= 10);
        for name in corpus {
            let e = refused(&h, &with_file(name), &Limits::default()).await;
            assert!(
                matches!(e, ArchiveError::BadName(_) | ArchiveError::Damaged(_)),
                "{name:?}: {e}"
            );
        }
        // Long names, as GNU tar and POSIX (pax) write them: the name the entry ends up with.
        let kv = b"";
        let head = manifest(1, 2, kv, &[]);
        let long = b"files/../../../../etc/cron.d/evil\0".as_slice();
        let pax = b"42 path=files/../../../../etc/cron.d/evil\n".as_slice();
        for (kind, header) in [
            (tar::EntryType::GNULongName, long),
            (tar::EntryType::XHeader, pax),
        ] {
            let archive = raw_tar(&[
                (b"manifest.json", tar::EntryType::Regular, &head),
                (b"kv.jsonl", tar::EntryType::Regular, kv),
                (b"././@LongLink", kind, header),
                (b"files/innocent", tar::EntryType::Regular, b"x"),
            ]);
            let e = refused(&h, &archive, &Limits::default()).await;
            assert!(
                matches!(&e, ArchiveError::BadName(n) if n.contains("etc/cron.d")),
                "{kind:?}: {e}"
            );
        }
        // A file and a folder of the same name.
        let head = manifest(1, 2, kv, &[("memory/a", b"x"), ("memory/a/b", b"y")]);
        let both = raw_tar(&[
            (b"manifest.json", tar::EntryType::Regular, &head),
            (b"kv.jsonl", tar::EntryType::Regular, kv),
            (b"files/memory/a", tar::EntryType::Regular, b"x"),
            (b"files/memory/a/b", tar::EntryType::Regular, b"y"),
        ]);
        let e = refused(&h, &both, &Limits::default()).await;
        assert!(
            e.to_string().contains("below a file of the same name"),
            "{e}"
        );
        // A good name is taken, so the corpus fails for its names alone.
        let ok = h
            .app
            .admin()
            .import(
                &with_file("files/memory/x/MEMORY.md"),
                &Limits::default(),
                Merge::KeepOurs,
            )
            .await;
        assert!(ok.is_ok(), "{ok:?}");
        // Links and devices are never followed nor made.
        for kind in [
            tar::EntryType::Symlink,
            tar::EntryType::Link,
            tar::EntryType::Char,
            tar::EntryType::Fifo,
        ] {
            let kv = b"";
            let head = manifest(1, 2, kv, &[]);
            let archive = raw_tar(&[
                (b"manifest.json", tar::EntryType::Regular, &head),
                (b"kv.jsonl", tar::EntryType::Regular, kv),
                (b"files/link", kind, b""),
            ]);
            let e = refused(&h, &archive, &Limits::default()).await;
            assert!(
                e.to_string().contains("not a regular file"),
                "{kind:?}: {e}"
            );
        }
    });
}

#[test]
fn archive_bombs_are_refused_by_size_and_count() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        // 64 MiB of zeros compress to about 64 KB.
        let zeros = vec![0u8; 64 << 20];
        let kv = b"";
        let head = manifest(1, 2, kv, &[("big", &zeros)]);
        let bomb = raw_tar(&[
            (b"manifest.json", tar::EntryType::Regular, &head),
            (b"kv.jsonl", tar::EntryType::Regular, kv),
            (b"files/big", tar::EntryType::Regular, &zeros),
        ]);
        assert!(bomb.len() < 1 << 20, "a bomb: {} bytes packed", bomb.len());
        let limits = Limits {
            unpacked_bytes: 8 << 20,
            file_bytes: 128 << 20,
            ..Limits::default()
        };
        let e = refused(&h, &bomb, &limits).await;
        assert!(e.to_string().contains("unpacks to more than"), "{e}");
        let e = refused(&h, &bomb, &Limits::default()).await;
        assert!(e.to_string().contains("files/big is 67108864 bytes"), "{e}");
        let e = refused(
            &h,
            &bomb,
            &Limits {
                packed_bytes: 1000,
                ..Limits::default()
            },
        )
        .await;
        assert!(e.to_string().contains("at most 1000 are read"), "{e}");

        // Many tiny entries.
        let mut entries: Vec<(Vec<u8>, tar::EntryType, &[u8])> = Vec::new();
        let head = manifest(1, 2, kv, &[]);
        entries.push((b"manifest.json".to_vec(), tar::EntryType::Regular, &head));
        entries.push((b"kv.jsonl".to_vec(), tar::EntryType::Regular, kv));
        for i in 0..200 {
            entries.push((
                format!("files/n{i}").into_bytes(),
                tar::EntryType::Regular,
                b"x",
            ));
        }
        let refs: Vec<(&[u8], tar::EntryType, &[u8])> = entries
            .iter()
            .map(|(n, k, d)| (n.as_slice(), *k, *d))
            .collect();
        let e = refused(
            &h,
            &raw_tar(&refs),
            &Limits {
                entries: 100,
                ..Limits::default()
            },
        )
        .await;
        assert!(e.to_string().contains("more than 100 entries"), "{e}");

        // A bomb inside kv.jsonl: too many lines.
        let mut lines = Vec::new();
        for i in 0..50 {
            writeln!(lines, "{{\"k\":\"tz/main/{i}\",\"v\":\"UTC\"}}").unwrap();
        }
        let head = manifest(1, 2, &lines, &[]);
        let archive = raw_tar(&[
            (b"manifest.json", tar::EntryType::Regular, &head),
            (b"kv.jsonl", tar::EntryType::Regular, &lines),
        ]);
        let e = refused(
            &h,
            &archive,
            &Limits {
                kv_entries: 10,
                ..Limits::default()
            },
        )
        .await;
        assert!(
            e.to_string().contains("more than 10 entries in kv.jsonl"),
            "{e}"
        );
        assert!(h
            .app
            .admin()
            .import(&archive, &Limits::default(), Merge::KeepOurs)
            .await
            .is_ok());
    });
}

#[test]
fn keys_no_export_carries_are_refused() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        for key in [
            "inbox/main:1/00000000000000000001",
            "lease/main:1",
            "schema/store",
            "seen/main/1",
        ] {
            let kv = format!("{{\"k\":\"{key}\",\"v\":\"{{}}\"}}\n").into_bytes();
            let head = manifest(1, 2, &kv, &[]);
            let archive = raw_tar(&[
                (b"manifest.json", tar::EntryType::Regular, &head),
                (b"kv.jsonl", tar::EntryType::Regular, &kv),
            ]);
            let e = refused(&h, &archive, &Limits::default()).await;
            assert!(
                e.to_string().contains("which no export carries"),
                "{key}: {e}"
            );
        }
    });
}
