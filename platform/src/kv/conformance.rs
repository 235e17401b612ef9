//! Conformance suite for [`Kv`] adapters. `clock` must be the clock the adapter expires by;
//! `advance` moves it forward (a fake clock advances, a real one sleeps).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::error::ErrorKind;

/// Runs every check under a fresh `ns` prefix so suites can share a store.
pub async fn run(kv: &dyn Kv, clock: &dyn Clock, ns: &str) {
    basics(kv, ns).await;
    listing(kv, ns).await;
    cas(kv, ns).await;
    ttl(kv, clock, ns).await;
    purge(kv, clock, ns).await;
    json(kv, ns).await;
    scan(kv, clock, ns).await;
    concurrent_put_if_absent(kv, ns).await;
}

async fn basics(kv: &dyn Kv, ns: &str) {
    let k = format!("{ns}/basic");
    assert_eq!(kv.get(&k).await.unwrap(), None, "missing key reads as None");
    kv.put(&k, b"one", None).await.unwrap();
    assert_eq!(kv.get(&k).await.unwrap().as_deref(), Some(&b"one"[..]));
    kv.put(&k, b"two", None).await.unwrap();
    assert_eq!(
        kv.get(&k).await.unwrap().as_deref(),
        Some(&b"two"[..]),
        "put replaces"
    );
    let binary: Vec<u8> = (0..=255).collect();
    kv.put(&k, &binary, None).await.unwrap();
    assert_eq!(
        kv.get(&k).await.unwrap(),
        Some(binary),
        "values are arbitrary bytes"
    );
    kv.delete(&k).await.unwrap();
    assert_eq!(kv.get(&k).await.unwrap(), None);
    kv.delete(&k).await.unwrap();
    let err = kv.put("", b"x", None).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "empty key is Invalid");
    let long = "k".repeat(MAX_KEY_LEN + 1);
    assert_eq!(kv.get(&long).await.unwrap_err().kind, ErrorKind::Invalid);
}

async fn listing(kv: &dyn Kv, ns: &str) {
    for k in ["b", "a", "c/2", "c/1", "d"] {
        kv.put(&format!("{ns}/list/{k}"), k.as_bytes(), None)
            .await
            .unwrap();
    }
    kv.put(&format!("{ns}/listx"), b"outside", None)
        .await
        .unwrap();
    let all = kv.list(&format!("{ns}/list/"), 100).await.unwrap();
    let want: Vec<String> = ["a", "b", "c/1", "c/2", "d"]
        .iter()
        .map(|k| format!("{ns}/list/{k}"))
        .collect();
    assert_eq!(all, want, "list returns the prefix's keys in lexical order");
    let two = kv.list(&format!("{ns}/list/"), 2).await.unwrap();
    assert_eq!(two, want[..2].to_vec(), "limit keeps the first keys");
    let sub = kv.list(&format!("{ns}/list/c/"), 100).await.unwrap();
    assert_eq!(sub.len(), 2);
    assert!(kv
        .list(&format!("{ns}/nothing/"), 10)
        .await
        .unwrap()
        .is_empty());
    // A prefix with no '/' at all (adapters that partition by the first segment must
    // still find these keys; DynamoDB scans for them).
    for k in ["b", "a"] {
        kv.put(&format!("{ns}noslash{k}"), k.as_bytes(), None)
            .await
            .unwrap();
    }
    let flat = kv.list(&format!("{ns}noslash"), 100).await.unwrap();
    assert_eq!(
        flat,
        [format!("{ns}noslasha"), format!("{ns}noslashb")],
        "a prefix without '/' lists its keys in order"
    );
    assert_eq!(kv.list(&format!("{ns}noslash"), 1).await.unwrap().len(), 1);
    // Pages after a key.
    let p = format!("{ns}/list/");
    let after_b = kv.list_after(&p, &format!("{p}b"), 100).await.unwrap();
    assert_eq!(after_b, want[2..].to_vec(), "strictly after, in order");
    let skip_c = kv.list_after(&p, &format!("{p}c/~"), 1).await.unwrap();
    assert_eq!(skip_c, [format!("{p}d")], "a whole group skipped");
    let before = kv.list_after(&p, "", 2).await.unwrap();
    assert_eq!(before, want[..2].to_vec(), "a cursor before the prefix");
    assert!(kv
        .list_after(&p, &format!("{p}d"), 5)
        .await
        .unwrap()
        .is_empty());
}

