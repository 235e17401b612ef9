//! The Kv port over the table: `p = "kv#" + first path segment`, `s = key`, value `v`, expiry
//! `expms` (checked on read: DynamoDB deletes expired items late) and `exp` (seconds, for TTL
//! deletion). Prefix listing is a Query on one partition when the prefix holds a `/`, else a
//! Scan. Compare-and-swap is a conditional write.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use clawless_platform::kv::{expiry, validate_key};
use clawless_platform::{async_trait, Kv, KvEntry, PortError};

use super::{blob, num, s, sdk_err, string, Item, Table};

fn kv_partition(key: &str) -> String {
    format!("kv#{}", key.split('/').next().unwrap_or(key))
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
        let items = self.items(prefix, "", limit).await?;
        Ok(items.iter().filter_map(|i| string(i, "s")).collect())
    }

    async fn list_after(
        &self,
        prefix: &str,
        after: &str,
        limit: usize,
    ) -> Result<Vec<String>, PortError> {
        let items = self.items(prefix, after, limit).await?;
        Ok(items.iter().filter_map(|i| string(i, "s")).collect())
    }

    async fn scan(
        &self,
        prefix: &str,
        after: &str,
        limit: usize,
    ) -> Result<Vec<KvEntry>, PortError> {
        let items = self.items(prefix, after, limit).await?;
        Ok(items
            .iter()
            .filter_map(|i| {
                Some(KvEntry {
                    key: string(i, "s")?,
                    value: blob(i, "v")?,
                    expires_at_ms: num(i, "expms"),
                })
            })
            .collect())
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

    // `purge_expired` keeps the port's default (nothing, 0): the table's TTL attribute `exp`
    // has DynamoDB delete expired items itself, without a write charged to us, and until it
    // does, every read filters on `expms`.
}

impl DynamoKv {
    /// The live items whose key starts with `prefix` and sorts after `after`, in key order, at
    /// most `limit`: a Query of one partition when the prefix holds a `/`, else a Scan.
    async fn items(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<Item>, PortError> {
        let t = &self.0;
        let keep = |i: &Item| t.live(i) && string(i, "s").is_some_and(|k| k.as_str() > after);
        if prefix.contains('/') {
            return t
                .query(&kv_partition(prefix), prefix, after, limit, keep)
                .await;
        }
        // No partition to name: scan the Kv items and sort.
        let mut items = Vec::new();
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
            items.extend(page.items.unwrap_or_default().into_iter().filter(keep));
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        items.sort_by_key(|i| string(i, "s"));
        items.truncate(limit);
        Ok(items)
    }

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
