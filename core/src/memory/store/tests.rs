#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::memory::embed::LocalEmbedder;
use clawless_platform::Platform;
use futures::executor::block_on;

fn store() -> (MemoryStore, Platform) {
    let (p, _clock, _http) = Platform::in_memory();
    let store = MemoryStore {
        files: p.files.clone(),
        kv: p.kv.clone(),
        vectors: p.vectors.clone(),
        text: p.text.clone(),
        embedder: Arc::new(LocalEmbedder::default()),
        config: SearchConfig::default(),
    };
    (store, p)
}

#[test]
fn indexes_changed_files_only_and_finds_facts() {
    block_on(async {
        let (m, p) = store();
        let scope = "assistant/main";
        let dir = root(scope);
        p.files
            .write(
                &format!("{dir}/MEMORY.md"),
                b"# Family\nMy sister Ana lives in Lisbon.\n\n# Pets\nOur cat is called Miso.\n",
            )
            .await
            .unwrap();
        p.files
            .write(
                &format!("{dir}/memory/2026-11-21.md"),
                b"- Booked the dentist for Tuesday 10:00.\n",
            )
            .await
            .unwrap();
        assert_eq!(m.reindex(scope).await.unwrap(), 2);
        assert_eq!(
            m.reindex(scope).await.unwrap(),
            0,
            "unchanged files are not re-indexed"
        );

        let hits = m
            .search(scope, "what is the name of my cat?")
            .await
            .unwrap();
        assert!(!hits.is_empty());
        assert!(hits[0].text.contains("Miso"), "{hits:?}");
        assert_eq!(hits[0].path, format!("{dir}/MEMORY.md"));
        assert_eq!((hits[0].start_line, hits[0].end_line), (4, 5));
        let hits = m.search(scope, "dentist appointment").await.unwrap();
        assert!(hits[0].path.ends_with("2026-11-21.md"));

        // Another scope sees nothing of this one.
        assert!(m
            .search("assistant/other", "cat Miso")
            .await
            .unwrap()
            .is_empty());

        // Edits and deletions reach the index.
        p.files
            .write(
                &format!("{dir}/MEMORY.md"),
                b"# Pets\nOur cat is now called Pepper.\n",
            )
            .await
            .unwrap();
        p.files
            .delete(&format!("{dir}/memory/2026-11-21.md"))
            .await
            .unwrap();
        assert_eq!(m.reindex(scope).await.unwrap(), 2);
        let hits = m.search(scope, "cat name").await.unwrap();
        assert!(hits.iter().all(|h| !h.text.contains("Miso")));
        assert!(hits[0].text.contains("Pepper"));
        assert!(
            m.search(scope, "dentist").await.unwrap().is_empty(),
            "deleted file's chunks are gone"
        );
    });
}

#[test]
fn unrelated_queries_fall_below_min_score() {
    block_on(async {
        let (m, p) = store();
        p.files
            .write("memory/a/b/MEMORY.md", b"Our cat is called Miso.\n")
            .await
            .unwrap();
        m.reindex("a/b").await.unwrap();
        assert!(m
            .search("a/b", "quarterly revenue forecast spreadsheet")
            .await
            .unwrap()
            .is_empty());
    });
}

#[test]
fn huge_result_settings_do_not_overflow() {
    // Found with the config fuzz target: `max_results * candidate_multiplier` overflowed.
    let (mut m, _p) = store();
    m.config.max_results = usize::MAX;
    m.config.candidate_multiplier = usize::MAX;
    let hits = block_on(m.search("assistant/main", "anything")).unwrap();
    assert!(hits.is_empty());
}
