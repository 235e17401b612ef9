//! MCP's transports: Streamable HTTP (one JSON-RPC message per POST, answered with JSON or
//! with server-sent events, in a session the server names with `Mcp-Session-Id`), and stdio
//! (a local program, one message per line; native only, through the Exec port).
//!
//! A session starts with `initialize` (the newest protocol version we speak; the server answers
//! with the one it picks, which must be one we speak too) and `notifications/initialized`.
//! Every later request carries the session id and `MCP-Protocol-Version`. A 4xx (but 429) on
//! a request that carried a session id, or a connection refused or reset (a server that
//! restarted), means the server dropped the session: a new one is started and the request
//! sent again, once. A timeout is not retried: the request may have been carried out. Requests the server sends us inside an SSE answer (sampling,
//! elicitation) are not supported and are skipped; notifications are skipped.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawless_platform::{Clock, Exec, Http, HttpRequest, HttpStreamResponse, Outside, Program};
use serde_json::{json, Value};

use crate::llm::sse::SseParser;
use crate::secret::Secret;

/// Protocol versions this client speaks, newest first; `initialize` offers the first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The most bytes of one answer read (a JSON body, an SSE stream up to our response, a line).
pub const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// The most lines a program may print before its response (logs, notifications).
pub const MAX_SKIPPED_LINES: usize = 1_000;

/// Why a request to an MCP server failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpError {
    /// Could not reach it, it timed out, or it answered 5xx or 429: try again later.
    #[error("the MCP server is unreachable: {0}")]
    Down(String),
    /// It answered, but not as MCP says (a bad status, a body that is not JSON-RPC).
    #[error("the MCP server answered wrongly: {0}")]
    Protocol(String),
    /// It answered with a JSON-RPC error.
    #[error("the MCP server refused: {message} ({code})")]
    Rpc { code: i64, message: String },
}

/// A live session: its id (when the server gave one) and the protocol version agreed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: Option<String>,
    pub version: String,
}

/// How messages reach a server.
pub enum Transport {
    /// Streamable HTTP: one POST per message.
    Http {
        url: String,
        /// Extra headers (`Authorization` …), values from the environment.
        headers: Vec<(String, Secret)>,
        http: Arc<dyn Http>,
    },
    /// A local program (native only): one JSON-RPC message per line on its stdin and stdout.
    /// It is started at the first request and again after it exits.
    Stdio {
        exec: Arc<dyn Exec>,
        argv: Vec<String>,
        env: Vec<(String, Secret)>,
        /// The network and the directories it may reach (`network:`, `paths:` of its config).
        reach: clawless_platform::Reach,
        program: futures::lock::Mutex<Option<Arc<dyn Program>>>,
        /// Held from a request's line to its response: the lines of two requests in flight
        /// at once would be read by either (and the other's response skipped).
        exchange: futures::lock::Mutex<()>,
    },
}

/// One server's endpoint, and the session with it.
pub struct Endpoint {
    transport: Transport,
    pub timeout: Duration,
    clock: Arc<dyn Clock>,
    session: Mutex<Option<Session>>,
    next_id: Mutex<u64>,
}

