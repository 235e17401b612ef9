//! `web_fetch` on the real `clawless` binary (it is in the default agent's tools): a URL on
//! this machine is refused in every spelling tried, for its address (the port is allowed), and
//! the page server never sees a request; with `web.allow_private: true` the same page is
//! fetched and its text reaches the model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, serve, text_update, until};
use common::bot::{post_update, start_bot_with, Serve, SECRET};

/// A page server on 127.0.0.1 that counts its requests.
async fn page_server() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let router = axum::Router::new().route(
        "/page",
        axum::routing::get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async {
                (
                    [("content-type", "text/html")],
                    "<html><head><title>Local</title></head><body><main><h1>Hello</h1>\
                     <p>from the <a href=\"/next\">box</a></p></main></body></html>",
                )
            }
        }),
    );
    (serve(router).await, hits)
}

/// The repository's config with the page server's port allowed (so only the address decides)
/// and `web.allow_private` as given.
fn web_config(port: &str, allow_private: bool) -> std::path::PathBuf {
    let dir = common::temp_dir("web-config");
    clawless_testkit::fixtures::asking_config(&dir);
    let main = dir.join("main.yaml");
    let text = std::fs::read_to_string(&main).unwrap();
    // The asking config lets the watch scenario's page through (private, ports 18080-18099):
    // these lines are set here whatever they were.
    let changed: String = text
        .lines()
        .map(|line| match line.trim_start() {
            l if l.starts_with("extra_ports:") => format!("  extra_ports: [{port}]\n"),
            l if l.starts_with("allow_private:") => {
                format!("  allow_private: {allow_private}\n")
            }
            _ => format!("{line}\n"),
        })
        .collect();
    assert_eq!(
        changed.matches(port).count(),
        1,
        "the web block of main.yaml changed shape"
    );
    std::fs::write(&main, changed).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_unless_allowed() {
    let (f, tg, llm_url) = fakes().await;
    let (pages, hits) = page_server().await;
    let port = pages.rsplit(':').next().unwrap().to_owned();
    let config = web_config(&port, false);
    let how = Serve {
        env: &[("CLAWLESS_CONFIG", config.to_str().unwrap())],
        ..Serve::default()
    };
    let bot = start_bot_with(&common::temp_dir("web"), &tg, &llm_url, how).await;
    let spellings = [
        (format!("{pages}/page"), "loopback"),
        (format!("http://localhost:{port}/page"), "localhost"),
        (format!("http://2130706433:{port}/page"), "loopback"),
        (format!("http://0x7f.1:{port}/page"), "loopback"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/page"),
            "127.0.0.1",
        ),
    ];
    for (i, (url, why)) in spellings.iter().enumerate() {
        let id = 10 + i as i64;
        post_update(
            &bot,
            &text_update(id, &format!("fetch: {url}")),
            Some(SECRET),
        )
        .await;
        until("the refusal", || f.sent_to(OWNER_ID).len() > i).await;
        let answer = f.sent_to(OWNER_ID)[i].clone();
        assert!(
            answer.starts_with("Tool said: refused:") && answer.contains(why),
            "{url}: {answer}"
        );
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the page server saw no request"
    );
    drop(bot);

    // The operator allows the private network: the page is fetched, as text.
    let (f, tg, llm_url) = fakes().await;
    let config = web_config(&port, true);
    let how = Serve {
        env: &[("CLAWLESS_CONFIG", config.to_str().unwrap())],
        ..Serve::default()
    };
    let bot = start_bot_with(&common::temp_dir("web-allowed"), &tg, &llm_url, how).await;
    post_update(
        &bot,
        &text_update(20, &format!("fetch: {pages}/page")),
        Some(SECRET),
    )
    .await;
    until("the answer", || !f.sent_to(OWNER_ID).is_empty()).await;
    // What the model was given: the page as text.
    let result = tool_result(&f.llm_requests.lock().unwrap());
    assert!(
        result.contains("Title: Local")
            && result.contains("# Hello")
            && result.contains(&format!("[box]({pages}/next)")),
        "{result}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

/// The last tool result the model was sent.
fn tool_result(requests: &[serde_json::Value]) -> String {
    requests
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .filter_map(|b| b["content"].as_str().map(str::to_owned))
        .next_back()
        .unwrap_or_default()
}
