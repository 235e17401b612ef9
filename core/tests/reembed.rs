//! An embedder change re-embeds memory already indexed: the manifest records which embedder
//! indexed each file, and the scheduled job run by an app with another embedder embeds every
//! chunk again, so no vector of the old embedder is left to be compared with the new one's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::collections::BTreeMap;

use clawless_core::memory::embed::LocalEmbedder;
use clawless_core::Config;
use clawless_platform::{HttpResponse, Platform, VectorHit};
use clawless_testkit::fixtures::OWNER_ID;
use futures::executor::block_on;
use serde_json::json;
use support::{Harness, Wire};

const DIMS: usize = 384;

/// What the second embedder answers for every text: one axis, so a vector from it scores 1
/// against that axis and a vector from the local embedder (hashed features spread over all
/// 384 dimensions) scores well below.
fn marker() -> Vec<f32> {
    let mut v = vec![0.0f32; DIMS];
    v[7] = 1.0;
    v
}

/// Every vector of `scope`, scored against `probe`.
async fn vectors_of(platform: &Platform, scope: &str, probe: &[f32]) -> Vec<VectorHit> {
    let filter = BTreeMap::from([("scope".to_owned(), scope.to_owned())]);
    platform
        .vectors
        .query(probe, 100_000, &filter)
        .await
        .unwrap()
}

#[test]
fn the_scheduled_reindex_re_embeds_everything_after_an_embedder_change() {
    block_on(async {
        let scope = format!("assistant/main/u{OWNER_ID}");
        let a = Harness::new(Wire::Anthropic);
        let long_term: String = (0..12)
            .map(|i| format!("## Fact {i}\nThe spare key number {i} is under pot {i}.\n\n"))
            .collect();
        let files = [
            (format!("memory/{scope}/MEMORY.md"), long_term),
            (
                format!("memory/{scope}/memory/2026-10-01.md"),
                "## Note\nMaya's birthday is on March 3.\n".to_owned(),
            ),
        ];
        for (path, text) in &files {
            a.platform.files.write(path, text.as_bytes()).await.unwrap();
        }
        a.app.scheduled().await;
        let probe = LocalEmbedder::default().embed_one("spare key under the pot");
        let before = vectors_of(&a.platform, &scope, &probe).await;
        assert!(
            before.len() >= 3,
            "indexed by the local embedder: {before:?}"
        );
        let from_b =
            |hits: &[VectorHit]| hits.iter().filter(|h| (h.score - 1.0).abs() < 1e-4).count();
        assert_eq!(from_b(&vectors_of(&a.platform, &scope, &marker()).await), 0);

        // The same storage, now with OpenAI-compatible embeddings (answering `marker()`).
        let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
        config.memory.embedder = "openai".into();
        let b = Harness::with_ports(Wire::OpenAi, config, |p, _, _| {
            p.kv = a.platform.kv.clone();
            p.files = a.platform.files.clone();
            p.vectors = a.platform.vectors.clone();
            p.text = a.platform.text.clone();
        });
        b.http
            .route(format!("{}/v1/embeddings", support::LLM), |req| {
                let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
                let data: Vec<_> = (0..body["input"].as_array().unwrap().len())
                    .map(|i| json!({"index": i, "embedding": marker()}))
                    .collect();
                Ok(HttpResponse::json(200, &json!({"data": data})))
            });
        b.app.scheduled().await;

        let after = vectors_of(&b.platform, &scope, &marker()).await;
        let mut ids: Vec<&str> = after.iter().map(|h| h.id.as_str()).collect();
        let mut before_ids: Vec<&str> = before.iter().map(|h| h.id.as_str()).collect();
        ids.sort();
        before_ids.sort();
        assert_eq!(ids, before_ids, "the same chunks, replaced in place");
        assert_eq!(
            from_b(&after),
            after.len(),
            "every vector now comes from the new embedder: {:?}",
            after.iter().map(|h| h.score).collect::<Vec<_>>()
        );
        let embedded: usize = b
            .http
            .requests()
            .iter()
            .filter(|r| r.url.ends_with("/v1/embeddings"))
            .map(|r| {
                serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["input"]
                    .as_array()
                    .unwrap()
                    .len()
            })
            .sum();
        assert_eq!(embedded, after.len(), "each chunk embedded once, by B");
    });
}
