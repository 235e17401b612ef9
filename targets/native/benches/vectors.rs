//! `cargo bench -p native --bench vectors`: the native Vectors port (libsql `F16_BLOB` rows,
//! in-memory mirror of 2-bit and int8 codes, exact re-rank) at 10k and 100k vectors of 384
//! dimensions.
//!
//! Prints, per size: indexing throughput (upserts in batches of 500, on disk, WAL), the first
//! query after a restart (a new database handle on the file, whose first query loads the
//! mirror from the table), query latency p50/p99 over 200 queries (top 10, filtered by scope,
//! through the port), recall@10 against an exact f32 search over the same data, and the
//! database bytes per vector against the raw f32 size (1536 bytes), and both indexes' bytes
//! beyond the text itself against it (the goal: at most 1.3×).
//!
//! Each row carries the metadata the memory store writes (scope, lines; the path is in the id),
//! with the ids it makes (`<scope>#<path>#<key>`). The chunk's text is kept once, in the keyword index (FTS5),
//! as the memory store keeps it: each vector's document is written there too, into a file of
//! its own so that the two halves are measured apart. The texts are real chunks (the core's
//! chunker at its default 400 tokens) of a generated notes file, so full-size ones.
//!
//! The vectors are random (Gaussian-like, normalised): the hard case for a quantized scan,
//! since neighbours are barely closer than the rest. A last run takes real embeddings: every
//! distinct line of 24 characters or more of this repository's Rust and Markdown files,
//! embedded with the bundled local embedder, queried with the first half of 200 of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clawless_core::memory::chunk::chunks;
use clawless_core::memory::store::SearchConfig;
use clawless_native::index::open_db;
use clawless_native::store::{SqlText, SqlVectors};
use clawless_platform::vectors::cosine;
use clawless_platform::{TextDoc, TextIndex, VectorRecord, Vectors};

const DIM: usize = 384;
const SCOPE: &str = "assistant/main/u111111111";

/// The id the memory store gives chunk `i`.
fn id(i: usize) -> String {
    format!("{SCOPE}#{}#{i:016x}", file_of(i))
}

fn file_of(i: usize) -> String {
    format!(
        "memory/{SCOPE}/memory/2026-{:02}-{:02}.md",
        1 + i % 12,
        1 + i % 28
    )
}

/// Chunk texts as the memory store cuts them (default settings) from a file of dated notes.
fn chunk_texts() -> Vec<String> {
    let notes: String = (0..2_000)
        .map(|i| {
            format!(
                "- {:02}:{:02} note {i}: met Maya about project Kestrel number {}; she prefers tea, the invoice is due on the {}th.\n",
                i % 24,
                i % 60,
                i * 7 % 1000,
                1 + i % 28
            )
        })
        .collect();
    let c = SearchConfig::default();
    chunks(&notes, c.chunk_tokens, c.chunk_overlap)
        .map(|c| c.text)
        .collect()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
    fn vector(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIM)
            .map(|_| self.next() + self.next() + self.next())
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

async fn run(n: usize) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
    let data: Vec<Vec<f32>> = (0..n).map(|_| rng.vector()).collect();
    let queries: Vec<Vec<f32>> = (0..200).map(|_| rng.vector()).collect();
    measure(&format!("{n} random vectors"), data, queries).await;
}

/// Every distinct line of 24 characters or more of the repository's `.rs` and `.md` files.
fn repository_lines() -> Vec<String> {
    let root = clawless_testkit::repo::root();
    let mut lines: Vec<String> = clawless_testkit::repo::files_ending(&root, &[".rs", ".md"])
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().map(|l| l.trim().to_owned()).collect::<Vec<_>>())
        .filter(|l| l.len() >= 24)
        .collect();
    lines.sort();
    lines.dedup();
    lines
}

async fn run_text() {
    use clawless_core::memory::embed::LocalEmbedder;
    let lines = repository_lines();
    let e = LocalEmbedder::default();
    let data: Vec<Vec<f32>> = lines.iter().map(|l| e.embed_one(l)).collect();
    let step = (lines.len() / 200).max(1);
    let queries: Vec<Vec<f32>> = lines
        .iter()
        .step_by(step)
        .take(200)
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            e.embed_one(&words[..words.len().div_ceil(2)].join(" "))
        })
        .collect();
    measure(
        &format!(
            "{} real embeddings (this repository's lines, local embedder)",
            data.len()
        ),
        data,
        queries,
    )
    .await;
}

