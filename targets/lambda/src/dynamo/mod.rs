//! The Kv, Vectors, TextIndex and Files ports over one DynamoDB table (partition key `p`, sort
//! key `s`, TTL attribute `exp`), the table `template.yaml` defines: the table handle and the
//! item helpers here, one port per file ([`kv`], [`vectors`], [`text`], [`files`]), each
//! saying which partitions it uses.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use clawless_platform::{Clock, ErrorKind, PortError};

pub mod files;
pub mod kv;
pub mod text;
pub mod vectors;

pub use files::{DynamoFiles, MAX_FILE, PART};
pub use kv::DynamoKv;
pub use text::DynamoText;
pub use vectors::DynamoVectors;

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

    /// All items of partition `p` whose sort key starts with `prefix` and sorts after `after`
    /// (`""`: from the start), in key order, until `keep` has accepted `limit` of them. A
    /// later page starts the Query past `after` rather than reading the prefix from its start.
    async fn query(
        &self,
        p: &str,
        prefix: &str,
        after: &str,
        limit: usize,
        keep: impl Fn(&Item) -> bool,
    ) -> Result<Vec<Item>, PortError> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let mut start: Option<Item> = None;
        let past = !after.is_empty() && after >= prefix;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.name)
                .consistent_read(true)
                .expression_attribute_values(":p", s(p))
                .set_exclusive_start_key(start.take());
            q = if past {
                q.key_condition_expression("p = :p AND s > :after")
                    .expression_attribute_values(":after", s(after))
            } else if prefix.is_empty() {
                q.key_condition_expression("p = :p")
            } else {
                q.key_condition_expression("p = :p AND begins_with(s, :pre)")
                    .expression_attribute_values(":pre", s(prefix))
            };
            let page = q.send().await.map_err(sdk_err)?;
            for item in page.items.unwrap_or_default() {
                // Past `after`, the range runs beyond the prefix: it ends at the first key
                // outside it.
                if past && !string(&item, "s").is_some_and(|k| k.starts_with(prefix)) {
                    return Ok(out);
                }
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
