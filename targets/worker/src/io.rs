//! Http over the Workers Fetch API and the Clock over `Date.now()` / `setTimeout`. A request
//! to a URL from outside is fetched with `redirect: "manual"` and its body read up to its cap;
//! a Worker cannot reach private networks (its fetches leave from Cloudflare's edge), so names
//! need no resolver check here.

use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Clock, Http, HttpRequest, HttpResponse, Method, PortError, Result};
use futures::future::{select, Either};
use futures::StreamExt;
use worker::send::SendFuture;
use worker::{AbortController, Delay, Fetch, Headers, Request, RequestInit, RequestRedirect};

/// [`Http`] through `fetch()`, with the request's timeout enforced by an abort.
pub struct FetchHttp;

async fn send(request: HttpRequest) -> Result<HttpResponse> {
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
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(req);
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
        let headers = resp
            .headers()
            .entries()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        Ok(HttpResponse {
            status: resp.status_code(),
            headers,
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
            Err(PortError::timeout(format!(
                "no response within {:?}",
                request.timeout
            )))
        }
    }
}

#[async_trait]
impl Http for FetchHttp {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse> {
        SendFuture::new(send(request)).await
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