async fn measure(what: &str, data: Vec<Vec<f32>>, queries: Vec<Vec<f32>>) {
    let n = data.len();
    let dir = std::env::temp_dir().join(format!("clawless-vec-bench-{n}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vectors.db");
    let db = open_db(&path.to_string_lossy()).unwrap();
    let store = SqlVectors::new(db.clone());
    let texts = chunk_texts();

    let meta = |i: usize| {
        BTreeMap::from([
            ("scope".to_owned(), SCOPE.to_owned()),
            ("lines".to_owned(), format!("{}-{}", i % 90, i % 90 + 12)),
        ])
    };
    let started = Instant::now();
    for (b, batch) in data.chunks(500).enumerate() {
        let records = batch
            .iter()
            .enumerate()
            .map(|(j, v)| {
                let i = b * 500 + j;
                VectorRecord {
                    id: id(i),
                    vector: v.clone(),
                    metadata: meta(i),
                }
            })
            .collect();
        store.upsert(records).await.unwrap();
    }
    let index_secs = started.elapsed().as_secs_f64();
    checkpoint(&db).await;
    drop(store);
    drop(db);
    let bytes = file_bytes(&path);

    // The keyword half: each chunk's text, once, in FTS5, in a file of its own.
    let text_path = dir.join("text.db");
    let text_db = open_db(&text_path.to_string_lossy()).unwrap();
    let text_index = SqlText::new(text_db.clone());
    for batch in (0..n).collect::<Vec<_>>().chunks(500) {
        let docs = batch
            .iter()
            .map(|&i| TextDoc {
                id: id(i),
                text: texts[i % texts.len()].clone(),
                metadata: meta(i),
            })
            .collect();
        text_index.upsert(docs).await.unwrap();
    }
    checkpoint(&text_db).await;
    drop(text_index);
    drop(text_db);
    let text_bytes = file_bytes(&text_path);
    let raw_text: usize = (0..n).map(|i| texts[i % texts.len()].len()).sum();

    // A restart: a new database handle on the file, a new port; the first query loads the
    // mirror from the table.
    let filter = BTreeMap::from([("scope".to_owned(), SCOPE.to_owned())]);
    let t = Instant::now();
    let db = open_db(&path.to_string_lossy()).unwrap();
    let store = SqlVectors::new(db);
    let opened = t.elapsed();
    store.query(&queries[0], 10, &filter).await.unwrap();
    let first = t.elapsed();

    let mut lat = Vec::new();
    let mut found = 0usize;
    for q in &queries {
        let t = Instant::now();
        let hits = store.query(q, 10, &filter).await.unwrap();
        lat.push(t.elapsed());
        let mut exact: Vec<(f32, usize)> = data
            .iter()
            .enumerate()
            .map(|(i, v)| (cosine(q, v), i))
            .collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0));
        let truth: Vec<String> = exact[..10].iter().map(|(_, i)| id(*i)).collect();
        found += hits.iter().filter(|h| truth.contains(&h.id)).count();
    }
    lat.sort();
    println!(
        "{what} x {DIM}, chunk texts of {:.0} bytes on average: indexing {:.0} vectors/s; after a restart, opening {:.1} ms, then the first query (loads the mirror) {:.1} ms in all; query p50 {:.2} ms, p99 {:.2} ms; recall@10 vs exact {:.3}; vectors {:.0} bytes/vector = {:.2}x raw f32; keyword index {:.0} bytes/chunk = {:.2}x its text; both beyond the text once {:.3}x raw f32 (goal <= 1.3)",
        texts.iter().map(String::len).sum::<usize>() as f64 / texts.len() as f64,
        n as f64 / index_secs,
        opened.as_secs_f64() * 1000.0,
        first.as_secs_f64() * 1000.0,
        percentile(&lat, 0.5).as_secs_f64() * 1000.0,
        percentile(&lat, 0.99).as_secs_f64() * 1000.0,
        found as f64 / (10.0 * queries.len() as f64),
        bytes as f64 / n as f64,
        bytes as f64 / n as f64 / (DIM * 4) as f64,
        text_bytes as f64 / n as f64,
        text_bytes as f64 / raw_text as f64,
        (bytes + text_bytes).saturating_sub(raw_text as u64) as f64 / (n * DIM * 4) as f64,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A database file's size with its WAL.
fn file_bytes(path: &std::path::Path) -> u64 {
    let wal = path.with_extension("db-wal");
    std::fs::metadata(path).unwrap().len() + std::fs::metadata(wal).map_or(0, |m| m.len())
}

async fn checkpoint(db: &clawless_native::store::Db) {
    db.call(|c| {
        futures::executor::block_on(c.query("PRAGMA wal_checkpoint(TRUNCATE)", ())).unwrap();
        Ok(())
    })
    .await
    .unwrap();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for n in [10_000, 100_000] {
        rt.block_on(run(n));
    }
    rt.block_on(run_text());
}
