//! Memory embeddings from Workers AI (`@cf/baai/bge-small-en-v1.5`, 384 dimensions: the same
//! size as the local embedder, so a Vectorize index fits either), called through the `AI`
//! binding with `js_sys::Reflect`. Used when an `AI` binding is present; without one the
//! Worker embeds locally.

use async_trait::async_trait;
use clawless_core::memory::embed::{EmbedError, EmbeddingProvider};
use js_sys::{Array, Function, Object, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::send::{SendFuture, SendWrapper};

pub const MODEL: &str = "@cf/baai/bge-small-en-v1.5";
pub const DIMS: usize = 384;
/// Texts per call (the model takes up to 100).
const BATCH: usize = 50;

pub struct WorkersAi {
    ai: SendWrapper<JsValue>,
}

impl WorkersAi {
    pub fn new(ai: JsValue) -> Self {
        Self {
            ai: SendWrapper(ai),
        }
    }

    async fn run(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let err = |what: &str, e: JsValue| {
            let message = e
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
                .or_else(|| e.as_string())
                .unwrap_or_else(|| "unknown error".into());
            EmbedError(format!("workers ai {what}: {message}"))
        };
        let ai = &self.ai.0;
        let run: Function = Reflect::get(ai, &JsValue::from_str("run"))
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or_else(|| EmbedError("the AI binding has no run()".into()))?;
        let input = Object::new();
        let list: Array = texts.iter().map(|t| JsValue::from_str(t)).collect();
        let _ = Reflect::set(&input, &JsValue::from_str("text"), &list);
        let promise = run
            .call2(ai, &JsValue::from_str(MODEL), &input)
            .map_err(|e| err("run", e))?;
        let out = JsFuture::from(Promise::resolve(&promise))
            .await
            .map_err(|e| err("run", e))?;
        let data: Array = Reflect::get(&out, &JsValue::from_str("data"))
            .ok()
            .and_then(|d| d.dyn_into().ok())
            .ok_or_else(|| EmbedError("workers ai: no data in the answer".into()))?;
        let vectors: Vec<Vec<f32>> = data
            .iter()
            .map(|row| {
                row.dyn_into::<Array>()
                    .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(0.0) as f32).collect())
                    .unwrap_or_default()
            })
            .collect();
        if vectors.len() != texts.len() || vectors.iter().any(|v: &Vec<f32>| v.len() != DIMS) {
            return Err(EmbedError(format!(
                "workers ai: expected {} vectors of {DIMS}, got {}",
                texts.len(),
                vectors.len()
            )));
        }
        Ok(vectors)
    }
}

#[async_trait]
impl EmbeddingProvider for WorkersAi {
    fn dims(&self) -> usize {
        DIMS
    }

    fn id(&self) -> String {
        format!("workers-ai/{MODEL}")
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(SendFuture::new(self.run(batch)).await?);
        }
        Ok(out)
    }
}
