//! Vectors over a Vectorize index, called through the binding's JS methods with
//! `js_sys::Reflect` (workers-rs has no wrapper).
//!
//! Vectorize limits the adapter works within: ids of at most 64 bytes (longer ones are stored
//! under a hash, the real id kept in metadata), `topK` of at most 20 when metadata is returned,
//! a fixed dimension per index (read once with `describe()` so a wrong one is `Invalid` here,
//! not a remote error), and filters only on properties with a metadata index (`scope`, see
//! README). Writes become visible to queries after a few seconds on the real service.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use clawless_platform::vectors::{rank, validate_vector};
use clawless_platform::{PortError, Result, VectorHit, VectorRecord, Vectors};
use js_sys::{Array, Float32Array, Function, Object, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::send::{SendFuture, SendWrapper};

pub const MAX_ID_BYTES: usize = 64;
pub const MAX_TOP_K: usize = 20;
/// Metadata key holding an id too long for Vectorize.
const ID_KEY: &str = "_id";

pub struct Vectorize {
    index: SendWrapper<JsValue>,
    dims: Mutex<Option<usize>>,
}

fn js_err(what: &str, e: JsValue) -> PortError {
    let message = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "unknown error".into());
    PortError::unavailable(format!("vectorize {what}: {message}"))
}

fn get(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

fn set(obj: &Object, key: &str, value: &JsValue) {
    // Setting a property on a plain object we just made cannot fail.
    let _ = Reflect::set(obj, &JsValue::from_str(key), value);
}

/// The id Vectorize stores: the id itself, or a 128-bit FNV-1a hash of a long one.
pub fn stored_id(id: &str) -> String {
    if id.len() <= MAX_ID_BYTES {
        return id.to_owned();
    }
    let fnv = |seed: u64| {
        id.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "h:{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

/// What Vectorize stores for a record: its id under [`stored_id`], and its metadata with the
/// real id added (under `_id`) when that is not the id stored.
pub fn to_stored(
    id: &str,
    metadata: &BTreeMap<String, String>,
) -> (String, BTreeMap<String, String>) {
    let stored = stored_id(id);
    let mut metadata = metadata.clone();
    if stored != id {
        metadata.insert(ID_KEY.to_owned(), id.to_owned());
    }
    (stored, metadata)
}

/// A record's id and metadata from what Vectorize answers (the inverse of [`to_stored`]).
pub fn from_stored(
    stored: String,
    mut metadata: BTreeMap<String, String>,
) -> (String, BTreeMap<String, String>) {
    let id = metadata.remove(ID_KEY).unwrap_or(stored);
    (id, metadata)
}

fn object_of(map: &BTreeMap<String, String>) -> Object {
    let obj = Object::new();
    for (k, v) in map {
        set(&obj, k, &JsValue::from_str(v));
    }
    obj
}

impl Vectorize {
    pub fn new(index: JsValue) -> Self {
        Self {
            index: SendWrapper(index),
            dims: Mutex::new(None),
        }
    }

    async fn call(&self, method: &str, args: &[JsValue]) -> Result<JsValue> {
        let index = &self.index.0;
        let f: Function = get(index, method)
            .dyn_into()
            .map_err(|_| PortError::invalid(format!("the Vectorize binding has no {method}()")))?;
        let args: Array = args.iter().collect();
        let value = f.apply(index, &args).map_err(|e| js_err(method, e))?;
        JsFuture::from(Promise::resolve(&value))
            .await
            .map_err(|e| js_err(method, e))
    }

    async fn dims(&self) -> Result<usize> {
        if let Some(d) = *self.dims.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(d);
        }
        let info = self.call("describe", &[]).await?;
        let dims = [
            get(&info, "dimensions"),
            get(&get(&info, "config"), "dimensions"),
        ]
        .iter()
        .find_map(JsValue::as_f64)
        .ok_or_else(|| PortError::unavailable("vectorize describe(): no dimensions"))?
            as usize;
        *self.dims.lock().unwrap_or_else(|e| e.into_inner()) = Some(dims);
        Ok(dims)
    }

    async fn upsert_js(&self, records: Vec<VectorRecord>) -> Result<()> {
        let dims = self.dims().await?;
        for r in &records {
            validate_vector(&r.vector, Some(dims))?;
        }
        let items: Array = records
            .iter()
            .map(|r| {
                let item = Object::new();
                let (id, metadata) = to_stored(&r.id, &r.metadata);
                set(&item, "id", &JsValue::from_str(&id));
                set(&item, "values", &Float32Array::from(&r.vector[..]).into());
                set(&item, "metadata", &object_of(&metadata).into());
                JsValue::from(item)
            })
            .collect();
        self.call("upsert", &[items.into()]).await.map(drop)
    }

    async fn query_js(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>> {
        validate_vector(vector, Some(self.dims().await?))?;
        let options = Object::new();
        set(
            &options,
            "topK",
            &JsValue::from_f64(top_k.clamp(1, MAX_TOP_K) as f64),
        );
        set(&options, "returnMetadata", &JsValue::from_str("all"));
        if !filter.is_empty() {
            set(&options, "filter", &object_of(filter).into());
        }
        let result = self
            .call(
                "query",
                &[Float32Array::from(vector).into(), options.into()],
            )
            .await?;
        let matches: Array = get(&result, "matches").dyn_into().unwrap_or_default();
        let mut hits = Vec::new();
        for m in matches.iter() {
            let mut metadata = BTreeMap::new();
            let meta = get(&m, "metadata");
            if let Some(obj) = meta.dyn_ref::<Object>() {
                for key in Object::keys(obj).iter() {
                    if let Some(k) = key.as_string() {
                        if let Some(v) = get(&meta, &k).as_string() {
                            metadata.insert(k, v);
                        }
                    }
                }
            }
            let stored = get(&m, "id").as_string().unwrap_or_default();
            let (id, metadata) = from_stored(stored, metadata);
            hits.push(VectorHit {
                id,
                score: get(&m, "score").as_f64().unwrap_or(0.0) as f32,
                metadata,
            });
        }
        Ok(rank(hits, top_k))
    }

    async fn delete_js(&self, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Array = ids
            .iter()
            .map(|id| JsValue::from_str(&stored_id(id)))
            .collect();
        self.call("deleteByIds", &[ids.into()]).await.map(drop)
    }
}

#[async_trait]
impl Vectors for Vectorize {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<()> {
        SendFuture::new(self.upsert_js(records)).await
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>> {
        SendFuture::new(self.query_js(vector, top_k, filter)).await
    }

    async fn delete(&self, ids: &[String]) -> Result<()> {
        SendFuture::new(self.delete_js(ids)).await
    }
}

#[cfg(test)]
mod tests;
