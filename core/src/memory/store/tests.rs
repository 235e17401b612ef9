#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::memory::embed::LocalEmbedder;
use clawless_platform::Platform;
use futures::executor::block_on;

pub(super) fn store() -> (MemoryStore, Platform) {
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
        let scope = &Scope::new("assistant/main");
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
            .search(&"assistant/other".into(), "cat Miso")
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
        m.reindex(&"a/b".into()).await.unwrap();
        assert!(m
            .search(&"a/b".into(), "quarterly revenue forecast spreadsheet")
            .await
            .unwrap()
            .is_empty());
    });
}

/// The local embedder, counting the texts it embeds; `id` names it.
struct Counting {
    inner: LocalEmbedder,
    id: &'static str,
    texts: std::sync::atomic::AtomicUsize,
}

impl Counting {
    fn new(id: &'static str) -> Arc<Self> {
        Arc::new(Self {
            inner: LocalEmbedder::default(),
            id,
            texts: Default::default(),
        })
    }
    /// Texts embedded since the last call.
    fn take(&self) -> usize {
        self.texts.swap(0, std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl EmbeddingProvider for Counting {
    fn dims(&self) -> usize {
        self.inner.dims
    }
    fn id(&self) -> String {
        self.id.to_owned()
    }
    async fn embed(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, super::super::embed::EmbedError> {
        self.texts
            .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
        self.inner.embed(texts).await
    }
}

/// A file of `n` short sections (one chunk each), section `i` mentioning `word{i}`.
fn sections(n: usize) -> String {
    (0..n)
        .map(|i| format!("# Topic {i}\nA note about word{i} and its details.\n\n"))
        .collect()
}

/// Every id in the index for `scope`, from both indexes (they must agree).
async fn indexed_ids(p: &Platform, scope: &Scope) -> Vec<String> {
    let filter = BTreeMap::from([("scope".to_owned(), scope.to_string())]);
    let probe = LocalEmbedder::default().embed_one("probe");
    let mut v: Vec<String> = p
        .vectors
        .query(&probe, 100_000, &filter)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|h| h.id)
        .collect();
    let mut words: Vec<String> = Vec::new();
    for h in p
        .text
        .search("a note about", 100_000, &filter)
        .await
        .unwrap()
    {
        words.push(h.id);
    }
    v.sort();
    words.sort();
    assert_eq!(v, words, "Vectors and TextIndex hold the same chunks");
    v
}

#[test]
fn reindexing_embeds_only_the_chunks_that_changed() {
    block_on(async {
        let (mut m, p) = store();
        let counting = Counting::new("counting-v1");
        m.embedder = counting.clone();
        let scope = &Scope::new("assistant/main/u123");
        let path = format!("{}/MEMORY.md", root(scope));
        p.files.write(&path, sections(40).as_bytes()).await.unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());
        assert_eq!(counting.take(), 40, "first index embeds every chunk");
        assert_eq!(indexed_ids(&p, scope).await.len(), 40);

        // An append: only the last section's chunk changed.
        p.files
            .append(&path, b"Also: the spare key is under the blue pot.\n")
            .await
            .unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());
        assert_eq!(
            counting.take(),
            1,
            "an append re-embeds only the last chunk"
        );
        assert_eq!(
            indexed_ids(&p, scope).await.len(),
            40,
            "the old last chunk is gone"
        );
        let hits = m.search(scope, "where is the spare key").await.unwrap();
        assert!(hits[0].text.contains("blue pot"), "{hits:?}");
        counting.take(); // the query's embedding

        // An edit in place (same number of lines): that chunk only.
        let edited = String::from_utf8(p.files.read(&path).await.unwrap())
            .unwrap()
            .replace("word7 and its details", "word7, now the seventh topic");
        p.files.write(&path, edited.as_bytes()).await.unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());
        assert_eq!(counting.take(), 1, "an edit re-embeds the edited chunk");
        let hits = m.search(scope, "word7 seventh topic").await.unwrap();
        assert!(hits[0].text.contains("seventh topic"), "{hits:?}");
        counting.take();

        // Unchanged: nothing at all.
        assert!(!m.index_file(scope, &path).await.unwrap());
        assert_eq!(counting.take(), 0);

        // Sections removed at the end: deleted, nothing embedded.
        let shorter: String = edited.split("# Topic 30").next().unwrap().to_owned();
        p.files.write(&path, shorter.as_bytes()).await.unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());
        assert_eq!(counting.take(), 0, "removing chunks embeds nothing");
        assert_eq!(indexed_ids(&p, scope).await.len(), 30);
        assert!(m.search(scope, "word35").await.unwrap().is_empty());

        // Another embedder: every chunk again, same number in the index.
        let other = Counting::new("counting-v2");
        m.embedder = other.clone();
        assert!(m.index_file(scope, &path).await.unwrap());
        assert_eq!(other.take(), 30, "an embedder change re-embeds every chunk");
        assert_eq!(indexed_ids(&p, scope).await.len(), 30);
    });
}

