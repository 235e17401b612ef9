#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use clawless_platform::{FakeHttp, HttpResponse, Method, PortError};
use futures::executor::block_on;
use serde_json::json;

use super::*;
use crate::env::Env;
use crate::ids::Scope;

const BRAVE: &str = include_str!("../../../../../tests/fixtures/search/brave.json");
const TAVILY: &str = include_str!("../../../../../tests/fixtures/search/tavily.json");
const SEARXNG: &str = include_str!("../../../../../tests/fixtures/search/searxng.json");

fn ctx() -> ToolContext {
    ToolContext {
        scope: Scope::new("a/main/user-1"),
        granted: Default::default(),
        origin: None,
        depth: 0,
        budget: None,
        call: String::new(),
        tainted: None,
        allowance: None,
    }
}

fn search(
    env: &[(&str, &str)],
    answer: &'static str,
) -> (Arc<FakeHttp>, Result<String, ToolError>) {
    let http = Arc::new(FakeHttp::new());
    http.route("https://", move |_| {
        Ok(HttpResponse::new(200, answer).with_header("content-type", "application/json"))
    });
    let env = Env::from_pairs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let tool = WebSearch {
        http: http.clone(),
        config: WebConfig::default(),
        backend: SearchBackend::from_env(&env),
    };
    let out = block_on(tool.call(
        &ctx(),
        json!({"query": "sqlite full text search", "count": 2}),
    ));
    (http, out)
}

const EXPECTED: &str =
    "Results for \"sqlite full text search\" from NAME (web content, untrusted):\n\n\
1. SQLite FTS5 Extension\n   https://www.sqlite.org/fts5.html\n   SNIPPET\n\n\
2. SQLite FTS3 and FTS4 Extensions\n   https://www.sqlite.org/fts3.html\n   SNIPPET2";

#[test]
fn brave_results() {
    let (http, out) = search(&[("BRAVE_API_KEY", "bk"), ("TAVILY_API_KEY", "tk")], BRAVE);
    let want = EXPECTED
        .replace("NAME", "Brave Search")
        .replace("SNIPPET2", "FTS3 and FTS4 are SQLite virtual table modules that allow users to perform full-text searches on a set of documents.")
        .replace("SNIPPET", "FTS5 is an SQLite virtual table module that provides full-text search functionality to database applications & more.");
    assert_eq!(out.unwrap(), want);
    let req = &http.requests()[0];
    assert_eq!(
        req.url,
        "https://api.search.brave.com/res/v1/web/search?q=sqlite%20full%20text%20search&count=2"
    );
    assert_eq!(req.header_value("x-subscription-token"), Some("bk"));
    assert!(
        req.outside.is_none(),
        "the search API is the operator's, not a URL from outside"
    );
}

#[test]
fn tavily_results() {
    let (http, out) = search(
        &[("TAVILY_API_KEY", "tk"), ("SEARXNG_URL", "http://s")],
        TAVILY,
    );
    let want = EXPECTED
        .replace("NAME", "Tavily")
        .replace("SNIPPET2", "FTS3 and FTS4 are SQLite virtual table modules that allow users to perform full-text searches on a set of documents.")
        .replace("SNIPPET", "FTS5 is an SQLite virtual table module that provides full-text search functionality to database applications.");
    assert_eq!(out.unwrap(), want);
    let req = &http.requests()[0];
    assert_eq!(
        (req.method, req.url.as_str()),
        (Method::Post, "https://api.tavily.com/search")
    );
    assert_eq!(req.header_value("authorization"), Some("Bearer tk"));
    let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(
        body,
        json!({"query": "sqlite full text search", "max_results": 2})
    );
}

#[test]
fn searxng_results() {
    let http = Arc::new(FakeHttp::new());
    http.route("http://searx.lan:8888/", |_| {
        Ok(HttpResponse::new(200, SEARXNG))
    });
    let env = Env::from_pairs([(
        "SEARXNG_URL".to_string(),
        "http://searx.lan:8888/".to_string(),
    )]);
    let tool = WebSearch {
        http: http.clone(),
        config: WebConfig::default(),
        backend: SearchBackend::from_env(&env),
    };
    let out = block_on(tool.call(&ctx(), json!({"query": "sqlite full text search"}))).unwrap();
    let want = EXPECTED
        .replace("NAME", "SearXNG")
        .replace(
            "SNIPPET2",
            "FTS3 and FTS4 are SQLite virtual table modules for full-text searches.",
        )
        .replace(
            "SNIPPET",
            "FTS5 is an SQLite virtual table module that provides full-text search functionality.",
        );
    assert_eq!(out, want);
    assert_eq!(
        http.requests()[0].url,
        "http://searx.lan:8888/search?q=sqlite%20full%20text%20search&format=json"
    );
}

#[test]
fn failures_are_sentences() {
    let (_, out) = search(&[], BRAVE);
    assert!(out.unwrap_err().0.starts_with("web search is not set up"));
    let (_, out) = search(&[("BRAVE_API_KEY", "k")], r#"{"type": "search"}"#);
    assert_eq!(out.unwrap(), "No results for \"sqlite full text search\".");
    let (_, out) = search(&[("BRAVE_API_KEY", "k")], "<html>oops</html>");
    assert_eq!(
        out.unwrap_err().0,
        "Brave Search answered something that is not JSON"
    );
    for (status, want) in [
        (401, "Brave Search refused the API key (HTTP 401)"),
        (429, "Brave Search says too many searches: try again later"),
        (500, "Brave Search answered HTTP 500"),
    ] {
        let http = Arc::new(FakeHttp::new());
        http.route("https://", move |_| Ok(HttpResponse::new(status, "{}")));
        let env = Env::from_pairs([("BRAVE_API_KEY".to_string(), "k".to_string())]);
        let tool = WebSearch {
            http,
            config: WebConfig::default(),
            backend: SearchBackend::from_env(&env),
        };
        assert_eq!(
            block_on(tool.call(&ctx(), json!({"query": "q"})))
                .unwrap_err()
                .0,
            want
        );
    }
    let http = Arc::new(FakeHttp::new());
    http.route("https://", |_| Err(PortError::timeout("slow")));
    let env = Env::from_pairs([("BRAVE_API_KEY".to_string(), "k".to_string())]);
    let tool = WebSearch {
        http,
        config: WebConfig::default(),
        backend: SearchBackend::from_env(&env),
    };
    assert_eq!(
        block_on(tool.call(&ctx(), json!({"query": "q"})))
            .unwrap_err()
            .0,
        "Brave Search did not answer in time"
    );
    assert!(block_on(tool.call(&ctx(), json!({"query": "  "})))
        .unwrap_err()
        .0
        .starts_with("query is required"));
    assert_eq!(
        format!("{:?}", tool.backend),
        "Some(Brave Search)",
        "no key in Debug"
    );
}

#[test]
fn queries_are_percent_encoded() {
    assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
}
