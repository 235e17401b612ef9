//! The webhook service without a socket: what it reads, and when it refuses.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use clawless_core::shell::MAX_UPDATE_BYTES;
use clawless_core::{Config, Env};
use clawless_platform::Platform;
use clawless_testkit::servers::text_update;
use hyper::body::{Frame, SizeHint};

use super::*;

const SECRET: &str = "unit-secret";

fn webhook(body_timeout: Duration) -> Webhook {
    let (platform, _clock, _http) = Platform::in_memory();
    let env = Env::from_pairs([
        ("TELEGRAM_BOT_TOKEN", "1:UNIT"),
        ("TELEGRAM_WEBHOOK_SECRET", SECRET),
        ("ANTHROPIC_API_KEY", "sk-unit"),
    ]);
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let app = Arc::new(App::new(platform, config, &env, "unit").unwrap());
    let (kicker, _runner) = crate::runner::new(app.clone());
    Webhook::new(app, kicker, body_timeout)
}

/// A body that says whether it was read: its chunks, then the end or a stall.
struct Probe {
    chunks: VecDeque<Bytes>,
    declared: Option<u64>,
    stalls: bool,
    read: Arc<AtomicBool>,
}

impl Probe {
    fn new(chunks: Vec<Bytes>, declared: Option<u64>, stalls: bool) -> (Self, Arc<AtomicBool>) {
        let read = Arc::new(AtomicBool::new(false));
        let probe = Probe {
            chunks: chunks.into(),
            declared,
            stalls,
            read: read.clone(),
        };
        (probe, read)
    }
}

impl Body for Probe {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.read.store(true, Ordering::SeqCst);
        match self.chunks.pop_front() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None if self.stalls => Poll::Pending,
            None => Poll::Ready(None),
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.declared.map(SizeHint::with_exact).unwrap_or_default()
    }
}

fn post(path: &str, secret: Option<&str>, body: Probe) -> Request<Probe> {
    let mut req = Request::post(path);
    if let Some(s) = secret {
        req = req.header(SECRET_HEADER, s);
    }
    req.body(body).unwrap()
}

fn closes(reply: &Reply) -> bool {
    reply.headers().get(CONNECTION) == Some(&HeaderValue::from_static("close"))
}

#[tokio::test]
async fn refusals_come_before_the_body_is_read_and_close() {
    let w = webhook(Duration::from_secs(5));
    let cases = [
        ("/telegram/main", Some("wrong"), None, 401),
        ("/telegram/main", None, None, 401),
        ("/telegram/other", Some(SECRET), None, 404),
        (
            "/telegram/main",
            Some(SECRET),
            Some(MAX_UPDATE_BYTES as u64 + 1),
            413,
        ),
    ];
    for (path, secret, declared, status) in cases {
        let (body, read) = Probe::new(vec![], declared, true);
        let reply = w.handle(post(path, secret, body)).await;
        assert_eq!(reply.status(), status, "{path} {secret:?}");
        assert!(closes(&reply), "{path} {secret:?}");
        assert!(!read.load(Ordering::SeqCst), "{path} {secret:?}: body read");
    }
}

#[tokio::test]
async fn an_undeclared_body_is_cut_off_at_the_cap() {
    let w = webhook(Duration::from_secs(5));
    let chunk = Bytes::from(vec![b' '; 64 * 1024]);
    let chunks = vec![chunk; MAX_UPDATE_BYTES / (64 * 1024) + 1];
    let (body, _) = Probe::new(chunks, None, true);
    let reply = w.handle(post("/telegram/main", Some(SECRET), body)).await;
    assert_eq!(reply.status(), 413);
    assert!(closes(&reply));
}

#[tokio::test]
async fn a_stalled_body_times_out() {
    let w = webhook(Duration::from_millis(50));
    let (body, read) = Probe::new(vec![Bytes::from_static(b"{")], Some(100), true);
    let reply = w.handle(post("/telegram/main", Some(SECRET), body)).await;
    assert_eq!(reply.status(), 408);
    assert!(closes(&reply) && read.load(Ordering::SeqCst));
}

#[tokio::test]
async fn an_update_is_acknowledged_and_the_connection_kept() {
    let w = webhook(Duration::from_secs(5));
    let update = Bytes::from(text_update(1, "hi").to_string());
    let (body, _) = Probe::new(vec![update], None, false);
    let reply = w.handle(post("/telegram/main", Some(SECRET), body)).await;
    assert_eq!(reply.status(), 200);
    assert!(!closes(&reply));
}

#[tokio::test]
async fn routes_come_from_the_core() {
    let w = webhook(Duration::from_secs(5));
    let get = |path: &str| {
        let (body, _) = Probe::new(vec![], None, false);
        Request::get(path).body(body).unwrap()
    };
    let health = w.handle(get("/healthz")).await;
    assert_eq!(health.status(), 200);
    assert!(!closes(&health));
    let wrong_method = w.handle(get("/telegram/main")).await;
    assert_eq!(wrong_method.status(), 405);
    assert!(closes(&wrong_method));
    let (body, _) = Probe::new(vec![], None, false);
    let unknown = w.handle(post("/telegram/a/b", Some(SECRET), body)).await;
    assert_eq!(unknown.status(), 404);
    assert!(closes(&unknown));
}
