//! Http port: one request, one response, with a timeout. No client library types leak into
//! the core.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;

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
        }
    }
    /// Marks the request as going to a URL from outside, bounded by `outside`.
    pub fn outside(mut self, outside: Outside) -> Self {
        self.outside = Some(outside);
        self
    }
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
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
}

type Handler = dyn Fn(&HttpRequest) -> Result<HttpResponse> + Send + Sync;

/// A scriptable [`Http`]: a list of `(url prefix, handler)` routes, every request recorded.
#[derive(Default)]
pub struct FakeHttp {
    routes: Mutex<Vec<(String, Arc<Handler>)>>,
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
        routes.insert(0, (prefix.into(), Arc::new(handler)));
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
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request.clone());
        let handler = {
            let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
            routes
                .iter()
                .find(|(p, _)| request.url.starts_with(p.as_str()))
                .map(|(_, h)| h.clone())
        };
        let mut resp = match handler {
            Some(h) => h(&request)?,
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
}

/// Conformance suite for [`Http`] adapters, against a server at `base` that serves
/// [`conformance::echo`]'s routes (the fake serves them in-process; real adapters get a local
/// HTTP server that answers the same way).
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod conformance {
    use super::*;
    use crate::error::{ErrorKind, PortError};

    /// The reference behaviour of the test server: `POST /echo` returns the body and the
    /// `x-test` request header as `x-echo`; `GET /status/N` returns status N with
    /// `retry-after: 7`; `GET /slow` answers after 2 s; `GET /redirect` is a 302 to `/big`;
    /// `GET /big` answers [`BIG`] bytes of `x`.
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_http_conforms() {
        let http = FakeHttp::new();
        http.route("http://fake.test/", conformance::echo);
        futures::executor::block_on(conformance::run(&http, "http://fake.test"));
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
