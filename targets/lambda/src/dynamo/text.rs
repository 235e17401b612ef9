//! The TextIndex port over the table: an inverted index: postings `p = "txt#" + term`,
//! `s = doc id`, `tf`; one item per document in `p = "txtdoc"` (`len`, `meta`, `terms`) and
//! its text in `p = "txtbody"` (`body`), apart so that a search does not read it. A search
//! reads the `txtdoc` partition (for the document count, average length and metadata) and
//! each query term's postings, then scores BM25: fine for thousands of chunks, not millions.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use clawless_platform::text::{bm25, query_terms, rank_text, terms as text_terms};
use clawless_platform::vectors::matches;
use clawless_platform::{async_trait, ErrorKind, PortError, TextDoc, TextHit, TextIndex};

use super::{num, s, sdk_err, string, Table};

/// The partition of the documents' texts.
const BODY: &str = "txtbody";
/// Keys per BatchGetItem (DynamoDB's limit).
const BATCH_GET: usize = 100;
/// BatchGetItem calls per group of keys before unprocessed keys are an error.
const BATCH_TRIES: usize = 5;

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
        // The document item goes last: while it is there, a retried removal finds the rest.
        self.0.delete_item(BODY.into(), id).await?;
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
            self.0
                .client
                .put_item()
                .table_name(&self.0.name)
                .item("p", s(BODY))
                .item("s", s(&d.id))
                .item("body", s(&d.text))
                .send()
                .await
                .map_err(sdk_err)?;
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
        let docs = self.0.query("txtdoc", "", "", usize::MAX, |_| true).await?;
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
                .query(&format!("txt#{term}"), "", "", usize::MAX, |_| true)
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

    async fn texts(&self, ids: &[String]) -> Result<HashMap<String, String>, PortError> {
        let mut out = HashMap::new();
        // BatchGetItem refuses a request that names a key twice.
        let mut ids = ids.to_vec();
        ids.sort();
        ids.dedup();
        for group in ids.chunks(BATCH_GET) {
            let keys = group
                .iter()
                .map(|id| HashMap::from([("p".to_owned(), s(BODY)), ("s".to_owned(), s(id))]))
                .collect::<Vec<_>>();
            let mut pending = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| PortError::invalid(e.to_string()))?,
            );
            for attempt in 0..BATCH_TRIES {
                let Some(request) = pending.take() else {
                    break;
                };
                if attempt > 0 {
                    // Unprocessed keys mean throttling: back off before asking again.
                    tokio::time::sleep(std::time::Duration::from_millis(25 << attempt)).await;
                }
                let page = self
                    .0
                    .client
                    .batch_get_item()
                    .request_items(&self.0.name, request)
                    .send()
                    .await
                    .map_err(sdk_err)?;
                for item in page
                    .responses
                    .and_then(|mut r| r.remove(&self.0.name))
                    .unwrap_or_default()
                {
                    if let (Some(id), Some(body)) = (string(&item, "s"), string(&item, "body")) {
                        out.insert(id, body);
                    }
                }
                pending = page
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.0.name))
                    .filter(|k| !k.keys.is_empty());
            }
            if pending.is_some() {
                return Err(PortError::new(
                    ErrorKind::RateLimited,
                    format!("dynamodb: texts: keys left unprocessed after {BATCH_TRIES} tries"),
                ));
            }
        }
        Ok(out)
    }
}
