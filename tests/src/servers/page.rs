//! The page the watch scenario watches: [`Fakes::serve_page`] serves [`Fakes::page`] at
//! `/page` with an ETag, answering 304 when `If-None-Match` names it, and notes each request's
//! `If-None-Match` in [`Fakes::page_asked`]; [`Fakes::page_next`] changes it after one request.

use std::sync::{Arc, Mutex};

use axum::extract::State;

use super::Fakes;
use crate::fixtures;

impl Fakes {
    /// Serves [`Fakes::page`] at `/page` on the first free port of
    /// [`fixtures::PAGE_PORTS`] (the asking config lets `web_fetch` and watches use them);
    /// returns the page's URL.
    pub async fn serve_page(&self) -> String {
        let router = axum::Router::new()
            .route("/page", axum::routing::get(page))
            .with_state((
                self.page.clone(),
                self.page_asked.clone(),
                self.page_next.clone(),
            ));
        for port in fixtures::PAGE_PORTS {
            if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
                tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
                return format!("http://127.0.0.1:{port}/page");
            }
        }
        panic!("no free port in {:?} for the page", fixtures::PAGE_PORTS);
    }
}

/// `/page`: the page's text as HTML with an ETag, 304 when `If-None-Match` names it; then
/// [`Fakes::page_next`], if set, becomes the page.
type PageState = (
    Arc<Mutex<String>>,
    Arc<Mutex<Vec<Option<String>>>>,
    Arc<Mutex<Option<String>>>,
);

async fn page(
    State((page, page_asked, page_next)): State<PageState>,
    headers: axum::http::HeaderMap,
) -> (axum::http::StatusCode, axum::http::HeaderMap, String) {
    use axum::http::{HeaderValue, StatusCode};
    let asked = headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    page_asked.lock().unwrap().push(asked.clone());
    let text = page.lock().unwrap().clone();
    if let Some(next) = page_next.lock().unwrap().take() {
        *page.lock().unwrap() = next;
    }
    let hash = text
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let etag = format!("\"{hash:x}\"");
    let mut out = axum::http::HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        out.insert("etag", v);
    }
    if asked.as_deref() == Some(etag.as_str()) {
        return (StatusCode::NOT_MODIFIED, out, String::new());
    }
    out.insert("content-type", HeaderValue::from_static("text/html"));
    let html = format!("<html><body><h1>Status</h1><p>{text}</p></body></html>");
    (StatusCode::OK, out, html)
}
