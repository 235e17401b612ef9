//! Http port: one request, one response, with a timeout; or the response's body read piece
//! by piece ([`Http::send_streaming`], types in [`stream`]). No client library types leak
//! into the core.

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod stream;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
pub use stream::{BodyStream, Capped, FakeStream, HttpStreamResponse, OnePiece, MAX_STREAM_BODY};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Delete,
}

#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: Method,
    pub url: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub timeout: Duration,
    /// Set for a URL that came from outside (a model's tool call): see [`Http::send`].
    pub outside: Option<Outside>,
    /// The longest wait between two pieces of a streamed body ([`Http::send_streaming`]);
    /// `None`: only `timeout` bounds it.
    pub idle: Option<Duration>,
}

/// How a request to a URL from outside is bounded (see [`Http::send`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outside {
    /// The most body bytes read; the rest is never downloaded.
    pub max_body: usize,
    /// Whether host names may resolve to non-public addresses (see [`crate::net::is_public`]):
    /// only when the operator allows the private network.
    pub allow_private: bool,
}

impl std::fmt::Debug for HttpRequest {
    // URLs may hold a bot token and headers an API key: neither is printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

impl HttpRequest {
    pub fn post_json(url: impl Into<String>, body: &serde_json::Value, timeout: Duration) -> Self {
        Self {
            method: Method::Post,
            url: url.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
            timeout,
            outside: None,
            idle: None,
        }
    }
    pub fn get(url: impl Into<String>, timeout: Duration) -> Self {
        Self {
            method: Method::Get,
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout,
            outside: None,
            idle: None,
        }
    }
    /// Marks the request as going to a URL from outside, bounded by `outside`.
    pub fn outside(mut self, outside: Outside) -> Self {
        self.outside = Some(outside);
        self
    }
    /// Bounds the wait between two pieces of a streamed body.
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }
    /// How many bytes a streamed body of this request may carry.
    pub fn stream_cap(&self) -> usize {
        self.outside.map_or(MAX_STREAM_BODY, |o| o.max_body)
    }
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was cut at [`Outside::max_body`].
    pub truncated: bool,
}

impl HttpResponse {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
            truncated: false,
        }
    }
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self::new(status, body.to_string()).with_header("content-type", "application/json")
    }
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[async_trait]
pub trait Http: Send + Sync {
    /// Sends one request.
    ///
    /// # Behavior
    /// Any status code, 4xx and 5xx included, is `Ok(response)`. Not getting a whole response
    /// within `request.timeout` is `Timeout`; a connection failure is `Unavailable`; a malformed
    /// URL is `Invalid`. Response header names are lower case.
    ///
    /// With [`HttpRequest::outside`] set, the URL came from outside: a redirect is returned as
    /// it is (its 3xx status and `location` header), never followed; at most `max_body` bytes of
    /// the body are read (`truncated` says the rest was left); and an adapter that resolves host
    /// names itself connects only to addresses that [`crate::net::is_public`] accepts, unless
    /// `allow_private` — a name resolving to anything else is `Invalid`. An IP-literal host is
    /// the caller's to check.
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse>;

    /// Sends one request and returns the response as soon as its head has arrived, with the
    /// body to read piece by piece (a model's answer streamed as server-sent events).
    ///
    /// # Behavior
    /// Status, headers and errors before the body are as for [`Http::send`], `outside`
    /// included. The body's pieces follow [`BodyStream::next_chunk`]: in order, complete,
    /// bounded by `timeout` (the whole exchange), `idle` (between pieces) and
    /// [`HttpRequest::stream_cap`]. An adapter that can read bodies incrementally yields
    /// pieces as they arrive; this default sends the request with [`Http::send`] and yields the
    /// whole body as one piece, so every adapter works, without the streaming.
    async fn send_streaming(&self, request: HttpRequest) -> Result<HttpStreamResponse> {
        let cap = request.stream_cap();
        let resp = self.send(request).await?;
        Ok(HttpStreamResponse {
            status: resp.status,
            headers: resp.headers,
            body: Box::new(Capped::new(Box::new(OnePiece::new(resp.body)), cap)),
        })
    }
}

type Handler = dyn Fn(&HttpRequest) -> Result<HttpResponse> + Send + Sync;
type StreamHandler = dyn Fn(&HttpRequest) -> Result<FakeStream> + Send + Sync;

/// What a route of [`FakeHttp`] answers with.
#[derive(Clone)]
enum Route {
    Whole(Arc<Handler>),
    Pieces(Arc<StreamHandler>),
}

/// A scriptable [`Http`]: a list of `(url prefix, handler)` routes, every request recorded. A
/// route answers a whole response ([`FakeHttp::route`]) or a body in pieces
/// ([`FakeHttp::route_stream`]); either serves both [`Http::send`] and
/// [`Http::send_streaming`].
#[derive(Default)]
pub struct FakeHttp {
    routes: Mutex<Vec<(String, Route)>>,
    log: Mutex<Vec<HttpRequest>>,
}

impl FakeHttp {
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes requests whose URL starts with `prefix` to `handler` (later routes win).
    pub fn route(
        &self,
        prefix: impl Into<String>,
        handler: impl Fn(&HttpRequest) -> Result<HttpResponse> + Send + Sync + 'static,
    ) {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes.insert(0, (prefix.into(), Route::Whole(Arc::new(handler))));
    }

