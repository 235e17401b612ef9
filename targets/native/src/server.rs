//! The webhook service: `POST /telegram/<connector>` acknowledges after storing the update,
//! `GET /healthz` answers `ok`. Routing is core's ([`clawless_core::shell::route`]).
//!
//! A webhook is checked before its body is read: first the connector and the secret, then the
//! declared length, and only then is the body read, capped at
//! [`clawless_core::shell::MAX_UPDATE_BYTES`] and under a deadline (the sequence is the
//! core's, [`App::serve_webhook`]; the reading is this file's). Without the secret a
//! client costs a parsed head and nothing more. Every refusal closes the connection.

use std::sync::Arc;
use std::time::Duration;

use clawless_core::shell::{route, BodyRefused, Route, SECRET_HEADER};
use clawless_core::App;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::{HeaderMap, Request, Response, StatusCode};

use crate::runner::Kicker;

/// A response with its whole body in memory.
pub type Reply = Response<Full<Bytes>>;

/// The error a request body may fail with.
type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// What answering a request needs: the app, the drainer to kick after an ack, and how long a
/// webhook body may take to arrive.
#[derive(Clone)]
pub struct Webhook {
    app: Arc<App>,
    kicker: Kicker,
    body_timeout: Duration,
}

impl Webhook {
    pub fn new(app: Arc<App>, kicker: Kicker, body_timeout: Duration) -> Self {
        Self {
            app,
            kicker,
            body_timeout,
        }
    }

    /// Answers one request.
    pub async fn handle<B>(&self, req: Request<B>) -> Reply
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BodyError>,
    {
        let (head, body) = req.into_parts();
        match route(head.method.as_str(), head.uri.path()) {
            Route::Health => respond(200, "ok"),
            Route::Admin(name) => {
                let auth = head
                    .headers
                    .get(hyper::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok());
                // Only the admin's archive is read: anyone else is answered before the body.
                let body = if name == "import" && self.app.admin().admits(auth) {
                    let cap = clawless_core::admin_http::MAX_ADMIN_BODY;
                    match read_capped(body, cap, self.body_timeout * 6).await {
                        Ok(b) => b,
                        Err(BodyRefused::TooLarge) => return respond(413, "payload too large"),
                        Err(BodyRefused::TooSlow) => return respond(408, "request timeout"),
                        Err(BodyRefused::Unreadable) => return respond(400, "bad request"),
                    }
                } else {
                    Vec::new()
                };
                // No origin: behind a proxy this binary cannot know its public URL, so
                // `/admin/setup` is refused here; `clawless webhook set URL` does it.
                let reply = self
                    .app
                    .admin()
                    .serve(clawless_core::admin_http::AdminRequest {
                        method: head.method.as_str(),
                        name,
                        authorization: auth,
                        query: head.uri.query(),
                        origin: None,
                        body: &body,
                        shell: "native",
                    })
                    .await;
                respond_owned(reply.status, reply.content_type, reply.body)
            }
            Route::Panel(path) => self.panel(&head, path, body).await,
            Route::Webhook(connector) => self.webhook(connector, &head.headers, body).await,
            Route::Hook(name) => self.hook(name, &head.headers, body).await,
            Route::MethodNotAllowed => respond(405, "method not allowed"),
            Route::NotFound => respond(404, "not found"),
        }
    }

    /// `/app/...` and `/api/...`: the core's panel, the body read capped and in time.
    async fn panel<B>(&self, head: &hyper::http::request::Parts, path: &str, body: B) -> Reply
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BodyError>,
    {
        let header = |name| head.headers.get(name).and_then(|v| v.to_str().ok());
        let body = match read_capped(body, clawless_core::panel::MAX_BODY, self.body_timeout).await
        {
            Ok(b) => b,
            Err(BodyRefused::TooLarge) => return respond(413, "payload too large"),
            Err(BodyRefused::TooSlow) => return respond(408, "request timeout"),
            Err(BodyRefused::Unreadable) => return respond(400, "bad request"),
        };
        let reply = self
            .app
            .panel()
            .serve(clawless_core::panel::PanelRequest {
                method: head.method.as_str(),
                path,
                query: head.uri.query(),
                authorization: header("authorization"),
                cookie: header("cookie"),
                csrf: header("x-csrf-token"),
                body: &body,
            })
            .await;
        if let Some(lane) = reply.lane {
            self.kicker.kick(lane);
        }
        let mut out = respond_owned(reply.status, reply.content_type, reply.body);
        for (name, value) in reply.headers {
            if let Ok(v) = HeaderValue::from_str(&value) {
                out.headers_mut().append(name, v);
            }
        }
        out
    }

    /// The core's webhook sequence ([`App::serve_webhook`]) with this server's body reader;
    /// then kicks the lane it names.
    async fn webhook<B>(&self, connector: &str, headers: &HeaderMap, body: B) -> Reply
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BodyError>,
    {
        let secret = headers.get(SECRET_HEADER).and_then(|v| v.to_str().ok());
        let timeout = self.body_timeout;
        let reply = self
            .app
            .serve_webhook(connector, secret, |cap| read_capped(body, cap, timeout))
            .await;
        if let Some(lane) = reply.lane {
            self.kicker.kick(lane);
        }
        respond(reply.status, reply.body)
    }
}

impl Webhook {
    /// An incoming webhook: the core's sequence ([`App::serve_hook`]) with this server's
    /// body reader; then kicks the lane it names.
    async fn hook<B>(&self, name: &str, headers: &HeaderMap, body: B) -> Reply
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BodyError>,
    {
        use clawless_core::shell::{AUTHORIZATION, CONTENT_TYPE as TYPE, IDEMPOTENCY_KEY};
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let req = clawless_core::hooks::HookRequest {
            name,
            authorization: header(AUTHORIZATION),
            idempotency_key: header(IDEMPOTENCY_KEY),
            content_type: header(TYPE),
        };
        let timeout = self.body_timeout;
        let reply = self
            .app
            .serve_hook(req, |cap| read_capped(body, cap, timeout))
            .await;
        if let Some(lane) = reply.lane {
            self.kicker.kick(lane);
        }
        respond(reply.status, reply.body)
    }
}

/// Reads a body of at most `cap` bytes within `timeout`. A declared length over the cap
/// (hyper's size hint is the parsed Content-Length) is refused before a byte is read; a body
/// without one is cut off at the cap.
async fn read_capped<B>(body: B, cap: usize, timeout: Duration) -> Result<Vec<u8>, BodyRefused>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BodyError>,
{
    if body.size_hint().lower() > cap as u64 {
        return Err(BodyRefused::TooLarge);
    }
    let read = Limited::new(body, cap).collect();
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes().to_vec()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(BodyRefused::TooLarge),
        Ok(Err(_)) => Err(BodyRefused::Unreadable),
        Err(_) => Err(BodyRefused::TooSlow),
    }
}

/// [`respond`] with an owned body and its content type.
fn respond_owned(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
    let mut reply = respond(status, "");
    *reply.body_mut() = Full::new(body.into());
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    reply
}

/// A plain-text reply. Anything but a success also closes the connection: a client refused
/// once must connect again, and an unread body is never drained.
pub(crate) fn respond(status: u16, body: &'static str) -> Reply {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut reply = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *reply.status_mut() = status;
    let headers = reply.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    if !status.is_success() {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    reply
}

#[cfg(test)]
mod tests;
