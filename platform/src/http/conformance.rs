//! Conformance suite for [`Http`] adapters, against a server at `base` that serves
//! [`echo`]'s and [`stream`]'s routes (the fake serves them in-process; real adapters get a
//! local HTTP server that answers the same way).

#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::Duration;

use super::{BodyStream, FakeStream, Http, HttpRequest, HttpResponse, Outside};
use crate::error::{ErrorKind, PortError, Result};

/// The reference behaviour of the test server: `POST /echo` returns the body and the
/// `x-test` request header as `x-echo`; `GET /status/N` returns status N with
/// `retry-after: 7`; `GET /slow` answers after 2 s; `GET /redirect` is a 302 to `/big`;
/// `GET /big` answers [`BIG`] bytes of `x`. `GET /stream` is [`stream`]'s.
pub fn echo(req: &HttpRequest) -> Result<HttpResponse> {
    let path = req.url.splitn(4, '/').nth(3).unwrap_or("");
    if path == "echo" {
        let mut resp = HttpResponse::new(200, req.body.clone());
        if let Some(v) = req.header_value("x-test") {
            resp = resp.with_header("x-echo", v);
        }
        return Ok(resp);
    }
    if let Some(code) = path.strip_prefix("status/") {
        let code = code.parse().unwrap_or(500);
        return Ok(HttpResponse::new(code, "status").with_header("retry-after", "7"));
    }
    if path == "redirect" {
        return Ok(HttpResponse::new(302, "moved").with_header("location", "/big"));
    }
    if path == "big" {
        return Ok(HttpResponse::new(200, vec![b'x'; BIG]));
    }
    if path == "slow" {
        if req.timeout < Duration::from_secs(2) {
            return Err(PortError::timeout("slow"));
        }
        return Ok(HttpResponse::new(200, "slow"));
    }
    Ok(HttpResponse::new(404, "not found"))
}

/// The size of `GET /big`.
pub const BIG: usize = 100_000;

pub async fn run(http: &dyn Http, base: &str) {
    let t = Duration::from_secs(5);
    let body = serde_json::json!({"hello": "wörld"});
    let resp = http
        .send(HttpRequest::post_json(format!("{base}/echo"), &body, t).header("X-Test", "v1"))
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&resp.body).unwrap(),
        body,
        "body round-trips"
    );
    assert_eq!(
        resp.header("X-Echo"),
        Some("v1"),
        "request headers are sent, response headers readable"
    );
    for code in [404u16, 429, 503] {
        let resp = http
            .send(HttpRequest::get(format!("{base}/status/{code}"), t))
            .await
            .unwrap();
        assert_eq!(
            resp.status, code,
            "error statuses are responses, not errors"
        );
        assert_eq!(resp.header("retry-after"), Some("7"));
    }
    let err = http
        .send(HttpRequest::get(
            format!("{base}/slow"),
            Duration::from_millis(300),
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::Timeout,
        "a slow answer past the timeout is Timeout"
    );

    // A URL from outside: no redirect followed, the body read up to the cap.
    let outside = Outside {
        max_body: 1000,
        allow_private: true,
    };
    let resp = http
        .send(HttpRequest::get(format!("{base}/redirect"), t).outside(outside))
        .await
        .unwrap();
    assert_eq!(
        (resp.status, resp.header("location")),
        (302, Some("/big")),
        "a redirect is returned, not followed"
    );
    let resp = http
        .send(HttpRequest::get(format!("{base}/big"), t).outside(outside))
        .await
        .unwrap();
    assert_eq!(
        (resp.status, resp.body.len(), resp.truncated),
        (200, 1000, true),
        "the body stops at max_body"
    );
    let resp = http
        .send(HttpRequest::get(format!("{base}/big"), t))
        .await
        .unwrap();
    assert_eq!((resp.body.len(), resp.truncated), (BIG, false));

    run_streaming(http, base).await;
}

/// The pieces `GET /stream` sends, [`STREAM_GAP`] apart (the first at once).
pub const STREAM_PIECES: [&str; 3] = ["data: one\n\n", "data: two\n\n", "data: three\n\n"];

/// The pause before each piece of `GET /stream` after the first.
pub const STREAM_GAP: Duration = Duration::from_millis(300);

