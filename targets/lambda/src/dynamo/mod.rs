//! The Kv, Vectors and Files ports over one DynamoDB table (partition key `p`, sort key `s`,
//! TTL attribute `exp`), the table `template.yaml` defines.
//!
//! - Kv: `p = "kv#" + first path segment`, `s = key`, value `v`, expiry `expms` (checked on
//!   read: DynamoDB deletes expired items late) and `exp` (seconds, for TTL deletion).
//!   Prefix listing is a Query on one partition when the prefix holds a `/`, else a Scan.
//!   Compare-and-swap is a conditional write.
//! - Vectors: `p = "vec"`, exact cosine scan of the partition: fine for an assistant's memory
//!   (thousands of chunks); each query reads the whole partition, ~1.6 KB per 384-dim vector.
//! - TextIndex: an inverted index: postings `p = "txt#" + term`, `s = doc id`, `tf`; one item
//!   per document in `p = "txtdoc"` (`len`, `meta`, `terms`). A search reads the `txtdoc`
//!   partition (for the document count, average length and metadata) and each query term's
//!   postings, then scores BM25: fine for thousands of chunks, not millions.
//! - Files: `p = "file"`, `s = path`: no bucket to create; a file may be at most 350 KB (the
//!   item limit is 400 KB) and `append` is read-modify-write.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use clawless_platform::files::{normalize, normalize_dir};
use clawless_platform::kv::{expiry, validate_key};
use clawless_platform::text::{bm25, query_terms, rank_text, terms as text_terms};
use clawless_platform::vectors::{cosine, from_blob, matches, rank, to_blob, validate_vector};
use clawless_platform::{
    async_trait, Clock, ErrorKind, Files, Kv, PortError, TextDoc, TextHit, TextIndex, VectorHit,
    VectorRecord, Vectors,
};
use std::sync::Arc;

/// Largest file the Files adapter stores.
pub const MAX_FILE: usize = 350 * 1024;

type Item = HashMap<String, AttributeValue>;

/// The table and the clock its expiries are read by.
#[derive(Clone)]
pub struct Table {
    pub client: Client,
    pub name: String,
    pub clock: Arc<dyn Clock>,
}

