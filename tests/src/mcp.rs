//! A small MCP server (Streamable HTTP), as a function from a request to a response, so the
//! core tests serve it through `FakeHttp` and the shells' tests over real HTTP
//! (`servers::fakes`). It does what the client must cope with:
//! - sessions: `initialize` names one (`Mcp-Session-Id`); a request without it is a 400, with
//!   an unknown one a 404 (after [`McpFake::forget_sessions`]), as the spec says, or a 400 as
//!   some servers answer (`@modelcontextprotocol/server-everything`), with
//!   [`McpFake::unknown_is_400`];
//! - version negotiation: it answers the client's version when it speaks it, else its own;
//! - `tools/list` two tools a page, with `nextCursor`;
//! - `tools/call` answered as server-sent events (a log notification first), everything else
//!   as JSON;
//! - [`McpFake::down`]: every request gets a 503.
//!
//! Tools: `add` (`a` + `b`, text and structured content), `echo` (`text`), `fail` (an
//! `isError` result), `private` (for allow lists), `notes.search` (a valid MCP name the model
//! APIs refuse, read-only by its annotations), `broken` (a schema the model APIs refuse) and
//! `wait` (read-only; the server it is served by takes `seconds` first, see [`waits`]) and
//! `note` (an effect that must not happen twice: not read-only, counted in `calls`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};

/// The versions it speaks, newest first.
pub const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The server's state.
#[derive(Default)]
pub struct McpFake {
    sessions: Mutex<Vec<String>>,
    next: AtomicUsize,
    /// While set, every request gets a 503.
    pub down: AtomicBool,
    /// An unknown session is answered 400, not 404.
    pub unknown_is_400: AtomicBool,
    /// Every JSON-RPC method asked, in order.
    pub methods: Mutex<Vec<String>>,
    /// `tools/call` arguments, by tool.
    pub calls: Mutex<Vec<(String, Value)>>,
}

/// An answer: status, headers, body.
pub type Answer = (u16, Vec<(String, String)>, Vec<u8>);