impl Endpoint {
    pub fn new(transport: Transport, timeout: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            transport,
            timeout,
            clock,
            session: Mutex::new(None),
            next_id: Mutex::new(1),
        }
    }

    /// The session in use, if one was started.
    pub fn session(&self) -> Option<Session> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_session(&self, session: Option<Session>) {
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = session;
    }

    fn id(&self) -> u64 {
        let mut n = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        *n
    }

    /// Sends `method` with `params` in the session (started first when there is none) and
    /// returns the JSON-RPC `result`.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let session = match self.session() {
            Some(s) => s,
            None => self.initialize().await?,
        };
        match self.exchange(method, &params, Some(&session)).await {
            Err(Failure::Expired) => {
                tracing::info!("MCP session expired; starting a new one");
                self.set_session(None);
                let session = self.initialize().await?;
                self.exchange(method, &params, Some(&session))
                    .await
                    .map_err(Failure::into_error)
            }
            other => other.map_err(Failure::into_error),
        }
    }

    /// Starts a session: `initialize`, the version check, `notifications/initialized`.
    pub async fn initialize(&self) -> Result<Session, McpError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": {},
            "clientInfo": {"name": "clawless", "version": env!("CARGO_PKG_VERSION")},
        });
        let (result, id) = self
            .exchange_with_id("initialize", &params, None)
            .await
            .map_err(Failure::into_error)?;
        let version = result["protocolVersion"].as_str().unwrap_or_default();
        let Some(version) = PROTOCOL_VERSIONS.iter().find(|v| **v == version) else {
            return Err(McpError::Protocol(format!(
                "it speaks protocol version {:?}; this client speaks {}",
                crate::audit::cut(version, 40),
                PROTOCOL_VERSIONS.join(", ")
            )));
        };
        let session = Session {
            id,
            version: (*version).to_owned(),
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.notify(&note, &session).await?;
        self.set_session(Some(session.clone()));
        Ok(session)
    }

    async fn exchange(
        &self,
        method: &str,
        params: &Value,
        session: Option<&Session>,
    ) -> Result<Value, Failure> {
        self.exchange_with_id(method, params, session)
            .await
            .map(|(v, _)| v)
    }

    /// One request and its answer: `(result, the session id the answer named)`.
    async fn exchange_with_id(
        &self,
        method: &str,
        params: &Value,
        session: Option<&Session>,
    ) -> Result<(Value, Option<String>), Failure> {
        let id = self.id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (message, session_id) = match &self.transport {
            Transport::Http { .. } => self.http_exchange(&body, id, session).await?,
            Transport::Stdio { .. } => (self.stdio_exchange(&body, id, session).await?, None),
        };
        let result = match (message.get("result"), message.get("error")) {
            (_, Some(e)) => {
                return Err(McpError::Rpc {
                    code: e["code"].as_i64().unwrap_or(0),
                    message: crate::audit::cut(e["message"].as_str().unwrap_or("error"), 500),
                }
                .into())
            }
            (Some(r), None) => r.clone(),
            (None, None) => {
                return Err(
                    McpError::Protocol("a response with neither result nor error".into()).into(),
                )
            }
        };
        Ok((result, session_id))
    }

    /// A request over HTTP: its response, and the session id the answer named.
    async fn http_exchange(
        &self,
        body: &Value,
        id: u64,
        session: Option<&Session>,
    ) -> Result<(Value, Option<String>), Failure> {
        let in_session = session.is_some_and(|s| s.id.is_some());
        let mut resp = match self.post(body, session).await {
            Ok(resp) => resp,
            // Not reached (refused, reset): a server that restarted has forgotten the
            // session. A timeout is not this: the request may have been carried out.
            Err(e) if in_session && e.kind == clawless_platform::ErrorKind::Unavailable => {
                return Err(Failure::Expired)
            }
            Err(e) => return Err(McpError::Down(e.to_string()).into()),
        };
        // Any 4xx but 429 on a request in a session: the server no longer knows it (404 as
        // the spec says; some answer 400).
        if in_session && (400..500).contains(&resp.status) && resp.status != 429 {
            return Err(Failure::Expired);
        }
        if !(200..300).contains(&resp.status) {
            return Err(status_error(resp.status).into());
        }
        let session_id = resp
            .header("mcp-session-id")
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= 256 && s.chars().all(|c| c.is_ascii_graphic()))
            .map(str::to_owned);
        Ok((read_answer(&mut resp, id).await?, session_id))
    }

    /// A request to the program: one line out, lines in until its response (other messages
    /// and lines that are not JSON skipped), within the timeout. A program that is not
    /// running is started; the session then expires (it must be initialised again).
    async fn stdio_exchange(
        &self,
        body: &Value,
        id: u64,
        session: Option<&Session>,
    ) -> Result<Value, Failure> {
        let Transport::Stdio { exchange, .. } = &self.transport else {
            return Err(McpError::Protocol("not a program".into()).into());
        };
        let _one_at_a_time = exchange.lock().await;
        let program = self.program(session.is_some()).await?;
        let gone = |e: clawless_platform::PortError| McpError::Down(e.to_string());
        if let Err(e) = program.send(&body.to_string()).await {
            self.stop_program().await;
            return Err(gone(e).into());
        }
        let deadline = self
            .clock
            .now_ms()
            .saturating_add(self.timeout.as_millis() as u64);
        for _ in 0..MAX_SKIPPED_LINES {
            let left = deadline.saturating_sub(self.clock.now_ms());
            if left == 0 {
                break;
            }
            let line = match program
                .next_line(Duration::from_millis(left), MAX_ANSWER)
                .await
            {
                Ok(line) => line,
                Err(e) if e.kind == clawless_platform::ErrorKind::Timeout => break,
                Err(e) => {
                    self.stop_program().await;
                    return Err(gone(e).into());
                }
            };
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                if is_response_to(&message, id) {
                    return Ok(message);
                }
            }
        }
        Err(McpError::Down(format!("no answer within {}s", self.timeout.as_secs())).into())
    }

    /// The running program, started when there is none: a new one has no session yet, so
    /// a request `in_session` gets `Expired` (and is sent again after `initialize`).
    async fn program(&self, in_session: bool) -> Result<Arc<dyn Program>, Failure> {
        let Transport::Stdio {
            exec,
            argv,
            env,
            reach,
            program,
            ..
        } = &self.transport
        else {
            return Err(McpError::Protocol("not a program".into()).into());
        };
        let mut running = program.lock().await;
        if let Some(p) = &*running {
            return Ok(p.clone());
        }
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect();
        let started = exec
            .start(argv, &env, reach)
            .await
            .map_err(|e| McpError::Down(e.to_string()))?;
        *running = Some(started.clone());
        if in_session {
            return Err(Failure::Expired);
        }
        Ok(started)
    }

    async fn stop_program(&self) {
        if let Transport::Stdio { program, .. } = &self.transport {
            *program.lock().await = None;
        }
        self.set_session(None);
    }

    /// Sends a notification in `session`.
    async fn notify(&self, note: &Value, session: &Session) -> Result<(), McpError> {
        match &self.transport {
            Transport::Http { .. } => {
                let resp = self
                    .post(note, Some(session))
                    .await
                    .map_err(|e| McpError::Down(e.to_string()))?;
                if !(200..300).contains(&resp.status) {
                    return Err(status_error(resp.status));
                }
                Ok(())
            }
            Transport::Stdio { .. } => {
                let program = self.program(false).await.map_err(Failure::into_error)?;
                program
                    .send(&note.to_string())
                    .await
                    .map_err(|e| McpError::Down(e.to_string()))
            }
        }
    }

    async fn post(
        &self,
        body: &Value,
        session: Option<&Session>,
    ) -> Result<HttpStreamResponse, clawless_platform::PortError> {
        let Transport::Http { url, headers, http } = &self.transport else {
            return Err(clawless_platform::PortError::invalid("not an HTTP server"));
        };
        let mut req = HttpRequest::post_json(url, body, self.timeout)
            .header("accept", "application/json, text/event-stream");
        // A redirect is not followed: the headers (secrets) would go to wherever it points.
        // The server is the operator's, so a private address is fine.
        req.outside = Some(Outside {
            max_body: MAX_ANSWER,
            allow_private: true,
        });
        if let Some(s) = session {
            if let Some(id) = &s.id {
                req = req.header("mcp-session-id", id.clone());
            }
            req = req.header("mcp-protocol-version", s.version.clone());
        }
        for (name, value) in headers {
            req = req.header(name, value.expose());
        }
        http.send_streaming(req).await
    }
}