    /// Routes requests whose URL starts with `prefix` to `handler`, whose answer's body comes
    /// in the pieces it lists (later routes win). [`Http::send`] gets the pieces joined.
    pub fn route_stream(
        &self,
        prefix: impl Into<String>,
        handler: impl Fn(&HttpRequest) -> Result<FakeStream> + Send + Sync + 'static,
    ) {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes.insert(0, (prefix.into(), Route::Pieces(Arc::new(handler))));
    }

    /// Records `request` and finds its route.
    fn route_for(&self, request: &HttpRequest) -> Option<Route> {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request.clone());
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes
            .iter()
            .find(|(p, _)| request.url.starts_with(p.as_str()))
            .map(|(_, h)| h.clone())
    }

    /// Every request sent so far, in order.
    pub fn requests(&self) -> Vec<HttpRequest> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn clear_requests(&self) {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

#[async_trait]
impl Http for FakeHttp {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse> {
        let mut resp = match self.route_for(&request) {
            Some(Route::Whole(h)) => h(&request)?,
            Some(Route::Pieces(h)) => {
                let stream = h(&request)?;
                let mut body = Vec::new();
                for piece in stream.pieces {
                    body.extend(piece?);
                }
                HttpResponse {
                    status: stream.status,
                    headers: stream.headers,
                    body,
                    truncated: false,
                }
            }
            None => HttpResponse::new(404, "no fake route"),
        };
        if let Some(o) = request.outside {
            if resp.body.len() > o.max_body {
                resp.body.truncate(o.max_body);
                resp.truncated = true;
            }
        }
        Ok(resp)
    }

    async fn send_streaming(&self, request: HttpRequest) -> Result<HttpStreamResponse> {
        let stream = match self.route_for(&request) {
            Some(Route::Pieces(h)) => h(&request)?,
            Some(Route::Whole(h)) => {
                let resp = h(&request)?;
                FakeStream {
                    status: resp.status,
                    headers: resp.headers,
                    pieces: vec![Ok(resp.body)],
                }
            }
            None => FakeStream::new(404, ["no fake route"]),
        };
        let pieces = Box::new(stream::Pieces::new(stream.pieces));
        Ok(HttpStreamResponse {
            status: stream.status,
            headers: stream.headers,
            body: Box::new(Capped::new(pieces, request.stream_cap())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_http_conforms() {
        let http = FakeHttp::new();
        http.route("http://fake.test/", conformance::echo);
        http.route_stream("http://fake.test/stream", conformance::stream);
        futures::executor::block_on(conformance::run(&http, "http://fake.test"));
    }

    #[test]
    fn the_default_streaming_is_one_capped_piece() {
        struct Whole;
        #[async_trait]
        impl Http for Whole {
            async fn send(&self, _: HttpRequest) -> Result<HttpResponse> {
                Ok(HttpResponse::new(200, "abcdef"))
            }
        }
        futures::executor::block_on(async {
            let req = || HttpRequest::get("http://x.test/", Duration::from_secs(1));
            let mut resp = Whole.send_streaming(req()).await.unwrap();
            assert_eq!(resp.body.next_chunk().await.unwrap().unwrap(), b"abcdef");
            assert_eq!(resp.body.next_chunk().await.unwrap(), None);
            let outside = Outside {
                max_body: 5,
                allow_private: false,
            };
            let mut resp = Whole.send_streaming(req().outside(outside)).await.unwrap();
            let err = resp.body.next_chunk().await.unwrap_err();
            assert_eq!(err.kind, crate::ErrorKind::Invalid);
            assert_eq!(resp.body.next_chunk().await.unwrap(), None);
        });
    }

    #[test]
    fn fake_streams_pieces_and_cuts() {
        let http = FakeHttp::new();
        http.route_stream("http://m.test/", |_| {
            Ok(FakeStream::new(200, ["ab", "cd"])
                .then_fail(crate::PortError::unavailable("reset"))
                .with_header("X-A", "1"))
        });
        futures::executor::block_on(async {
            let req = HttpRequest::get("http://m.test/x", Duration::from_secs(1));
            let mut resp = http.send_streaming(req.clone()).await.unwrap();
            assert_eq!(resp.header("x-a"), Some("1"));
            assert_eq!(resp.body.next_chunk().await.unwrap().unwrap(), b"ab");
            assert_eq!(resp.body.next_chunk().await.unwrap().unwrap(), b"cd");
            let err = resp.body.next_chunk().await.unwrap_err();
            assert_eq!(err.kind, crate::ErrorKind::Unavailable);
            assert_eq!(resp.body.next_chunk().await.unwrap(), None);
            let err = http.send(req).await.unwrap_err();
            assert_eq!(err.kind, crate::ErrorKind::Unavailable, "send sees the cut");
            assert_eq!(http.requests().len(), 2);
        });
    }

    #[test]
    fn debug_hides_url_and_headers() {
        let req = HttpRequest::get(
            "https://api.telegram.org/bot123:SECRET/getMe",
            Duration::from_secs(1),
        )
        .header("x-api-key", "sk-secret");
        let shown = format!("{req:?}");
        assert!(
            !shown.contains("SECRET") && !shown.contains("sk-secret"),
            "{shown}"
        );
    }
}