fn sdk_err<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug>(
    e: SdkError<E, R>,
) -> PortError {
    let code = e.code().unwrap_or("").to_owned();
    let text = DisplayErrorContext(&e).to_string();
    let kind = match code.as_str() {
        "ProvisionedThroughputExceededException"
        | "ThrottlingException"
        | "RequestLimitExceeded" => ErrorKind::RateLimited,
        "ValidationException" => ErrorKind::Invalid,
        "ResourceNotFoundException" => ErrorKind::Unavailable,
        _ if matches!(e, SdkError::TimeoutError(_)) => ErrorKind::Timeout,
        _ => ErrorKind::Unavailable,
    };
    PortError::new(kind, format!("dynamodb: {text}"))
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn kv_partition(key: &str) -> String {
    format!("kv#{}", key.split('/').next().unwrap_or(key))
}

fn blob(item: &Item, name: &str) -> Option<Vec<u8>> {
    match item.get(name)? {
        AttributeValue::B(b) => Some(b.clone().into_inner()),
        _ => None,
    }
}

fn num(item: &Item, name: &str) -> Option<u64> {
    match item.get(name)? {
        AttributeValue::N(n) => n.parse().ok(),
        _ => None,
    }
}

fn string(item: &Item, name: &str) -> Option<String> {
    match item.get(name)? {
        AttributeValue::S(v) => Some(v.clone()),
        _ => None,
    }
}

impl Table {
    fn live(&self, item: &Item) -> bool {
        num(item, "expms").is_none_or(|e| e > self.clock.now_ms())
    }

    async fn get_item(&self, p: String, sk: &str) -> Result<Option<Item>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.name)
            .key("p", s(p))
            .key("s", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(out.item)
    }

    async fn delete_item(&self, p: String, sk: &str) -> Result<(), PortError> {
        self.client
            .delete_item()
            .table_name(&self.name)
            .key("p", s(p))
            .key("s", s(sk))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    /// All items of partition `p` whose sort key starts with `prefix`, in key order, until
    /// `keep` has accepted `limit` of them.
    async fn query(
        &self,
        p: &str,
        prefix: &str,
        limit: usize,
        keep: impl Fn(&Item) -> bool,
    ) -> Result<Vec<Item>, PortError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.name)
                .consistent_read(true)
                .expression_attribute_values(":p", s(p))
                .set_exclusive_start_key(start.take());
            q = if prefix.is_empty() {
                q.key_condition_expression("p = :p")
            } else {
                q.key_condition_expression("p = :p AND begins_with(s, :pre)")
                    .expression_attribute_values(":pre", s(prefix))
            };
            let page = q.send().await.map_err(sdk_err)?;
            for item in page.items.unwrap_or_default() {
                if keep(&item) {
                    out.push(item);
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }
}

/// The Kv port over the table.
pub struct DynamoKv(pub Table);

#[async_trait]
impl Kv for DynamoKv {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, PortError> {
        validate_key(key)?;
        let item = self.0.get_item(kv_partition(key), key).await?;
        Ok(item.filter(|i| self.0.live(i)).and_then(|i| blob(&i, "v")))
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), PortError> {
        validate_key(key)?;
        self.0
            .client
            .put_item()
            .table_name(&self.0.name)
            .set_item(Some(self.item(key, value, ttl)))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        validate_key(key)?;
        self.0.delete_item(kv_partition(key), key).await
    }

    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>, PortError> {
        let t = &self.0;
        if prefix.contains('/') {
            let items = t
                .query(&kv_partition(prefix), prefix, limit, |i| t.live(i))
                .await?;
            return Ok(items.iter().filter_map(|i| string(i, "s")).collect());
        }
        // No partition to name: scan the Kv items and sort.
        let mut keys = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = t
                .client
                .scan()
                .table_name(&t.name)
                .consistent_read(true)
                .filter_expression("begins_with(p, :kv) AND begins_with(s, :pre)")
                .expression_attribute_values(":kv", s("kv#"))
                .expression_attribute_values(":pre", s(prefix))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_err)?;
            keys.extend(
                page.items
                    .unwrap_or_default()
                    .iter()
                    .filter(|i| t.live(i))
                    .filter_map(|i| string(i, "s")),
            );
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        keys.sort();
        keys.truncate(limit);
        Ok(keys)
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        ttl: Option<Duration>,
    ) -> Result<bool, PortError> {
        validate_key(key)?;
        let t = &self.0;
        let now = AttributeValue::N(t.clock.now_ms().to_string());
        let (condition, mut values) = match expected {
            None => (
                "attribute_not_exists(s) OR expms <= :now",
                HashMap::from([(":now".to_owned(), now)]),
            ),
            Some(v) => (
                "v = :expected AND (attribute_not_exists(expms) OR expms > :now)",
                HashMap::from([
                    (":now".to_owned(), now),
                    (
                        ":expected".to_owned(),
                        AttributeValue::B(Blob::new(v.to_vec())),
                    ),
                ]),
            ),
        };
        let result = match new {
            Some(value) => t
                .client
                .put_item()
                .table_name(&t.name)
                .set_item(Some(self.item(key, value, ttl)))
                .condition_expression(condition)
                .set_expression_attribute_values(Some(std::mem::take(&mut values)))
                .send()
                .await
                .map(drop)
                .map_err(|e| {
                    (
                        e.as_service_error()
                            .is_some_and(|s| s.is_conditional_check_failed_exception()),
                        sdk_err(e),
                    )
                }),
            None => t
                .client
                .delete_item()
                .table_name(&t.name)
                .key("p", s(kv_partition(key)))
                .key("s", s(key))
                .condition_expression(condition)
                .set_expression_attribute_values(Some(values))
                .send()
                .await
                .map(drop)
                .map_err(|e| {
                    (
                        e.as_service_error()
                            .is_some_and(|s| s.is_conditional_check_failed_exception()),
                        sdk_err(e),
                    )
                }),
        };
        match result {
            Ok(()) => Ok(true),
            Err((true, _)) => Ok(false),
            Err((false, e)) => Err(e),
        }
    }
}

