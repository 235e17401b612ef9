//! A [`Kv`] that shows each call to a hook before running it: what tests and benches use to
//! count calls, fail one, or stop the process right after one landed, without each writing its
//! own pass-through `impl Kv`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{Kv, KvEntry};
use crate::error::{PortError, Result};

/// One call, as the hook sees it before it runs.
#[derive(Debug, Clone, Copy)]
pub enum KvCall<'a> {
    Get {
        key: &'a str,
    },
    Put {
        key: &'a str,
        value: &'a [u8],
    },
    PutIfAbsent {
        key: &'a str,
        value: &'a [u8],
    },
    Delete {
        key: &'a str,
    },
    /// `list`, `list_after` and `scan`.
    List {
        prefix: &'a str,
    },
    CompareAndSwap {
        key: &'a str,
        expected: Option<&'a [u8]>,
        new: Option<&'a [u8]>,
    },
    Purge,
}

impl KvCall<'_> {
    /// `get`, `put`, `put_if_absent`, `delete`, `list`, `cas` or `purge`.
    pub fn kind(&self) -> &'static str {
        match self {
            KvCall::Get { .. } => "get",
            KvCall::Put { .. } => "put",
            KvCall::PutIfAbsent { .. } => "put_if_absent",
            KvCall::Delete { .. } => "delete",
            KvCall::List { .. } => "list",
            KvCall::CompareAndSwap { .. } => "cas",
            KvCall::Purge => "purge",
        }
    }

    /// The key (a listing's prefix; empty for a purge).
    pub fn key(&self) -> &str {
        match self {
            KvCall::Get { key }
            | KvCall::Put { key, .. }
            | KvCall::PutIfAbsent { key, .. }
            | KvCall::Delete { key }
            | KvCall::CompareAndSwap { key, .. } => key,
            KvCall::List { prefix } => prefix,
            KvCall::Purge => "",
        }
    }

    /// The value the call writes, if it writes one.
    pub fn written(&self) -> Option<&[u8]> {
        match self {
            KvCall::Put { value, .. } | KvCall::PutIfAbsent { value, .. } => Some(value),
            KvCall::CompareAndSwap { new, .. } => *new,
            _ => None,
        }
    }
}

/// What the hook decides for a call.
pub enum Verdict {
    /// Run it.
    Run,
    /// Fail it with this error, without running it.
    Fail(PortError),
    /// Run it, then this (a test's crash right after a write landed panics here), then return
    /// the call's result.
    Then(Box<dyn FnOnce() + Send>),
}

/// `inner` with `hook` shown every call first.
pub struct Tapped<F> {
    inner: Arc<dyn Kv>,
    hook: F,
}

impl<F: Fn(&KvCall<'_>) -> Verdict + Send + Sync> Tapped<F> {
    pub fn new(inner: Arc<dyn Kv>, hook: F) -> Self {
        Self { inner, hook }
    }

    async fn run<T, Fut: Future<Output = Result<T>>>(
        &self,
        call: KvCall<'_>,
        op: impl FnOnce() -> Fut,
    ) -> Result<T> {
        match (self.hook)(&call) {
            Verdict::Run => op().await,
            Verdict::Fail(e) => Err(e),
            Verdict::Then(after) => {
                let result = op().await;
                after();
                result
            }
        }
    }
}

#[async_trait]
impl<F: Fn(&KvCall<'_>) -> Verdict + Send + Sync> Kv for Tapped<F> {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.run(KvCall::Get { key }, || self.inner.get(key)).await
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        self.run(KvCall::Put { key, value }, || {
            self.inner.put(key, value, ttl)
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.run(KvCall::Delete { key }, || self.inner.delete(key))
            .await
    }

    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        self.run(KvCall::List { prefix }, || self.inner.list(prefix, limit))
            .await
    }

    async fn list_after(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<String>> {
        self.run(KvCall::List { prefix }, || {
            self.inner.list_after(prefix, after, limit)
        })
        .await
    }

    async fn scan(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<KvEntry>> {
        self.run(KvCall::List { prefix }, || {
            self.inner.scan(prefix, after, limit)
        })
        .await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        ttl: Option<Duration>,
    ) -> Result<bool> {
        let call = KvCall::CompareAndSwap { key, expected, new };
        self.run(call, || {
            self.inner.compare_and_swap(key, expected, new, ttl)
        })
        .await
    }

    async fn put_if_absent(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool> {
        self.run(KvCall::PutIfAbsent { key, value }, || {
            self.inner.put_if_absent(key, value, ttl)
        })
        .await
    }

    async fn purge_expired(&self) -> Result<u64> {
        self.run(KvCall::Purge, || self.inner.purge_expired()).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use super::*;
    use crate::clock::FakeClock;
    use crate::kv::MemoryKv;

    /// Every call reaches the inner store as it was made: the conformance suite passes through
    /// a tap that lets everything run, and the tap saw each kind of call.
    #[test]
    fn a_tap_that_runs_everything_is_the_store_it_wraps() {
        futures::executor::block_on(async {
            let clock = Arc::new(FakeClock::new(1_700_000_000_000));
            let seen = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
            let log = seen.clone();
            let kv = Tapped::new(Arc::new(MemoryKv::new(clock.clone())), move |c| {
                log.lock().unwrap().insert(c.kind());
                Verdict::Run
            });
            crate::kv::conformance::run(&kv, &*clock, "tap/").await;
            let seen = seen.lock().unwrap().clone();
            for kind in [
                "get",
                "put",
                "put_if_absent",
                "delete",
                "list",
                "cas",
                "purge",
            ] {
                assert!(seen.contains(kind), "{kind} not seen: {seen:?}");
            }
        });
    }

    /// A failed call never reaches the store; a `Then` runs after the call landed.
    #[test]
    fn a_failed_call_does_not_run_and_then_runs_after_the_call() {
        futures::executor::block_on(async {
            let clock = Arc::new(FakeClock::new(1_700_000_000_000));
            let inner: Arc<dyn Kv> = Arc::new(MemoryKv::new(clock));
            let probe = inner.clone();
            let after = Arc::new(Mutex::new(None));
            let seen_after = after.clone();
            let kv = Tapped::new(inner.clone(), move |c| match c {
                KvCall::Put { key: "refused", .. } => Verdict::Fail(PortError::unavailable("no")),
                KvCall::Put { key: "watched", .. } => {
                    let (probe, seen) = (probe.clone(), seen_after.clone());
                    Verdict::Then(Box::new(move || {
                        // The in-memory store answers at its first poll.
                        let now = futures::FutureExt::now_or_never(probe.get("watched"));
                        *seen.lock().unwrap() = now.map(Result::unwrap);
                    }))
                }
                _ => Verdict::Run,
            });
            assert!(kv.put("refused", b"x", None).await.is_err());
            assert_eq!(inner.get("refused").await.unwrap(), None);
            kv.put("watched", b"y", None).await.unwrap();
            assert_eq!(*after.lock().unwrap(), Some(Some(b"y".to_vec())));
        });
    }
}