/// A failed exchange: the server forgot the session (a 404 to a request in one), or another
/// error.
enum Failure {
    Expired,
    Other(McpError),
}

impl From<McpError> for Failure {
    fn from(e: McpError) -> Self {
        Failure::Other(e)
    }
}

impl Failure {
    fn into_error(self) -> McpError {
        match self {
            Failure::Expired => McpError::Protocol("the server forgot the session at once".into()),
            Failure::Other(e) => e,
        }
    }
}

fn status_error(status: u16) -> McpError {
    if status == 429 || status >= 500 {
        McpError::Down(format!("HTTP {status}"))
    } else {
        McpError::Protocol(format!("HTTP {status}"))
    }
}

/// Reads the JSON-RPC response with `id` from an answer: a JSON body (one message or a
/// batch), or an SSE stream read until that response arrives.
async fn read_answer(resp: &mut HttpStreamResponse, id: u64) -> Result<Value, McpError> {
    let read_err = |e: clawless_platform::PortError| match e.kind {
        clawless_platform::ErrorKind::Invalid => McpError::Protocol(e.message),
        _ => McpError::Down(e.to_string()),
    };
    let sse = resp
        .header("content-type")
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    if !sse {
        let body = resp.read_to_end(MAX_ANSWER + 1).await.map_err(read_err)?;
        if body.len() > MAX_ANSWER {
            return Err(McpError::Protocol(format!(
                "an answer longer than {MAX_ANSWER} bytes"
            )));
        }
        let value: Value = serde_json::from_slice(&body)
            .map_err(|e| McpError::Protocol(format!("an answer that is not JSON: {e}")))?;
        let found = match value {
            Value::Array(batch) => batch.into_iter().find(|m| is_response_to(m, id)),
            single => Some(single).filter(|m| is_response_to(m, id)),
        };
        return found
            .ok_or_else(|| McpError::Protocol("no response to the request in its answer".into()));
    }
    let mut parser = SseParser::with_limits(MAX_ANSWER, MAX_ANSWER);
    let mut read = 0usize;
    while let Some(piece) = resp.body.next_chunk().await.map_err(read_err)? {
        read += piece.len();
        if read > MAX_ANSWER {
            return Err(McpError::Protocol(format!(
                "an event stream longer than {MAX_ANSWER} bytes"
            )));
        }
        let events = parser
            .feed(&piece)
            .map_err(|e| McpError::Protocol(e.to_string()))?;
        for event in events {
            if event.event != "message" {
                continue;
            }
            // A non-JSON event (a keep-alive) is skipped like a notification.
            if let Ok(message) = serde_json::from_str::<Value>(&event.data) {
                if is_response_to(&message, id) {
                    return Ok(message);
                }
            }
        }
    }
    Err(McpError::Protocol(
        "the event stream ended before the response".into(),
    ))
}

/// Whether `message` is the response to request `id` (not a notification or a request).
fn is_response_to(message: &Value, id: u64) -> bool {
    let same = match &message["id"] {
        Value::Number(n) => n.as_u64() == Some(id),
        Value::String(s) => s == &id.to_string(),
        _ => false,
    };
    same && message.get("method").is_none()
}