impl DynamoKv {
    fn item(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Item {
        let mut item = HashMap::from([
            ("p".to_owned(), s(kv_partition(key))),
            ("s".to_owned(), s(key)),
            ("v".to_owned(), AttributeValue::B(Blob::new(value.to_vec()))),
        ]);
        if let Some(at) = expiry(&*self.0.clock, ttl) {
            item.insert("expms".into(), AttributeValue::N(at.to_string()));
            item.insert(
                "exp".into(),
                AttributeValue::N(at.div_ceil(1000).to_string()),
            );
        }
        item
    }
}

/// The Vectors port over the `vec` partition.
pub struct DynamoVectors(pub Table);

impl DynamoVectors {
    async fn dim(&self) -> Result<Option<usize>, PortError> {
        let items = self.0.query("vec", "", 1, |_| true).await?;
        Ok(items
            .first()
            .and_then(|i| num(i, "dim"))
            .map(|d| d as usize))
    }
}

#[async_trait]
impl Vectors for DynamoVectors {
    async fn upsert(&self, records: Vec<VectorRecord>) -> Result<(), PortError> {
        let mut dim = self.dim().await?;
        for r in &records {
            validate_vector(&r.vector, dim)?;
            dim = Some(r.vector.len());
        }
        for r in records {
            let meta = serde_json::to_string(&r.metadata)
                .map_err(|e| PortError::invalid(e.to_string()))?;
            self.0
                .client
                .put_item()
                .table_name(&self.0.name)
                .item("p", s("vec"))
                .item("s", s(r.id))
                .item("dim", AttributeValue::N(r.vector.len().to_string()))
                .item("vec", AttributeValue::B(Blob::new(to_blob(&r.vector))))
                .item("meta", s(meta))
                .send()
                .await
                .map_err(sdk_err)?;
        }
        Ok(())
    }

