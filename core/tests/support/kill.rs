//! A process killed at a port call: the first call whose description (`get <key>`, `put
//! <key>`, `http <url> <body>`) contains a pattern never completes, and the work polling it is
//! dropped there, as a killed process stops (its lease stays behind until it lapses).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use clawless_platform::kv::tap::{KvCall, Tapped, Verdict};
use clawless_platform::{async_trait, Http, HttpRequest, HttpResponse, Platform};

/// Where the process dies: the first port call whose description (`get <key>`, `put <key>`,
/// `http <url> <body>`) contains the pattern hangs, after doing its work when `after`.
#[derive(Default)]
pub struct Kill {
    at: Mutex<Option<(String, bool)>>,
    hit: AtomicBool,
}

impl Kill {
    pub fn arm(&self, pattern: &str, after: bool) {
        *self.at.lock().unwrap() = Some((pattern.to_owned(), after));
        self.hit.store(false, Ordering::SeqCst);
    }

    /// `Some(after)` when `what` is the kill point (disarming it).
    pub fn hits(&self, what: &str) -> Option<bool> {
        let mut at = self.at.lock().unwrap();
        let after = match &*at {
            Some((pattern, after)) if what.contains(pattern.as_str()) => *after,
            _ => return None,
        };
        *at = None;
        Some(after)
    }

    /// Stops the process here: the drain unwinds from this point, nothing after it runs (a
    /// sleep would not do: on the fake clock every timeout beside it fires at once).
    pub fn die(&self) -> ! {
        self.hit.store(true, Ordering::SeqCst);
        std::panic::panic_any(Killed)
    }

    /// Runs `work` until it finishes (`false`) or reaches the kill point (`true`), where it is
    /// dropped.
    pub async fn run<F: Future>(&self, work: F) -> bool {
        quiet_kills();
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            let polled =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.as_mut().poll(cx)));
            match polled {
                Ok(Poll::Ready(_)) => Poll::Ready(false),
                Ok(Poll::Pending) => Poll::Pending,
                Err(e) if e.is::<Killed>() => Poll::Ready(true),
                Err(e) => std::panic::resume_unwind(e),
            }
        })
        .await
    }
}

/// The payload of a kill.
struct Killed;

/// Kills are not reported as panics; anything else is, as before.
fn quiet_kills() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Killed>() {
                report(info);
            }
        }));
    });
}

pub struct KillHttp {
    pub inner: Arc<dyn Http>,
    pub kill: Arc<Kill>,
}

#[async_trait]
impl Http for KillHttp {
    async fn send(&self, req: HttpRequest) -> clawless_platform::Result<HttpResponse> {
        let what = format!("http {} {}", req.url, String::from_utf8_lossy(&req.body));
        match self.kill.hits(&what) {
            None => self.inner.send(req).await,
            Some(false) => self.kill.die(),
            Some(true) => {
                let _ = self.inner.send(req).await;
                self.kill.die()
            }
        }
    }
}

/// Puts `kill` on `platform`'s Http and Kv: a read dies before it is answered; a write or a
/// request dies before or after it is done, as armed.
pub fn install(platform: &mut Platform, kill: &Arc<Kill>) {
    platform.http = Arc::new(KillHttp {
        inner: platform.http.clone(),
        kill: kill.clone(),
    });
    let kill = kill.clone();
    platform.kv = Arc::new(Tapped::new(platform.kv.clone(), move |call| {
        let what = match call {
            KvCall::Get { key } => format!("get {key}"),
            KvCall::Put { key, .. } => format!("put {key}"),
            _ => return Verdict::Run,
        };
        match kill.hits(&what) {
            None => Verdict::Run,
            Some(after) if !after || what.starts_with("get ") => kill.die(),
            Some(_) => {
                let kill = kill.clone();
                Verdict::Then(Box::new(move || kill.die()))
            }
        }
    }));
}
