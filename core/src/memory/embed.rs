//! Embeddings: the `EmbeddingProvider` trait, an OpenAI-compatible `/v1/embeddings` adapter
//! over the Http port, and a local deterministic embedder that needs no key.
//!
//! The local embedder hashes word unigrams, word bigrams and character trigrams into a fixed
//! number of dimensions (signed feature hashing), weights them sublinearly and normalises: no
//! model to download, the same vector on every shell, and good enough for lexical-semantic
//! recall of short notes. Its quality is measured by the retrieval test, not assumed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest};
use serde_json::{json, Value};

use crate::secret::Secret;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(pub String);

#[async_trait]
pub trait EmbeddingProvider: Send + Sync {
    /// The length of every vector this provider returns.
    fn dims(&self) -> usize;
    /// A name that changes whenever vectors stop being comparable (model, dims).
    fn id(&self) -> String;
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Feature-hashing embedder; see the module docs.
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    pub dims: usize,
}

impl Default for LocalEmbedder {
    fn default() -> Self {
        Self { dims: 384 }
    }
}

/// FNV-1a, stable across platforms and releases.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Lower-cased words of letters and digits, with a light English stemming (plural `s`,
/// `ing`, `ed`) so "cats" meets "cat".
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| stem(&w.to_lowercase()))
        .collect()
}

fn stem(w: &str) -> String {
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(base) = w.strip_suffix(suffix) {
            if base.chars().count() >= 3 {
                return base.to_owned();
            }
        }
    }
    w.to_owned()
}

const STOP: &[&str] = &[
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "at", "for", "is", "are", "was", "were",
    "be", "it", "that", "this", "with", "as", "by", "my", "i", "you", "me", "what", "do", "does",
    "did", "have", "has", "had", "from", "not",
];

impl LocalEmbedder {
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dims];
        let mut add = |feature: &str, weight: f32| {
            let h = fnv(feature.as_bytes());
            let idx = (h % self.dims as u64) as usize;
            let sign = if (h >> 63) & 1 == 1 { -1.0 } else { 1.0 };
            v[idx] += sign * weight;
        };
        let ws: Vec<String> = words(text)
            .into_iter()
            .filter(|w| !STOP.contains(&w.as_str()))
            .collect();
        for w in &ws {
            add(&format!("w:{w}"), 1.0);
            let padded = format!("^{w}$");
            let chars: Vec<char> = padded.chars().collect();
            for tri in chars.windows(3) {
                add(&format!("c:{}", tri.iter().collect::<String>()), 0.35);
            }
        }
        for pair in ws.windows(2) {
            add(&format!("b:{} {}", pair[0], pair[1]), 0.6);
        }
        // Sublinear weighting, then unit length.
        for x in v.iter_mut() {
            *x = x.signum() * (1.0 + x.abs()).ln();
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        } else {
            // An empty text still needs a valid (non-zero) vector.
            v[0] = 1.0;
        }
        v
    }
}

#[async_trait]
impl EmbeddingProvider for LocalEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }
    fn id(&self) -> String {
        format!("local-hash-v1-{}", self.dims)
    }
    /// Yields to the executor after every [`LOCAL_YIELD_EVERY`] texts: embedding is CPU work
    /// on the caller's thread, and a long batch must not hold it.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for (i, t) in texts.iter().enumerate() {
            if i > 0 && i % LOCAL_YIELD_EVERY == 0 {
                super::index::yield_now().await;
            }
            out.push(self.embed_one(t));
        }
        Ok(out)
    }
}

/// Texts [`LocalEmbedder`] embeds between two yields (a few milliseconds of work).
pub const LOCAL_YIELD_EVERY: usize = 8;

/// OpenAI-compatible `POST {base}/embeddings`.
pub struct OpenAiEmbeddings {
    pub http: Arc<dyn Http>,
    pub base_url: String,
    pub api_key: Secret,
    pub model: String,
    pub dims: usize,
}

#[async_trait]
impl EmbeddingProvider for OpenAiEmbeddings {
    fn dims(&self) -> usize {
        self.dims
    }
    fn id(&self) -> String {
        format!("openai-{}-{}", self.model, self.dims)
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = json!({"model": self.model, "input": texts, "dimensions": self.dims});
        let url = format!("{}/embeddings", self.base_url.trim_end_matches('/'));
        let mut req = HttpRequest::post_json(url, &body, Duration::from_secs(60));
        if !self.api_key.is_empty() {
            req = req.header("authorization", format!("Bearer {}", self.api_key.expose()));
        }
        let resp = self
            .http
            .send(req)
            .await
            .map_err(|e| EmbedError(e.to_string()))?;
        if resp.status != 200 {
            return Err(EmbedError(format!("HTTP {}", resp.status)));
        }
        parse_embeddings(&resp.body, texts.len(), self.dims)
    }
}

/// Reads `{"data": [{"index": i, "embedding": [...]}, ...]}` into vectors in input order.
pub fn parse_embeddings(body: &[u8], n: usize, dims: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| EmbedError(format!("bad JSON: {e}")))?;
    let data = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| EmbedError("no data".into()))?;
    let mut out = vec![Vec::new(); n];
    for item in data {
        let i = item
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX) as usize;
        let emb: Vec<f32> = item
            .get("embedding")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_f64)
                    .map(|x| x as f32)
                    .collect()
            })
            .unwrap_or_default();
        if i >= n || emb.len() != dims {
            return Err(EmbedError(format!(
                "item {i}: {} dims, wanted {dims}",
                emb.len()
            )));
        }
        out[i] = emb;
    }
    if out.iter().any(Vec::is_empty) {
        return Err(EmbedError("missing embeddings".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_platform::vectors::cosine;

    #[test]
    fn local_embedder_is_deterministic_and_normalised() {
        let e = LocalEmbedder::default();
        let a = e.embed_one("My cat Miso likes tuna");
        assert_eq!(a, e.embed_one("My cat Miso likes tuna"));
        assert_eq!(a.len(), 384);
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
        assert!(
            e.embed_one("").iter().any(|x| *x != 0.0),
            "empty text still embeds"
        );
    }

    #[test]
    fn related_texts_are_closer_than_unrelated() {
        let e = LocalEmbedder::default();
        let q = e.embed_one("what is my cat called?");
        let related = e.embed_one("Our cats: Miso is the grey one.");
        let unrelated = e.embed_one("Quarterly tax filing is due in April.");
        assert!(
            cosine(&q, &related) > cosine(&q, &unrelated) + 0.1,
            "{} vs {}",
            cosine(&q, &related),
            cosine(&q, &unrelated)
        );
    }

    #[test]
    fn parses_openai_embeddings_in_index_order() {
        let body = br#"{"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}"#;
        let v = parse_embeddings(body, 2, 2).unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert!(parse_embeddings(body, 2, 3).is_err(), "wrong dims refused");
        assert!(parse_embeddings(b"{}", 1, 2).is_err());
    }
}