    async fn query(
        &self,
        vector: &[f32],
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<VectorHit>, PortError> {
        let items = self.0.query("vec", "", usize::MAX, |_| true).await?;
        validate_vector(
            vector,
            items
                .first()
                .and_then(|i| num(i, "dim"))
                .map(|d| d as usize),
        )?;
        let hits = items
            .iter()
            .filter_map(|i| {
                let metadata: BTreeMap<String, String> =
                    serde_json::from_str(&string(i, "meta")?).ok()?;
                matches(&metadata, filter).then(|| VectorHit {
                    id: string(i, "s").unwrap_or_default(),
                    score: cosine(vector, &from_blob(&blob(i, "vec").unwrap_or_default())),
                    metadata,
                })
            })
            .collect();
        Ok(rank(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<(), PortError> {
        for id in ids {
            self.0.delete_item("vec".into(), id).await?;
        }
        Ok(())
    }
}

/// The Files port over the `file` partition.
pub struct DynamoFiles(pub Table);

impl DynamoFiles {
    async fn put(&self, path: &str, data: Vec<u8>) -> Result<(), PortError> {
        if data.len() > MAX_FILE {
            return Err(PortError::invalid(format!(
                "{path}: {} bytes; files are limited to {MAX_FILE}",
                data.len()
            )));
        }
        self.0
            .client
            .put_item()
            .table_name(&self.0.name)
            .item("p", s("file"))
            .item("s", s(path))
            .item("v", AttributeValue::B(Blob::new(data)))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
}

#[async_trait]
impl Files for DynamoFiles {
    async fn read(&self, path: &str) -> Result<Vec<u8>, PortError> {
        let path = normalize(path)?;
        let item = self.0.get_item("file".into(), &path).await?;
        item.and_then(|i| blob(&i, "v"))
            .ok_or_else(|| PortError::not_found(path))
    }

    async fn write(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        self.put(&normalize(path)?, data.to_vec()).await
    }

    async fn append(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        let path = normalize(path)?;
        let mut current = match self.read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        current.extend_from_slice(data);
        self.put(&path, current).await
    }

    async fn list(&self, dir: &str) -> Result<Vec<String>, PortError> {
        let dir = normalize_dir(dir)?;
        let prefix = if dir.is_empty() {
            dir
        } else {
            format!("{dir}/")
        };
        let items = self.0.query("file", &prefix, usize::MAX, |_| true).await?;
        Ok(items.iter().filter_map(|i| string(i, "s")).collect())
    }

    async fn delete(&self, path: &str) -> Result<(), PortError> {
        self.0.delete_item("file".into(), &normalize(path)?).await
    }
}

/// The TextIndex port: an inverted index in the table (see the module docs).
pub struct DynamoText(pub Table);

impl DynamoText {
    async fn remove(&self, id: &str) -> Result<(), PortError> {
        let Some(doc) = self.0.get_item("txtdoc".into(), id).await? else {
            return Ok(());
        };
        let terms: Vec<String> = string(&doc, "terms")
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        for t in terms {
            self.0.delete_item(format!("txt#{t}"), id).await?;
        }
        self.0.delete_item("txtdoc".into(), id).await
    }
}

#[async_trait]
impl TextIndex for DynamoText {
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<(), PortError> {
        for d in docs {
            self.remove(&d.id).await?;
            let all = text_terms(&d.text);
            let mut tf: BTreeMap<String, u32> = BTreeMap::new();
            for t in &all {
                *tf.entry(t.clone()).or_default() += 1;
            }
            for (term, n) in &tf {
                self.0
                    .client
                    .put_item()
                    .table_name(&self.0.name)
                    .item("p", s(format!("txt#{term}")))
                    .item("s", s(&d.id))
                    .item("tf", AttributeValue::N(n.to_string()))
                    .send()
                    .await
                    .map_err(sdk_err)?;
            }
            let meta = serde_json::to_string(&d.metadata)
                .map_err(|e| PortError::invalid(e.to_string()))?;
            let terms = serde_json::to_string(&tf.keys().collect::<Vec<_>>())
                .map_err(|e| PortError::invalid(e.to_string()))?;
            self.0
                .client
                .put_item()
                .table_name(&self.0.name)
                .item("p", s("txtdoc"))
                .item("s", s(&d.id))
                .item("len", AttributeValue::N(all.len().to_string()))
                .item("meta", s(meta))
                .item("terms", s(terms))
                .send()
                .await
                .map_err(sdk_err)?;
        }
        Ok(())
    }

    async fn search(
        &self,
        query: &str,
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<TextHit>, PortError> {
        let q = query_terms(query);
        if q.is_empty() {
            return Ok(Vec::new());
        }
        let docs = self.0.query("txtdoc", "", usize::MAX, |_| true).await?;
        let n = docs.len() as f32;
        let avg = docs.iter().filter_map(|d| num(d, "len")).sum::<u64>() as f32 / n.max(1.0);
        let info: HashMap<String, (f32, BTreeMap<String, String>)> = docs
            .iter()
            .filter_map(|d| {
                let meta = string(d, "meta")
                    .and_then(|m| serde_json::from_str(&m).ok())
                    .unwrap_or_default();
                Some((string(d, "s")?, (num(d, "len").unwrap_or(0) as f32, meta)))
            })
            .collect();
        let mut scores: HashMap<String, f32> = HashMap::new();
        for term in &q {
            let postings = self
                .0
                .query(&format!("txt#{term}"), "", usize::MAX, |_| true)
                .await?;
            let df = postings.len() as f32;
            for p in &postings {
                let (Some(id), Some(tf)) = (string(p, "s"), num(p, "tf")) else {
                    continue;
                };
                if let Some((len, _)) = info.get(&id) {
                    *scores.entry(id).or_default() += bm25(tf as f32, df, n, *len, avg);
                }
            }
        }
        let hits = scores
            .into_iter()
            .filter_map(|(id, score)| {
                let (_, metadata) = info.get(&id)?;
                (score > 0.0 && matches(metadata, filter)).then(|| TextHit {
                    metadata: metadata.clone(),
                    id,
                    score,
                })
            })
            .collect();
        Ok(rank_text(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<(), PortError> {
        for id in ids {
            self.remove(id).await?;
        }
        Ok(())
    }
}
