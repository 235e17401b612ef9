//! `web_search` (Guarded): titles, URLs and snippets from the first configured search API:
//! Brave Search (`BRAVE_API_KEY`), Tavily (`TAVILY_API_KEY`) or a SearXNG instance
//! (`SEARXNG_URL`, with its JSON format enabled). The results are web content: marked as
//! untrusted for the model.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_platform::{ErrorKind, Http, HttpRequest};
use serde_json::{json, Value};

use super::WebConfig;
use crate::llm::ToolSpec;
use crate::secret::Secret;
use crate::tools::{Level, Tool, ToolContext, ToolError};

/// The most results asked for.
pub const MAX_RESULTS: usize = 10;
/// The longest query sent.
const MAX_QUERY: usize = 400;

/// Where searches go; chosen from the environment by the shell's settings.
#[derive(Clone)]
pub enum SearchBackend {
    Brave { key: Secret, base: String },
    Tavily { key: Secret, base: String },
    Searxng { base: String },
}

impl std::fmt::Debug for SearchBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl SearchBackend {
    /// The first configured of `BRAVE_API_KEY`, `TAVILY_API_KEY`, `SEARXNG_URL` (the base URLs
    /// can be moved with `BRAVE_BASE_URL` and `TAVILY_BASE_URL`).
    pub fn from_env(env: &crate::env::Env) -> Option<SearchBackend> {
        let base = |var: &str, default: &str| {
            env.get(var)
                .unwrap_or(default)
                .trim_end_matches('/')
                .to_owned()
        };
        if let Some(key) = env.get("BRAVE_API_KEY") {
            return Some(SearchBackend::Brave {
                key: Secret::new(key),
                base: base("BRAVE_BASE_URL", "https://api.search.brave.com"),
            });
        }
        if let Some(key) = env.get("TAVILY_API_KEY") {
            return Some(SearchBackend::Tavily {
                key: Secret::new(key),
                base: base("TAVILY_BASE_URL", "https://api.tavily.com"),
            });
        }
        env.get("SEARXNG_URL").map(|u| SearchBackend::Searxng {
            base: u.trim_end_matches('/').to_owned(),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            SearchBackend::Brave { .. } => "Brave Search",
            SearchBackend::Tavily { .. } => "Tavily",
            SearchBackend::Searxng { .. } => "SearXNG",
        }
    }

    fn request(&self, query: &str, count: usize, config: &WebConfig) -> HttpRequest {
        let t = config.timeout();
        let q = encode(query);
        match self {
            SearchBackend::Brave { key, base } => {
                HttpRequest::get(format!("{base}/res/v1/web/search?q={q}&count={count}"), t)
                    .header("accept", "application/json")
                    .header("x-subscription-token", key.expose())
            }
            SearchBackend::Tavily { key, base } => HttpRequest::post_json(
                format!("{base}/search"),
                &json!({ "query": query, "max_results": count }),
                t,
            )
            .header("authorization", format!("Bearer {}", key.expose())),
            SearchBackend::Searxng { base } => {
                HttpRequest::get(format!("{base}/search?q={q}&format=json"), t)
                    .header("accept", "application/json")
            }
        }
    }

    /// (title, url, snippet) of each result in `body`.
    fn results(&self, body: &Value) -> Option<Vec<(String, String, String)>> {
        let (list, snippet) = match self {
            SearchBackend::Brave { .. } => (body.pointer("/web/results"), "description"),
            SearchBackend::Tavily { .. } => (body.get("results"), "content"),
            SearchBackend::Searxng { .. } => (body.get("results"), "content"),
        };
        let list = match list {
            Some(l) => l.as_array()?,
            // Brave leaves `web` out when nothing was found.
            None if body.is_object() => return Some(Vec::new()),
            None => return None,
        };
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        Some(
            list.iter()
                .filter(|r| r.get("url").and_then(Value::as_str).is_some())
                .map(|r| (text(r, "title"), text(r, "url"), text(r, snippet)))
                .collect(),
        )
    }
}

/// `s` percent-encoded for a query string (RFC 3986 unreserved characters kept).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Search results as text: Brave and SearXNG wrap matches in `<strong>`, and snippets carry
/// entities; both are taken out.
fn plain(s: &str) -> String {
    let text = super::html::to_text(s, "https://invalid.test/").text;
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub struct WebSearch {
    pub http: Arc<dyn Http>,
    pub config: WebConfig,
    pub backend: Option<SearchBackend>,
}

#[async_trait]
impl Tool for WebSearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_search".into(),
            description: "Search the web. Returns titles, URLs and snippets of the top results \
                (untrusted web content); use web_fetch to read a page."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for."},
                    "count": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS,
                              "description": "How many results (default from config)."}
                },
                "required": ["query"]
            }),
        }
    }

    fn brings_untrusted(&self, input: &Value) -> Option<String> {
        Some(format!(
            "web search results for {:?}",
            crate::tools::named(input, "query")
        ))
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// A search reads.
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let Some(backend) = &self.backend else {
            return Err(ToolError(
                "web search is not set up: the operator sets BRAVE_API_KEY, TAVILY_API_KEY or SEARXNG_URL"
                    .into(),
            ));
        };
        let query = input
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .ok_or_else(|| ToolError("query is required (a non-empty string)".into()))?;
        let query: String = query.chars().take(MAX_QUERY).collect();
        let count = input
            .get("count")
            .and_then(Value::as_u64)
            .map_or(self.config.search_results, |c| c as usize)
            .clamp(1, MAX_RESULTS);
        let name = backend.name();
        let resp = self
            .http
            .send(backend.request(&query, count, &self.config))
            .await
            .map_err(|e| match e.kind {
                ErrorKind::Timeout => ToolError(format!("{name} did not answer in time")),
                _ => ToolError(format!("{name} could not be reached")),
            })?;
        match resp.status {
            200..=299 => {}
            401 | 403 => {
                return Err(ToolError(format!(
                    "{name} refused the API key (HTTP {})",
                    resp.status
                )))
            }
            429 => {
                return Err(ToolError(format!(
                    "{name} says too many searches: try again later"
                )))
            }
            s => return Err(ToolError(format!("{name} answered HTTP {s}"))),
        }
        let body: Value = serde_json::from_slice(&resp.body)
            .map_err(|_| ToolError(format!("{name} answered something that is not JSON")))?;
        let results = backend
            .results(&body)
            .ok_or_else(|| ToolError(format!("{name} answered JSON without results")))?;
        if results.is_empty() {
            return Ok(format!("No results for {query:?}."));
        }
        let mut out = format!("Results for {query:?} from {name} (web content, untrusted):\n");
        for (i, (title, url, snippet)) in results.iter().take(count).enumerate() {
            out.push_str(&format!(
                "\n{}. {}\n   {}\n",
                i + 1,
                super::clip(&plain(title), 200),
                super::clip(url, 500)
            ));
            let snippet = plain(snippet);
            if !snippet.is_empty() {
                out.push_str(&format!("   {}\n", super::clip(&snippet, 500)));
            }
        }
        Ok(out.trim_end().to_owned())
    }
}

#[cfg(test)]
mod tests;