impl McpFake {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every session: the next request in one gets a 404.
    pub fn forget_sessions(&self) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn methods(&self) -> Vec<String> {
        self.methods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Answers one POST: `header` looks a request header up by lower-case name.
    pub fn handle(&self, header: impl Fn(&str) -> Option<String>, body: &[u8]) -> Answer {
        if self.down.load(Ordering::SeqCst) {
            return plain(503, "down");
        }
        let accepts = header("accept").unwrap_or_default();
        if !(accepts.contains("application/json") && accepts.contains("text/event-stream")) {
            return plain(406, "accept both application/json and text/event-stream");
        }
        let Ok(msg) = serde_json::from_slice::<Value>(body) else {
            return plain(400, "not JSON");
        };
        let method = msg["method"].as_str().unwrap_or("").to_owned();
        self.methods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(method.clone());
        let id = msg["id"].clone();
        if method == "initialize" {
            let asked = msg["params"]["protocolVersion"].as_str().unwrap_or("");
            let version = if VERSIONS.contains(&asked) {
                asked
            } else {
                VERSIONS[0]
            };
            let session = format!("s-{}", self.next.fetch_add(1, Ordering::SeqCst));
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(session.clone());
            let result = json!({"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "clawless-test-mcp", "version": "1"}});
            let mut answer = json_answer(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
            answer.1.push(("mcp-session-id".into(), session));
            return answer;
        }
        match header("mcp-session-id") {
            None => return plain(400, "no Mcp-Session-Id"),
            Some(s)
                if !self
                    .sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&s) =>
            {
                return match self.unknown_is_400.load(Ordering::SeqCst) {
                    true => plain(400, "Bad Request: No valid session ID provided"),
                    false => plain(404, "unknown session"),
                };
            }
            Some(_) => {}
        }
        if !header("mcp-protocol-version").is_some_and(|v| VERSIONS.contains(&v.as_str())) {
            return plain(400, "no or unknown MCP-Protocol-Version");
        }
        if id.is_null() {
            // A notification (`notifications/initialized`).
            return (202, Vec::new(), Vec::new());
        }
        let params = &msg["params"];
        let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        match method.as_str() {
            "tools/list" => {
                let all = tools();
                let start: usize = params["cursor"]
                    .as_str()
                    .and_then(|c| c.strip_prefix("page-"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let page: Vec<Value> = all.iter().skip(start).take(2).cloned().collect();
                let mut result = json!({"tools": page});
                if start + 2 < all.len() {
                    result["nextCursor"] = json!(format!("page-{}", start + 2));
                }
                json_answer(&reply(result))
            }
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or("").to_owned();
                let args = params["arguments"].clone();
                self.calls
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((name.clone(), args.clone()));
                let result = match name.as_str() {
                    "add" => {
                        let sum =
                            args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
                        json!({"content": [{"type": "text", "text": format!("the sum is {sum}")}],
                            "structuredContent": {"sum": sum}})
                    }
                    "echo" => {
                        json!({"content": [{"type": "text", "text": args["text"].as_str().unwrap_or("")}]})
                    }
                    "notes.search" => {
                        json!({"content": [{"type": "text", "text": format!("2 notes match {}", args["query"].as_str().unwrap_or(""))}]})
                    }
                    "fail" => {
                        json!({"content": [{"type": "text", "text": "it failed on purpose"}], "isError": true})
                    }
                    "note" => {
                        json!({"content": [{"type": "text", "text": format!("noted: {}", args["text"].as_str().unwrap_or(""))}]})
                    }
                    // A page of the injection corpus (`crate::injection`), as a news tool might
                    // answer.
                    "page" => {
                        let n = args["n"].as_u64().unwrap_or(0) as usize;
                        let text =
                            crate::injection::article(n).unwrap_or_else(|| format!("no page {n}"));
                        json!({"content": [{"type": "text", "text": text}]})
                    }
                    // The wait itself is the server's to take (`servers::fakes` sleeps).
                    "wait" => {
                        json!({"content": [{"type": "text", "text": format!("waited {} s", wait_secs(&args))}]})
                    }
                    _ => {
                        let error =
                            json!({"code": -32602, "message": format!("unknown tool {name}")});
                        return sse_answer(&json!({"jsonrpc": "2.0", "id": id, "error": error}));
                    }
                };
                sse_answer(&reply(result))
            }
            _ => json_answer(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}})),
        }
    }
}

/// The tools it lists, in order.
pub fn tools() -> Vec<Value> {
    let num = json!({"type": "number"});
    vec![
        json!({"name": "add", "description": "Adds two numbers.", "inputSchema": {"type": "object",
            "properties": {"a": num, "b": num}, "required": ["a", "b"]}}),
        json!({"name": "echo", "description": "Says the text back.", "inputSchema": {"type": "object",
            "properties": {"text": {"type": "string"}}, "required": ["text"]}}),
        json!({"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object"}}),
        json!({"name": "notes.search", "description": "Searches the notes.", "inputSchema": {"type": "object",
            "properties": {"query": {"type": "string"}}}, "annotations": {"readOnlyHint": true}}),
        json!({"name": "private", "description": "Left out by allow lists.", "inputSchema": {"type": "object"}}),
        json!({"name": "broken", "description": "A schema the model APIs refuse.", "inputSchema": {"type": "object",
            "properties": {"a": {"type": "nope"}}, "required": "a"}}),
        json!({"name": "wait", "description": "Waits some seconds (a slow tool).", "inputSchema": {"type": "object",
            "properties": {"seconds": num}}, "annotations": {"readOnlyHint": true}}),
        json!({"name": "note", "description": "Notes a text (an effect that must not happen twice).",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}),
        json!({"name": "page", "description": "Reads today's news page n.", "inputSchema": {"type": "object",
            "properties": {"n": num}}, "annotations": {"readOnlyHint": true}}),
    ]
}

/// How long a `wait` call with `args` takes: its `seconds`, at most 20.
pub fn wait_secs(args: &Value) -> u64 {
    args["seconds"].as_u64().unwrap_or(0).min(20)
}

/// Whether `body` (a JSON-RPC request) is a `tools/call` of `note`.
pub fn notes(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|m| m["method"] == "tools/call" && m["params"]["name"] == "note")
}

/// The seconds a `tools/call` of `wait` in `body` (a JSON-RPC request) takes, if it is one.
pub fn waits(body: &[u8]) -> Option<u64> {
    let msg: Value = serde_json::from_slice(body).ok()?;
    (msg["method"] == "tools/call" && msg["params"]["name"] == "wait")
        .then(|| wait_secs(&msg["params"]["arguments"]))
}

fn plain(status: u16, text: &str) -> Answer {
    (
        status,
        vec![("content-type".into(), "text/plain".into())],
        text.as_bytes().to_vec(),
    )
}

fn json_answer(message: &Value) -> Answer {
    (
        200,
        vec![("content-type".into(), "application/json".into())],
        message.to_string().into_bytes(),
    )
}

/// The response as an event stream, after a log notification the client must skip.
fn sse_answer(message: &Value) -> Answer {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": "working"}});
    let body = format!(": keep-alive\n\nevent: message\ndata: {note}\n\ndata: {message}\n\n");
    (
        200,
        vec![("content-type".into(), "text/event-stream".into())],
        body.into_bytes(),
    )
}
