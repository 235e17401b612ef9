//! Dispatch of the events this one function receives: a Function URL request (the webhook),
//! a drain request (its own asynchronous invocation) and a scheduled event (the sweep).
//! A `lambda_http` handler cannot take the last two, so events arrive as JSON and are told
//! apart here.

use std::sync::Arc;
use std::time::Duration;

use clawless_core::allowance::Limits;
use clawless_core::shell::{route, BodyRefused, Route, SECRET_HEADER};
use clawless_core::{App, Drained, Lane};
use serde_json::{json, Value};

use crate::invoke::Invoker;

/// A drain waits inside the invocation for a retry due within this long; later ones are left
/// to the scheduled sweep.
pub const MAX_INLINE_WAIT: Duration = Duration::from_secs(30);

pub struct Shell {
    pub app: Arc<App>,
    pub invoker: Arc<dyn Invoker>,
}

#[derive(Debug, PartialEq)]
pub enum Event<'a> {
    Http { method: &'a str, path: &'a str },
    Drain(&'a str),
    Schedule,
    Unknown,
}

pub fn classify(event: &Value) -> Event<'_> {
    if let Some(lane) = event.pointer("/clawless/drain").and_then(Value::as_str) {
        return Event::Drain(lane);
    }
    if let Some(method) = event
        .pointer("/requestContext/http/method")
        .and_then(Value::as_str)
    {
        let path = event.get("rawPath").and_then(Value::as_str).unwrap_or("/");
        return Event::Http { method, path };
    }
    if event.get("source").and_then(Value::as_str) == Some("aws.events")
        || event.get("detail-type").and_then(Value::as_str) == Some("Scheduled Event")
    {
        return Event::Schedule;
    }
    Event::Unknown
}

impl Shell {
    /// Handles one event without a deadline; the value is the invocation's response.
    pub async fn handle(&self, event: Value) -> Value {
        self.handle_until(event, None).await
    }

    /// Handles one event of an invocation that ends at `deadline_ms` (Unix ms, the Runtime
    /// API's `Lambda-Runtime-Deadline-Ms`): work that would not fit before it is handed on
    /// to a fresh invocation (see `clawless_core::allowance`).
    pub async fn handle_until(&self, event: Value, deadline_ms: Option<u64>) -> Value {
        let limits = limits(deadline_ms, now_ms());
        match classify(&event) {
            Event::Http { method, path } => self.http(method, path, &event).await,
            Event::Drain(lane) => {
                self.drain(&Lane::new(lane), limits).await;
                json!({"drained": lane})
            }
            Event::Schedule => {
                let swept = self.app.scheduled_within(limits).await;
                tracing::info!(next_retry_or_reminder = ?swept.next, "scheduled job done");
                for lane in &swept.handed_on {
                    self.hand_on(lane).await;
                }
                json!({"swept": true})
            }
            Event::Unknown => {
                tracing::warn!("unknown event ignored");
                json!({"ignored": true})
            }
        }
    }

    /// `/admin/<name>` (see [`Admin::serve`]): the bearer token from the `authorization` header
    /// (Function URLs lower-case header names), the query from `rawQueryString`, the
    /// deployment's own URL from `requestContext.domainName`.
    async fn admin(&self, method: &str, name: &str, event: &Value) -> Value {
        let authorization = event
            .get("headers")
            .and_then(|h| h.get("authorization"))
            .and_then(Value::as_str);
        let query = event.get("rawQueryString").and_then(Value::as_str);
        let origin = event
            .pointer("/requestContext/domainName")
            .and_then(Value::as_str)
            .map(|host| format!("https://{host}"));
        // Only the admin's archive is read: anyone else is answered before the body.
        let body = if name == "import" && self.app.admin().admits(authorization) {
            match body(event, clawless_core::admin_http::MAX_ADMIN_BODY) {
                Ok(b) => b,
                Err(BodyRefused::TooLarge) => return response(413, "payload too large"),
                Err(_) => return response(400, "bad request"),
            }
        } else {
            Vec::new()
        };
        let reply = self
            .app
            .admin()
            .serve(clawless_core::admin_http::AdminRequest {
                method,
                name,
                authorization,
                query,
                origin: origin.as_deref(),
                body: &body,
                shell: "lambda",
            })
            .await;
        match std::str::from_utf8(&reply.body) {
            Ok(text) => response_typed(reply.status, reply.content_type, text),
            // An archive: a Function URL carries binary as base64.
            Err(_) => {
                use base64::Engine as _;
                json!({
                    "statusCode": reply.status,
                    "headers": {"content-type": reply.content_type},
                    "body": base64::engine::general_purpose::STANDARD.encode(&reply.body),
                    "isBase64Encoded": true,
                    "cookies": [],
                })
            }
        }
    }

