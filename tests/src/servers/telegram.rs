//! The fake Bot API of [`super::fakes`]: every call checked against the spec and recorded,
//! `getUpdates`, `getFile` and the file download served, a refused token, the hang switch and
//! the `SEND_*_ONCE` refusals of sendMessage.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::{Fakes, SEND_429_ONCE, SEND_502_ONCE, TOKEN_REFUSED};
use crate::fixtures;
use crate::spec::spec;

pub(super) async fn bot_api(
    State(f): State<Arc<Fakes>>,
    axum::extract::Path(method): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    raw: axum::body::Bytes,
) -> (axum::http::StatusCode, Json<Value>) {
    let ok = axum::http::StatusCode::OK;
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok());
    let body = crate::spec::call_body(content_type, &raw);
    if let Some(token) = method.strip_prefix("bot").and_then(|p| p.split('/').next()) {
        f.token
            .lock()
            .unwrap()
            .get_or_insert_with(|| token.to_owned());
    }
    let refused_token = method
        .strip_prefix("bot")
        .is_some_and(|p| p.split('/').next().unwrap_or("").contains(TOKEN_REFUSED));
    let method = method.rsplit('/').next().unwrap_or("").to_owned();
    if refused_token {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
        );
    }
    if let Err(v) = spec().check_call(&method, &body) {
        f.violations.lock().unwrap().push(v.clone());
        return (
            ok,
            Json(json!({"ok": false, "error_code": 400, "description": v})),
        );
    }
    if method == "sendMessage" {
        *f.send_attempts.lock().unwrap() += 1;
        if f.send_hang.load(Ordering::SeqCst) {
            f.held.lock().unwrap().push("send");
            // The tests kill the sender while this hangs. The server may poll this handler
            // once more after the hang is lifted but before it notices the closed socket;
            // the message must then count as lost, not delivered to a dead client.
            while f.send_hang.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return (
                axum::http::StatusCode::BAD_GATEWAY,
                Json(json!({"ok": false, "error_code": 502, "description": "Bad Gateway"})),
            );
        }
        if let Some(refusal) = refusal(&f, &body) {
            f.send_refused.lock().unwrap().push(body);
            return refusal;
        }
    }
    if method == "getUpdates" {
        let offset = body["offset"].as_i64().unwrap_or(0);
        let ready = || -> Vec<Value> {
            f.updates
                .lock()
                .unwrap()
                .iter()
                .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                .cloned()
                .collect()
        };
        let mut found = ready();
        if found.is_empty() {
            // A short long poll: answered as soon as an update is pushed, else empty.
            let _ =
                tokio::time::timeout(Duration::from_millis(100), f.update_added.notified()).await;
            found = ready();
        }
        let ready = found;
        f.mark(&method);
        f.calls.lock().unwrap().push((method, body));
        return (ok, Json(json!({"ok": true, "result": ready})));
    }
    // An upload that passed the spec check is taken (recorded), unless held: then it counts
    // as lost with the process the tests kill while it hangs.
    let upload = crate::spec::multipart_file_bytes(content_type, &raw);
    if upload.is_some() && f.upload_hang.load(Ordering::SeqCst) {
        f.held.lock().unwrap().push("upload");
        while f.upload_hang.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        return (
            axum::http::StatusCode::BAD_GATEWAY,
            Json(json!({"ok": false, "error_code": 502, "description": "Bad Gateway"})),
        );
    }
    if let Some((name, bytes)) = upload {
        let chat = body["chat_id"].as_i64().unwrap_or(0);
        f.uploads.lock().unwrap().push(super::Upload {
            method: method.clone(),
            chat,
            name,
            bytes,
        });
    }
    let result = match method.as_str() {
        "getWebhookInfo" => f.webhook_info.lock().unwrap().clone().unwrap_or_else(
            || json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0}),
        ),
        "getMe" => {
            json!({"id": fixtures::BOT_ID, "is_bot": true, "first_name": "Clawless", "username": fixtures::BOT_USERNAME})
        }
        "sendMessage" => {
            json!({"message_id": 1, "date": 1, "chat": {"id": body["chat_id"], "type": "private"}, "text": body["text"]})
        }
        "getFile" => {
            let id = body["file_id"].as_str().unwrap_or("").to_owned();
            let Some(size) = f.files.lock().unwrap().get(&id).map(Vec::len) else {
                f.mark(&method);
                f.calls.lock().unwrap().push((method, body));
                return (
                    axum::http::StatusCode::BAD_REQUEST,
                    Json(
                        json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"}),
                    ),
                );
            };
            json!({"file_id": id, "file_unique_id": format!("u-{id}"), "file_size": size, "file_path": format!("media/{id}")})
        }
        _ => json!(true),
    };
    let sent = method == "sendMessage";
    f.mark(&method);
    f.calls.lock().unwrap().push((method, body));
    if sent {
        f.sent_added.notify_one();
    }
    (ok, Json(json!({"ok": true, "result": result})))
}

/// `GET /file/bot<token>/media/<file id>`: a file's bytes.
pub(super) async fn file(
    State(f): State<Arc<Fakes>>,
    axum::extract::Path(path): axum::extract::Path<String>,
) -> (axum::http::StatusCode, Vec<u8>) {
    let id = path.rsplit('/').next().unwrap_or("");
    match f.files.lock().unwrap().get(id) {
        Some(bytes) => (axum::http::StatusCode::OK, bytes.clone()),
        None => (axum::http::StatusCode::NOT_FOUND, Vec::new()),
    }
}

/// The refusal a marked sendMessage gets the first time (none after).
fn refusal(f: &Fakes, body: &Value) -> Option<(axum::http::StatusCode, Json<Value>)> {
    let text = body["text"].as_str().unwrap_or("");
    if f.first_failure(text, SEND_502_ONCE) {
        return Some((
            axum::http::StatusCode::BAD_GATEWAY,
            Json(json!({"ok": false, "error_code": 502, "description": "Bad Gateway"})),
        ));
    }
    if f.first_failure(text, SEND_429_ONCE) {
        return Some((
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            Json(json!({
                "ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1",
                "parameters": {"retry_after": 1}
            })),
        ));
    }
    None
}
