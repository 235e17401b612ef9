//! The webhook server: `POST /telegram/<connector>` acknowledges after storing the update,
//! `GET /healthz` answers `ok`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use clawless_core::App;

use crate::runner::Kicker;

pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

#[derive(Clone)]
struct AppState {
    app: Arc<App>,
    kicker: Kicker,
}

pub fn router(app: Arc<App>, kicker: Kicker) -> Router {
    Router::new()
        .route("/telegram/{connector}", post(webhook))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(AppState { app, kicker })
}

async fn webhook(
    State(s): State<AppState>,
    Path(connector): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    let secret = headers.get(SECRET_HEADER).and_then(|v| v.to_str().ok());
    let reply = s.app.handle_webhook(&connector, secret, &body).await;
    if let Some(lane) = reply.lane {
        s.kicker.kick(lane);
    }
    (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        reply.body,
    )
}