    /// `/app/...` and `/api/...`: the core's panel. A Function URL gives cookies apart from the
    /// headers (`cookies`), and takes `Set-Cookie` the same way.
    async fn panel(&self, method: &str, path: &str, event: &Value) -> Value {
        let header = |name: &str| {
            event
                .get("headers")
                .and_then(|h| h.get(name))
                .and_then(Value::as_str)
        };
        let cookie = event.get("cookies").and_then(Value::as_array).map(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; ")
        });
        let body = match body(event, clawless_core::panel::MAX_BODY) {
            Ok(b) => b,
            Err(BodyRefused::TooLarge) => return response(413, "payload too large"),
            Err(_) => return response(400, "bad request"),
        };
        let reply = self
            .app
            .panel()
            .serve(clawless_core::panel::PanelRequest {
                method,
                path,
                query: event.get("rawQueryString").and_then(Value::as_str),
                authorization: header("authorization"),
                cookie: cookie.as_deref(),
                csrf: header("x-csrf-token"),
                body: &body,
            })
            .await;
        if let Some(lane) = &reply.lane {
            if let Err(e) = self.invoker.drain_later(lane.as_str()).await {
                tracing::error!(%lane, error = %e, "self-invoke failed; the sweep will pick it up");
            }
        }
        let mut headers = serde_json::Map::new();
        headers.insert("content-type".into(), json!(reply.content_type));
        let mut cookies = Vec::new();
        for (name, value) in reply.headers {
            if name == "set-cookie" {
                cookies.push(json!(value));
            } else {
                headers.insert(name.into(), json!(value));
            }
        }
        json!({
            "statusCode": reply.status,
            "headers": headers,
            "body": reply.body,
            "isBase64Encoded": false,
            "cookies": cookies,
        })
    }

    /// A Function URL request, routed by the core; a webhook goes through the core's sequence
    /// ([`App::serve_webhook`]: authorized before its body is decoded, one over the cap
    /// refused without decoding it), then its lane is drained by a self-invoke.
    async fn http(&self, method: &str, path: &str, event: &Value) -> Value {
        let connector = match route(method, path) {
            Route::Webhook(connector) => connector,
            Route::Hook(name) => return self.hook(name, event).await,
            Route::Health => return response(200, "ok"),
            Route::Admin(name) => return self.admin(method, name, event).await,
            Route::Panel(path) => return self.panel(method, path, event).await,
            Route::MethodNotAllowed => return response(405, "method not allowed"),
            Route::NotFound => return response(404, "not found"),
        };
        let secret = event
            .get("headers")
            .and_then(|h| h.get(SECRET_HEADER))
            .and_then(Value::as_str);
        let reply = self
            .app
            .serve_webhook(connector, secret, |cap| async move { body(event, cap) })
            .await;
        if let Some(lane) = &reply.lane {
            if let Err(e) = self.invoker.drain_later(lane.as_str()).await {
                // Stored, so nothing is lost: the scheduled sweep will drain it.
                tracing::error!(%lane, error = %e, "self-invoke failed; the sweep will pick it up");
            }
        }
        response(reply.status, reply.body)
    }

    /// An incoming webhook through the core's sequence ([`App::serve_hook`]), then its lane
    /// drained by a self-invoke, as a Telegram update's is.
    async fn hook(&self, name: &str, event: &Value) -> Value {
        use clawless_core::shell::{AUTHORIZATION, CONTENT_TYPE, IDEMPOTENCY_KEY};
        // Function URLs give header names in lower case.
        let header = |h: &str| {
            event
                .get("headers")
                .and_then(|hs| hs.get(h))
                .and_then(Value::as_str)
        };
        let req = clawless_core::hooks::HookRequest {
            name,
            authorization: header(AUTHORIZATION),
            idempotency_key: header(IDEMPOTENCY_KEY),
            content_type: header(CONTENT_TYPE),
        };
        let reply = self
            .app
            .serve_hook(req, |cap| async move { body(event, cap) })
            .await;
        if let Some(lane) = &reply.lane {
            if let Err(e) = self.invoker.drain_later(lane.as_str()).await {
                tracing::error!(%lane, error = %e, "self-invoke failed; the sweep will pick it up");
            }
        }
        response(reply.status, reply.body)
    }

    async fn drain(&self, lane: &Lane, limits: Limits) {
        match self.app.drain_within(lane, MAX_INLINE_WAIT, limits).await {
            Ok(Drained::HandOff) => self.hand_on(lane).await,
            Ok(_) => {}
            Err(e) => tracing::error!(%lane, error = %e, "drain failed; the sweep will retry"),
        }
    }

    /// Asks a fresh invocation to go on with `lane`.
    async fn hand_on(&self, lane: &Lane) {
        if let Err(e) = self.invoker.drain_later(lane.as_str()).await {
            tracing::error!(%lane, error = %e, "hand-off failed; the sweep will pick it up");
        }
    }
}