#[test]
fn manifests_of_the_earlier_format_are_read_and_their_chunks_replaced() {
    block_on(async {
        let (m, p) = store();
        let scope = &Scope::new("assistant/main");
        let path = format!("{}/MEMORY.md", root(scope));
        // What the previous version left: chunk ids by position, a manifest listing them.
        let old_id = format!("{scope}#{path}#0");
        let meta = BTreeMap::from([
            ("scope".to_owned(), scope.to_string()),
            ("path".to_owned(), path.clone()),
            ("lines".to_owned(), "1-1".to_owned()),
            (
                "text".to_owned(),
                "a note about the old cat Miso".to_owned(),
            ),
        ]);
        p.vectors
            .upsert(vec![VectorRecord {
                id: old_id.clone(),
                vector: LocalEmbedder::default().embed_one("old cat Miso"),
                metadata: meta.clone(),
            }])
            .await
            .unwrap();
        p.text
            .upsert(vec![TextDoc {
                id: old_id.clone(),
                text: "a note about the old cat Miso".into(),
                metadata: meta,
            }])
            .await
            .unwrap();
        let legacy =
            serde_json::json!({"hash": 1, "embedder": "local-hash-v1-384", "ids": [old_id]});
        p.kv.put_json(&format!("memidx/{scope}/{path}"), &legacy, None)
            .await
            .unwrap();
        p.files
            .write(&path, b"A note about the new cat Pepper.\n")
            .await
            .unwrap();
        assert_eq!(m.reindex(scope).await.unwrap(), 1);
        let ids = indexed_ids(&p, scope).await;
        assert_eq!(ids.len(), 1, "{ids:?}");
        assert_ne!(ids[0], old_id, "the old chunk is deleted");
        assert!(m.search(scope, "Miso").await.unwrap().is_empty());
    });
}

/// An embedder that answers the first `ok` calls and then never again.
struct Stalls {
    inner: LocalEmbedder,
    ok: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl EmbeddingProvider for Stalls {
    fn dims(&self) -> usize {
        self.inner.dims
    }
    fn id(&self) -> String {
        self.inner.id()
    }
    async fn embed(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, super::super::embed::EmbedError> {
        let left = self.ok.load(std::sync::atomic::Ordering::SeqCst);
        if left == 0 {
            futures::future::pending::<()>().await;
        }
        self.ok.store(left - 1, std::sync::atomic::Ordering::SeqCst);
        self.inner.embed(texts).await
    }
}

#[test]
fn a_run_cut_short_leaves_no_chunk_that_no_manifest_names() {
    use futures::FutureExt;
    block_on(async {
        let (mut m, p) = store();
        let scope = &Scope::new("assistant/main");
        let path = format!("{}/MEMORY.md", root(scope));
        p.files.write(&path, sections(10).as_bytes()).await.unwrap();
        m.index_file(scope, &path).await.unwrap();
        // A big addition, indexed by an embedder that stalls after its first batch: the run
        // is dropped midway, as the tool's budget drops it.
        let big = sections(200).replace("Topic", "Extra");
        p.files.append(&path, big.as_bytes()).await.unwrap();
        m.embedder = Arc::new(Stalls {
            inner: LocalEmbedder::default(),
            ok: 1.into(),
        });
        {
            let mut run = std::pin::pin!(m.index_file(scope, &path));
            for _ in 0..20 {
                assert!((&mut run).now_or_never().is_none(), "the run stalls");
            }
        }
        let partial = indexed_ids(&p, scope).await.len();
        assert!(partial > 10, "the first batch reached the index: {partial}");
        // The addition is undone before any complete run; the next run cleans up.
        p.files.write(&path, sections(10).as_bytes()).await.unwrap();
        m.embedder = Arc::new(LocalEmbedder::default());
        assert!(m.index_file(scope, &path).await.unwrap());
        assert_eq!(
            indexed_ids(&p, scope).await.len(),
            10,
            "nothing stray is left"
        );
        assert!(m.search(scope, "Extra").await.unwrap().is_empty());
    });
}

#[test]
fn a_file_over_the_cap_is_indexed_up_to_it_and_appends_past_it_are_refused() {
    block_on(async {
        let (mut m, p) = store();
        m.config.max_file_kb = 4;
        let scope = &Scope::new("assistant/main");
        let path = format!("{}/MEMORY.md", root(scope));
        let mut text = String::from("# Early\nThe boat is called Albatross.\n");
        while text.len() < 6 * 1024 {
            text.push_str("Filler line about nothing in particular, to take up room.\n");
        }
        text.push_str("# Late\nThe bike is called Zephyrine.\n");
        p.files.write(&path, text.as_bytes()).await.unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());
        assert!(!m.search(scope, "Albatross").await.unwrap().is_empty());
        assert!(
            m.search(scope, "Zephyrine").await.unwrap().is_empty(),
            "past the cap is not indexed"
        );
        let err = m.append(scope, "MEMORY.md", "one more").await.unwrap_err();
        assert!(matches!(err, MemoryError::TooLarge { .. }), "{err}");
        assert_eq!(
            p.files.read(&path).await.unwrap().len(),
            text.len(),
            "nothing written"
        );
    });
}

#[test]
fn forgetting_the_index_makes_the_next_reindex_index_everything() {
    block_on(async {
        let (m, p) = store();
        for scope in ["a/b", "a/b/u1"] {
            let scope = &Scope::new(scope);
            p.files
                .write(&format!("{}/MEMORY.md", root(scope)), b"A note.\n")
                .await
                .unwrap();
            assert_eq!(m.reindex(scope).await.unwrap(), 1);
        }
        assert_eq!(
            m.reindex(&"a/b".into()).await.unwrap(),
            0,
            "a nested scope's manifests are not taken for this scope's"
        );
        assert_eq!(m.reindex(&"a/b/u1".into()).await.unwrap(), 0);
        assert_eq!(forget_index(&*p.kv).await.unwrap(), 2);
        assert_eq!(m.reindex(&"a/b".into()).await.unwrap(), 1);
        assert_eq!(m.reindex(&"a/b/u1".into()).await.unwrap(), 1);
    });
}

#[test]
fn huge_result_settings_do_not_overflow() {
    // Found with the config fuzz target: `max_results * candidate_multiplier` overflowed.
    let (mut m, _p) = store();
    m.config.max_results = usize::MAX;
    m.config.candidate_multiplier = usize::MAX;
    let hits = block_on(m.search(&"assistant/main".into(), "anything")).unwrap();
    assert!(hits.is_empty());
}