async fn cas(kv: &dyn Kv, ns: &str) {
    let k = format!("{ns}/cas");
    assert!(
        kv.put_if_absent(&k, b"v1", None).await.unwrap(),
        "first put_if_absent wins"
    );
    assert!(
        !kv.put_if_absent(&k, b"v2", None).await.unwrap(),
        "second put_if_absent loses"
    );
    assert_eq!(kv.get(&k).await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(!kv
        .compare_and_swap(&k, Some(b"nope"), Some(b"v3"), None)
        .await
        .unwrap());
    assert!(kv
        .compare_and_swap(&k, Some(b"v1"), Some(b"v3"), None)
        .await
        .unwrap());
    assert_eq!(kv.get(&k).await.unwrap().as_deref(), Some(&b"v3"[..]));
    assert!(
        !kv.compare_and_swap(&k, None, Some(b"v4"), None)
            .await
            .unwrap(),
        "expected None fails when present"
    );
    assert!(
        kv.compare_and_swap(&k, Some(b"v3"), None, None)
            .await
            .unwrap(),
        "new None deletes"
    );
    assert_eq!(kv.get(&k).await.unwrap(), None);
}

async fn ttl(kv: &dyn Kv, clock: &dyn Clock, ns: &str) {
    let k = format!("{ns}/ttl");
    let keep = format!("{ns}/ttl-keep");
    kv.put(&k, b"short", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    kv.put(&keep, b"long", Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert!(kv.get(&k).await.unwrap().is_some(), "live before its TTL");
    clock.sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        kv.get(&k).await.unwrap(),
        None,
        "expired key reads as absent"
    );
    assert!(
        !kv.list(&format!("{ns}/ttl"), 10)
            .await
            .unwrap()
            .contains(&k),
        "expired key not listed"
    );
    assert!(kv.get(&keep).await.unwrap().is_some());
    assert!(
        kv.put_if_absent(&k, b"again", None).await.unwrap(),
        "expired key counts as absent"
    );
}

/// A scan reads what a listing lists, with each value and its expiry instant.
async fn scan(kv: &dyn Kv, clock: &dyn Clock, ns: &str) {
    let pre = format!("{ns}/scan/");
    let (a, b, c, gone) = (
        format!("{pre}a"),
        format!("{pre}b"),
        format!("{pre}c"),
        format!("{pre}d"),
    );
    let before = clock.now_ms();
    kv.put(&a, b"one", None).await.unwrap();
    kv.put(&b, &[0, 159, 255], Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    kv.put(&c, b"three", None).await.unwrap();
    kv.put(&gone, b"soon", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    kv.put(&format!("{ns}/scanned"), b"other", None)
        .await
        .unwrap();
    clock.sleep(Duration::from_millis(1100)).await;
    let all = kv.scan(&pre, "", 10).await.unwrap();
    let keys: Vec<&str> = all.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [a.as_str(), b.as_str(), c.as_str()],
        "expired left out"
    );
    assert_eq!(all[0].value, b"one");
    assert_eq!(all[0].expires_at_ms, None);
    assert_eq!(all[1].value, [0, 159, 255], "binary values kept");
    let at = all[1].expires_at_ms.expect("the TTL's instant");
    assert!(
        at >= before + 3_600_000 && at <= clock.now_ms() + 3_600_000,
        "expiry {at} is the put's instant plus its TTL"
    );
    let page = kv.scan(&pre, &a, 1).await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].key, b, "after and limit as list_after");
}

/// Purging removes what has expired and nothing else; whether an adapter purges at all
/// (the default does nothing), what reads return is the same.
async fn purge(kv: &dyn Kv, clock: &dyn Clock, ns: &str) {
    let gone = format!("{ns}/purge/gone");
    let live = format!("{ns}/purge/live");
    let forever = format!("{ns}/purge/forever");
    kv.put(&gone, b"short", Some(Duration::from_secs(1)))
        .await
        .unwrap();
    kv.put(&live, b"long", Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    kv.put(&forever, b"always", None).await.unwrap();
    kv.purge_expired().await.unwrap();
    assert_eq!(
        kv.get(&gone).await.unwrap().as_deref(),
        Some(&b"short"[..]),
        "a purge before the TTL keeps the key"
    );
    clock.sleep(Duration::from_millis(1100)).await;
    kv.purge_expired().await.unwrap();
    assert_eq!(
        kv.get(&gone).await.unwrap(),
        None,
        "purged key reads as absent"
    );
    assert_eq!(
        kv.list(&format!("{ns}/purge/"), 10).await.unwrap(),
        [forever.clone(), live.clone()],
        "only the expired key left the listing"
    );
    assert_eq!(kv.get(&live).await.unwrap().as_deref(), Some(&b"long"[..]));
    assert_eq!(
        kv.get(&forever).await.unwrap().as_deref(),
        Some(&b"always"[..])
    );
    assert!(
        kv.put_if_absent(&gone, b"again", None).await.unwrap(),
        "a purged key can be written again"
    );
    kv.purge_expired().await.unwrap();
    assert_eq!(
        kv.get(&gone).await.unwrap().as_deref(),
        Some(&b"again"[..]),
        "a purge leaves a key without a TTL"
    );
}

async fn json(kv: &dyn Kv, ns: &str) {
    let k = format!("{ns}/json");
    kv.put_json(&k, &serde_json::json!({"a": [1, 2]}), None)
        .await
        .unwrap();
    let v: serde_json::Value = kv.get_json(&k).await.unwrap().unwrap();
    assert_eq!(v["a"][1], 2);
    kv.put(&k, b"not json", None).await.unwrap();
    let err = kv.get_json::<serde_json::Value>(&k).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
}

async fn concurrent_put_if_absent(kv: &dyn Kv, ns: &str) {
    let k = format!("{ns}/race");
    let attempts = (0..8u8).map(|i| {
        let k = k.clone();
        async move { kv.put_if_absent(&k, &[i], None).await.unwrap() }
    });
    let wins = futures::future::join_all(attempts)
        .await
        .into_iter()
        .filter(|w| *w)
        .count();
    assert_eq!(wins, 1, "exactly one of concurrent put_if_absent wins");
}