/// What an invocation ending at `deadline_ms` may spend from `now_ms`: the time to its
/// deadline; Lambda limits neither requests nor DynamoDB calls per invocation.
pub fn limits(deadline_ms: Option<u64>, now_ms: u64) -> Limits {
    Limits {
        wall: deadline_ms.map(|d| Duration::from_millis(d.saturating_sub(now_ms))),
        requests: None,
        storage: None,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A Function URL response. `isBase64Encoded` and `cookies` are optional for AWS, but
/// `cargo lambda watch` (running the function locally) refuses a response without them.
fn response(status: u16, body: &str) -> Value {
    response_typed(status, "text/plain", body)
}

fn response_typed(status: u16, content_type: &str, body: &str) -> Value {
    json!({
        "statusCode": status,
        "headers": {"content-type": content_type},
        "body": body,
        "isBase64Encoded": false,
        "cookies": [],
    })
}

/// The request body, base64-decoded when the Function URL encoded it; a body over `cap`
/// is refused before it is decoded.
fn body(event: &Value, cap: usize) -> Result<Vec<u8>, BodyRefused> {
    let text = event.get("body").and_then(Value::as_str).unwrap_or("");
    let encoded = event.get("isBase64Encoded").and_then(Value::as_bool) == Some(true);
    let size = if encoded {
        base64_decoded_len(text)
    } else {
        text.len()
    };
    if size > cap {
        return Err(BodyRefused::TooLarge);
    }
    if !encoded {
        return Ok(text.as_bytes().to_vec());
    }
    base64_decode(text).ok_or(BodyRefused::Unreadable)
}

/// The length `text` decodes to as base64 (whitespace and padding skipped), without decoding.
fn base64_decoded_len(text: &str) -> usize {
    let symbols = text
        .bytes()
        .filter(|&c| !c.is_ascii_whitespace() && c != b'=')
        .count();
    symbols * 3 / 4
}

/// Standard base64 (padding optional, whitespace skipped), by the `base64` crate; `None` on
/// anything else.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
    use base64::engine::DecodePaddingMode;
    use base64::Engine;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let compact: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    LENIENT.decode(compact).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_base64() {
        assert_eq!(base64_decode("aGVsbG8gd29ybGQ=").unwrap(), b"hello world");
        assert_eq!(base64_decode("e30=").unwrap(), b"{}");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert!(base64_decode("*").is_none());
        assert_eq!(base64_decode("e30").unwrap(), b"{}", "padding left out");
        assert_eq!(base64_decode("aGVs\nbG8=").unwrap(), b"hello");
        for text in ["aGVsbG8gd29ybGQ=", "e30=", "YQ==", "YWI=", "YWJj", ""] {
            assert_eq!(
                base64_decoded_len(text),
                base64_decode(text).unwrap().len(),
                "{text}"
            );
        }
    }

    #[test]
    fn classifies_events() {
        assert_eq!(
            classify(&json!({"clawless": {"drain": "main:1"}})),
            Event::Drain("main:1")
        );
        assert_eq!(
            classify(&json!({"source": "aws.events", "detail-type": "Scheduled Event"})),
            Event::Schedule
        );
        let url =
            json!({"rawPath": "/telegram/main", "requestContext": {"http": {"method": "POST"}}});
        assert_eq!(
            classify(&url),
            Event::Http {
                method: "POST",
                path: "/telegram/main"
            }
        );
        assert_eq!(classify(&json!({"hello": 1})), Event::Unknown);
    }
}