/// The reference behaviour of `GET /stream`: status 200, `content-type: text/event-stream`,
/// then [`STREAM_PIECES`], each [`STREAM_GAP`] after the one before. A client whose `idle` or
/// `timeout` is shorter than that wait gets `Timeout` instead of the pieces it would miss.
pub fn stream(req: &HttpRequest) -> Result<FakeStream> {
    let mut resp = FakeStream::new(200, Vec::<Vec<u8>>::new())
        .with_header("content-type", "text/event-stream");
    for (i, piece) in STREAM_PIECES.iter().enumerate() {
        let at = STREAM_GAP * i as u32;
        let idle_passed = i > 0 && req.idle.is_some_and(|idle| idle < STREAM_GAP);
        if idle_passed || req.timeout < at {
            return Ok(resp.then_fail(PortError::timeout("stream")));
        }
        resp.pieces.push(Ok(piece.as_bytes().to_vec()));
    }
    Ok(resp)
}

/// Reads a body to its end or its first error: the pieces read, and the error.
async fn drain(body: &mut dyn BodyStream) -> (Vec<Vec<u8>>, Option<PortError>) {
    let mut pieces = Vec::new();
    loop {
        match body.next_chunk().await {
            Ok(Some(piece)) => pieces.push(piece),
            Ok(None) => return (pieces, None),
            Err(e) => return (pieces, Some(e)),
        }
    }
}

/// [`Http::send_streaming`]: pieces as they come, bounded in time and size.
async fn run_streaming(http: &dyn Http, base: &str) {
    let t = Duration::from_secs(5);
    let get = |path: &str| HttpRequest::get(format!("{base}{path}"), t);
    let whole = STREAM_PIECES.concat();

    let mut resp = http.send_streaming(get("/stream")).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("Content-Type"), Some("text/event-stream"));
    let (pieces, err) = drain(&mut *resp.body).await;
    assert_eq!(err, None);
    let pieces: Vec<Vec<u8>> = pieces.into_iter().filter(|p| !p.is_empty()).collect();
    assert!(
        pieces.len() > 1,
        "a body sent in pauses arrives in several pieces, got {pieces:?}"
    );
    assert_eq!(
        String::from_utf8(pieces.concat()).unwrap(),
        whole,
        "the pieces, in order, are the whole body"
    );
    assert_eq!(
        resp.body.next_chunk().await.unwrap(),
        None,
        "an ended body stays ended"
    );
    let resp = http.send(get("/stream")).await.unwrap();
    assert_eq!(
        String::from_utf8(resp.body).unwrap(),
        whole,
        "send reads a streamed body whole"
    );

    let mut resp = http.send_streaming(get("/status/429")).await.unwrap();
    assert_eq!((resp.status, resp.header("retry-after")), (429, Some("7")));
    assert_eq!(
        resp.read_to_end(3).await.unwrap(),
        b"sta",
        "an error body, capped"
    );

    // Time: the idle bound between pieces, and the timeout over the whole exchange.
    let mut resp = http
        .send_streaming(get("/stream").idle(STREAM_GAP / 3))
        .await
        .unwrap();
    let (pieces, err) = drain(&mut *resp.body).await;
    assert_eq!(err.map(|e| e.kind), Some(ErrorKind::Timeout), "idle bound");
    assert!(pieces.concat().len() < whole.len(), "{pieces:?}");
    let short = HttpRequest::get(format!("{base}/stream"), STREAM_GAP * 3 / 2);
    let mut resp = http.send_streaming(short).await.unwrap();
    let (pieces, err) = drain(&mut *resp.body).await;
    assert_eq!(
        err.map(|e| e.kind),
        Some(ErrorKind::Timeout),
        "the timeout covers the body"
    );
    assert!(pieces.concat().len() < whole.len(), "{pieces:?}");

    // Size: a body past its cap is refused, never handed on.
    let outside = Outside {
        max_body: 1000,
        allow_private: true,
    };
    let mut resp = http
        .send_streaming(get("/big").outside(outside))
        .await
        .unwrap();
    let (pieces, err) = drain(&mut *resp.body).await;
    assert_eq!(err.map(|e| e.kind), Some(ErrorKind::Invalid), "cap");
    assert!(pieces.concat().len() <= 1000);
    let mut resp = http.send_streaming(get("/big")).await.unwrap();
    let (pieces, err) = drain(&mut *resp.body).await;
    assert_eq!((pieces.concat().len(), err), (BIG, None));
}
