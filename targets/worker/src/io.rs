//! Http over the Workers Fetch API and the Clock over `Date.now()` / `setTimeout`. A request
//! to a URL from outside is fetched with `redirect: "manual"` and its body read up to its cap;
//! a Worker cannot reach private networks (its fetches leave from Cloudflare's edge), so names
//! need no resolver check here. A streamed body is the response's `ReadableStream` read piece
//! by piece, each read raced against the rest of the timeout (and the idle bound); the JS
//! values live in `SendWrapper`s and every read in a `SendFuture`, like the rest of this file.

use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::http::Capped;
use clawless_platform::{
    BodyStream, Clock, Http, HttpRequest, HttpResponse, HttpStreamResponse, Method, PortError,
    Result,
};
use futures::future::{select, Either};
use futures::StreamExt;
use worker::send::{SendFuture, SendWrapper};
use worker::{
    AbortController, ByteStream, Delay, Fetch, Headers, Request, RequestInit, RequestRedirect,
};

/// [`Http`] through `fetch()`, with the request's timeout enforced by an abort.
pub struct FetchHttp;

/// The `fetch()` call for `request`.
fn fetch(request: &HttpRequest) -> Result<Fetch> {
    let headers = Headers::new();
    for (name, value) in &request.headers {
        headers
            .set(name, value)
            .map_err(|e| PortError::invalid(format!("header {name}: {e}")))?;
    }
    let mut init = RequestInit::new();
    init.with_method(match request.method {
        Method::Get => worker::Method::Get,
        Method::Post => worker::Method::Post,
        Method::Delete => worker::Method::Delete,
    })
    .with_headers(headers);
    if request.outside.is_some() {
        init.with_redirect(RequestRedirect::Manual);
    }
    if !request.body.is_empty() {
        init.with_body(Some(js_sys::Uint8Array::from(&request.body[..]).into()));
    }
    // The URL is not in the message: it may hold a bot token.
    let req = Request::new_with_init(&request.url, &init)
        .map_err(|_| PortError::invalid("malformed request URL"))?;
    Ok(Fetch::Request(req))
}

/// Response header names in lower case.
fn headers(resp: &worker::Response) -> Vec<(String, String)> {
    resp.headers()
        .entries()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

fn timed_out(timeout: Duration) -> PortError {
    PortError::timeout(format!("no response within {timeout:?}"))
}

async fn send(request: HttpRequest) -> Result<HttpResponse> {
    let fetch = fetch(&request)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = async {
        let mut resp = fetch
            .send_with_signal(&signal)
            .await
            .map_err(|e| PortError::unavailable(format!("fetch failed: {e}")))?;
        let failed =
            |e: worker::Error| PortError::unavailable(format!("reading the body failed: {e}"));
        let (body, truncated) = match request.outside {
            None => (resp.bytes().await.map_err(failed)?, false),
            Some(o) => match resp.stream() {
                // No body (a redirect, a 204): nothing to read.
                Err(_) => (Vec::new(), false),
                Ok(mut stream) => {
                    let mut body = Vec::new();
                    let mut truncated = false;
                    while let Some(chunk) = stream.next().await {
                        let chunk = chunk.map_err(failed)?;
                        let room = o.max_body - body.len();
                        if chunk.len() > room {
                            body.extend_from_slice(&chunk[..room]);
                            truncated = true;
                            break;
                        }
                        body.extend_from_slice(&chunk);
                    }
                    (body, truncated)
                }
            },
        };
        Ok(HttpResponse {
            status: resp.status_code(),
            headers: headers(&resp),
            body,
            truncated,
        })
    };
    let timer = Delay::from(request.timeout);
    futures::pin_mut!(call);
    match select(call, timer).await {
        Either::Left((result, _)) => result,
        Either::Right(((), _)) => {
            controller.abort();
            Err(timed_out(request.timeout))
        }
    }
}

/// The head of the response, then its body as [`Pieces`].
async fn send_streaming(request: HttpRequest) -> Result<HttpStreamResponse> {
    let deadline = worker::Date::now().as_millis() + millis(request.timeout);
    let fetch = fetch(&request)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = fetch.send_with_signal(&signal);
    futures::pin_mut!(call);
    let mut resp = match select(call, Delay::from(request.timeout)).await {
        Either::Left((resp, _)) => {
            resp.map_err(|e| PortError::unavailable(format!("fetch failed: {e}")))?
        }
        Either::Right(((), _)) => {
            controller.abort();
            return Err(timed_out(request.timeout));
        }
    };
    let pieces = Pieces {
        // No body (a 204, a redirect): nothing to read.
        stream: resp.stream().ok().map(SendWrapper::new),
        controller: Some(SendWrapper::new(controller)),
        deadline,
        timeout: request.timeout,
        idle: request.idle,
    };
    Ok(HttpStreamResponse {
        status: resp.status_code(),
        headers: headers(&resp),
        body: Box::new(Capped::new(Box::new(pieces), request.stream_cap())),
    })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A fetched body read piece by piece until `deadline` (ms since the epoch), each wait also
/// bounded by `idle`; past either the fetch is aborted.
struct Pieces {
    stream: Option<SendWrapper<ByteStream>>,
    controller: Option<SendWrapper<AbortController>>,
    deadline: u64,
    timeout: Duration,
    idle: Option<Duration>,
}

impl Pieces {
    async fn next(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(None);
        };
        let left = Duration::from_millis(
            self.deadline
                .saturating_sub(worker::Date::now().as_millis()),
        );
        let wait = self.idle.map_or(left, |idle| idle.min(left));
        let piece = stream.next();
        match select(piece, Delay::from(wait)).await {
            Either::Left((Some(Ok(piece)), _)) => Ok(Some(piece)),
            Either::Left((Some(Err(e)), _)) => {
                self.stream = None;
                Err(PortError::unavailable(format!(
                    "reading the body failed: {e}"
                )))
            }
            Either::Left((None, _)) => {
                self.stream = None;
                Ok(None)
            }
            Either::Right(((), _)) => {
                self.stream = None;
                if let Some(controller) = self.controller.take() {
                    controller.0.abort();
                }
                Err(if wait < left {
                    PortError::timeout(format!("no data for {wait:?}"))
                } else {
                    timed_out(self.timeout)
                })
            }
        }
    }
}

#[async_trait]
impl BodyStream for Pieces {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        SendFuture::new(self.next()).await
    }
}

#[async_trait]
impl Http for FetchHttp {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse> {
        SendFuture::new(send(request)).await
    }

    async fn send_streaming(&self, request: HttpRequest) -> Result<HttpStreamResponse> {
        SendFuture::new(send_streaming(request)).await
    }
}

/// Wall-clock time from `Date.now()` (which in a Worker advances only across I/O) and sleeping
/// with `setTimeout`.
pub struct WorkerClock;

#[async_trait]
impl Clock for WorkerClock {
    fn now_ms(&self) -> u64 {
        worker::Date::now().as_millis()
    }

    async fn sleep(&self, duration: Duration) {
        SendFuture::new(Delay::from(duration)).await
    }
}
