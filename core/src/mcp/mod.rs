//! The MCP client: the tools of an agent's MCP servers (`mcp:` in `agents.d`), offered to the
//! model as `<server>__<tool>` beside the built-ins and passing the same policy and audit.
//!
//! - [`rpc`]: the transports: Streamable HTTP (JSON-RPC over POST, JSON or SSE answers,
//!   sessions, version negotiation) through the Http port, so every shell has it; and stdio,
//!   a local program through the Exec port (native only).
//!
//! A server's tool list is fetched when a turn starts and reused for `cache_secs`. A server
//! that cannot be listed (down, slow, answering wrongly) is left out of that turn, and not
//! asked again for [`DOWN_FOR_MS`], so a dead server costs one wait, not one per turn. What
//! a server says is untrusted: names, descriptions, schemas and results are bounded.

pub mod rpc;
mod schema;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Clock, Exec, Http};
use futures::future::{select, Either};
use serde_json::{json, Value};

use crate::config::McpServerConfig;
use crate::env::Env;
use crate::llm::ToolSpec;
use crate::tools::{Level, Tool, ToolContext, ToolError};
use rpc::{Endpoint, McpError, Transport};

/// A server that could not be listed is left out of turns for this long.
pub const DOWN_FOR_MS: u64 = 60_000;
/// The longest a turn waits for a server's tool list.
pub const LIST_WAIT: Duration = Duration::from_secs(10);
/// The most `tools/list` pages read from one server.
pub const MAX_PAGES: usize = 10;
/// The most tools taken from one server.
pub const MAX_TOOLS: usize = 64;
/// A tool's description is cut to this many characters.
pub const MAX_DESCRIPTION: usize = 1_024;
/// A tool whose input schema is longer than this (as JSON) is left out.
pub const MAX_SCHEMA: usize = 16 * 1024;
/// The longest tool name the model APIs take (`<server>__<tool>`).
pub const MAX_TOOL_NAME: usize = 64;
/// The most one server's tool list adds to every model request (names, descriptions and
/// schemas as JSON); the tools past it are left out.
pub const MAX_LIST_BYTES: usize = 64 * 1024;

/// One MCP server of an agent, its session and its cached tool list.
pub struct McpServer {
    pub config: McpServerConfig,
    /// `None` when it cannot be used here; [`McpServer::unavailable`] says why.
    endpoint: Option<Endpoint>,
    unavailable: Option<String>,
    clock: Arc<dyn Clock>,
    cache: Mutex<Cache>,
}

/// A tool as listed: the server's name, what the model sees, and whether the server says a
/// call may simply be made again (`annotations.readOnlyHint` or `idempotentHint`).
#[derive(Debug, Clone)]
struct Listed {
    remote: String,
    spec: ToolSpec,
    rerunnable: bool,
}

#[derive(Default)]
struct Cache {
    /// When the list was fetched (ms), and the list.
    tools: Option<(u64, Arc<Vec<Listed>>)>,
    /// Not asked before this time (ms).
    down_until: u64,
}

impl McpServer {
    /// The server of `config`; its URL, headers and program environment are read from `env`
    /// now. A program needs `exec` (native only).
    pub fn new(
        config: McpServerConfig,
        http: Arc<dyn Http>,
        exec: Option<Arc<dyn Exec>>,
        clock: Arc<dyn Clock>,
        env: &Env,
    ) -> McpServer {
        let timeout = Duration::from_secs(config.timeout_secs);
        let transport = transport(&config, http, exec, env);
        let (endpoint, unavailable) = match transport {
            Ok(t) => (Some(Endpoint::new(t, timeout, clock.clone())), None),
            Err(why) => (None, Some(why)),
        };
        McpServer {
            config,
            endpoint,
            unavailable,
            clock,
            cache: Mutex::new(Cache::default()),
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Why it is not offered here (a variable it needs is not set), if it is not.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Its tools for a turn starting now: the cached list while it is fresh, else asked
    /// again, within [`LIST_WAIT`].
    pub async fn tools(self: &Arc<Self>) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let listed = self.specs().await?;
        Ok(listed
            .iter()
            .map(|t| {
                Arc::new(McpTool {
                    server: self.clone(),
                    remote: t.remote.clone(),
                    spec: t.spec.clone(),
                    rerunnable: t.rerunnable,
                }) as Arc<dyn Tool>
            })
            .collect())
    }

    /// Whether it is a local program (`command:`), started by the bot.
    pub fn is_program(&self) -> bool {
        self.config.command.is_some()
    }

    /// Starts it, if it is not running, and reads its tool list, waiting up to `wait` (not
    /// [`LIST_WAIT`]): a program that fetches itself at its first start (`npx -y`) does that
    /// before a turn needs it. Returns how many tools it offers.
    pub async fn warm(&self, wait: Duration) -> Result<usize, McpError> {
        Ok(self.specs_within(wait).await?.len())
    }

    async fn specs(&self) -> Result<Arc<Vec<Listed>>, McpError> {
        self.specs_within(LIST_WAIT).await
    }

    async fn specs_within(&self, wait: Duration) -> Result<Arc<Vec<Listed>>, McpError> {
        let Some(endpoint) = &self.endpoint else {
            return Err(McpError::Down(self.unavailable.clone().unwrap_or_default()));
        };
        let now = self.clock.now_ms();
        {
            let cache = self.cache();
            if let Some((at, list)) = &cache.tools {
                if now.saturating_sub(*at) < self.config.cache_secs.saturating_mul(1000) {
                    return Ok(list.clone());
                }
            }
            if now < cache.down_until {
                return Err(McpError::Down("it failed a moment ago".into()));
            }
        }
        let listed = {
            let list = std::pin::pin!(self.list(endpoint));
            let waited = std::pin::pin!(self.clock.sleep(wait));
            match select(list, waited).await {
                Either::Left((listed, _)) => listed,
                Either::Right(_) => Err(McpError::Down(format!(
                    "no tool list within {}s",
                    wait.as_secs()
                ))),
            }
        };
        let mut cache = self.cache();
        match listed {
            Ok(list) => {
                let list = Arc::new(list);
                cache.tools = Some((self.clock.now_ms(), list.clone()));
                Ok(list)
            }
            Err(e) => {
                cache.tools = None;
                cache.down_until = self.clock.now_ms().saturating_add(DOWN_FOR_MS);
                Err(e)
            }
        }
    }

    /// `tools/list`, page by page, bounded, fitted to what the model APIs take.
    async fn list(&self, endpoint: &Endpoint) -> Result<Vec<Listed>, McpError> {
        let mut out: Vec<Listed> = Vec::new();
        let mut bytes = 0;
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = endpoint.request("tools/list", params).await?;
            let tools = page["tools"].as_array().ok_or_else(|| {
                McpError::Protocol("a tools/list result without a tools array".into())
            })?;
            for tool in tools {
                if out.len() >= MAX_TOOLS {
                    break;
                }
                let taken = |name: &str| out.iter().any(|t| t.spec.name == name);
                let Some(listed) = self.spec_of(tool, taken) else {
                    continue;
                };
                let spec = &listed.spec;
                let size =
                    spec.name.len() + spec.description.len() + spec.input_schema.to_string().len();
                if bytes + size > MAX_LIST_BYTES {
                    tracing::info!(tool = %spec.name, "MCP tool left out: the server's tools pass {MAX_LIST_BYTES} bytes");
                    continue;
                }
                bytes += size;
                out.push(listed);
            }
            cursor = page["nextCursor"]
                .as_str()
                .filter(|c| !c.is_empty() && c.len() <= 1024)
                .map(str::to_owned);
            if cursor.is_none() || out.len() >= MAX_TOOLS {
                break;
            }
        }
        Ok(out)
    }

    /// A listed tool as the model sees it, or `None` when it is not allowed or not usable (no
    /// name, a schema that is not an object or is too large), each logged with its reason.
    /// A name the model APIs refuse (`notes.search`, too long) is offered under a valid one
    /// (see [`model_name`]); `taken` says which names the list already gave out.
    fn spec_of(&self, tool: &Value, taken: impl Fn(&str) -> bool) -> Option<Listed> {
        let Some(remote) = tool["name"]
            .as_str()
            .filter(|r| !r.is_empty() && r.len() <= 256)
        else {
            tracing::info!(server = %self.config.name, "MCP tool left out: no name, or one over 256 bytes");
            return None;
        };
        let allowed = self
            .config
            .tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == remote));
        if !allowed {
            tracing::debug!(server = %self.config.name, tool = remote, "MCP tool left out: not in the server's tools:");
            return None;
        }
        let name = model_name(&self.config.name, remote, taken);
        if name != format!("{}__{remote}", self.config.name) {
            tracing::info!(tool = remote, offered_as = %name, "MCP tool renamed: the model APIs refuse its name");
        }
        let mut schema = tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        if !schema.is_object() || schema.to_string().len() > MAX_SCHEMA {
            tracing::info!(tool = %name, "MCP tool left out: its input schema is not a small object");
            return None;
        }
        if let Some(Err(why)) = schema.as_object().map(schema::check) {
            tracing::info!(tool = %name, why, "MCP tool left out: the model APIs would refuse its input schema");
            return None;
        }
        schema["type"] = json!("object");
        let description = tool["description"]
            .as_str()
            .or_else(|| tool["title"].as_str())
            .unwrap_or("");
        let hint = |k: &str| tool["annotations"][k].as_bool() == Some(true);
        Some(Listed {
            remote: remote.to_owned(),
            spec: ToolSpec {
                name,
                description: format!(
                    "{} (from the MCP server {})",
                    crate::audit::cut(description, MAX_DESCRIPTION),
                    self.config.name
                ),
                input_schema: schema,
            },
            rerunnable: hint("readOnlyHint") || hint("idempotentHint"),
        })
    }

    /// Calls `tool` (the server's name for it) with `arguments`.
    async fn call(&self, tool: &str, arguments: Value) -> Result<String, ToolError> {
        let Some(endpoint) = &self.endpoint else {
            return Err(ToolError(format!(
                "The MCP server {} is not available here.",
                self.config.name
            )));
        };
        let params = json!({"name": tool, "arguments": arguments});
        match endpoint.request("tools/call", params).await {
            Ok(result) => call_result(&result),
            Err(e) => {
                if matches!(e, McpError::Down(_)) {
                    let mut cache = self.cache();
                    cache.tools = None;
                    cache.down_until = self.clock.now_ms().saturating_add(DOWN_FOR_MS);
                }
                tracing::warn!(server = %self.config.name, error = %e, "MCP tool call failed");
                Err(ToolError(format!(
                    "{tool} on the MCP server {} failed: {e}",
                    self.config.name
                )))
            }
        }
    }
}

/// How `config` is reached here, or why it cannot be (a setting it needs is unset, a
/// program where programs cannot run).
fn transport(
    config: &McpServerConfig,
    http: Arc<dyn Http>,
    exec: Option<Arc<dyn Exec>>,
    env: &Env,
) -> Result<Transport, String> {
    let setting = |var: &str, what: String| {
        let value = env.secret(var);
        match value.is_empty() {
            true => Err(format!("{what} needs {var}, which is not set")),
            false => Ok(value),
        }
    };
    if let Some(argv) = &config.command {
        let Some(exec) = exec else {
            return Err("it runs a program, which only the native binary can".into());
        };
        let mut vars = Vec::new();
        for (name, var) in &config.env {
            vars.push((name.clone(), setting(var, format!("its variable {name}"))?));
        }
        return Ok(Transport::Stdio {
            exec,
            argv: argv.clone(),
            env: vars,
            reach: clawless_platform::Reach {
                network: config.network,
                paths: config.paths.clone(),
            },
            program: futures::lock::Mutex::new(None),
            exchange: futures::lock::Mutex::new(()),
        });
    }
    let url = match (&config.url, &config.url_env) {
        (Some(url), _) => url.clone(),
        (None, Some(var)) => {
            let url = setting(var, "its URL".into())?;
            let url = url.expose();
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(format!("{var} does not hold an http(s) URL"));
            }
            url.to_owned()
        }
        (None, None) => return Err("it has no url".into()),
    };
    let mut headers = Vec::new();
    for (name, var) in &config.headers {
        headers.push((name.clone(), setting(var, format!("its header {name}"))?));
    }
    Ok(Transport::Http { url, headers, http })
}

/// The text of a `tools/call` result: its text content, else its structured content as
/// JSON; other content is named, not shown. `isError` makes it a tool error.
fn call_result(result: &Value) -> Result<String, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    for block in result["content"].as_array().into_iter().flatten() {
        let part = match block["type"].as_str().unwrap_or("") {
            "text" => block["text"].as_str().unwrap_or("").to_owned(),
            "resource" => match block["resource"]["text"].as_str() {
                Some(text) => text.to_owned(),
                None => format!(
                    "[a resource: {}]",
                    crate::audit::cut(block["resource"]["uri"].as_str().unwrap_or("?"), 200)
                ),
            },
            "resource_link" => format!(
                "[a link: {}]",
                crate::audit::cut(block["uri"].as_str().unwrap_or("?"), 200)
            ),
            other => format!(
                "[{} content ({}), not shown]",
                crate::audit::cut(other, 20),
                crate::audit::cut(block["mimeType"].as_str().unwrap_or("?"), 60)
            ),
        };
        parts.push(part);
    }
    let text = parts.join("\n");
    let text = match result.get("structuredContent") {
        Some(structured) if text.trim().is_empty() => structured.to_string(),
        _ => text,
    };
    if result["isError"].as_bool() == Some(true) {
        return Err(ToolError(if text.is_empty() {
            "The tool failed without saying why.".into()
        } else {
            text
        }));
    }
    Ok(text)
}

/// The name the model sees for `server`'s tool `remote`: `<server>__<remote>` when the model
/// APIs take it (ASCII letters, digits, `_`, `-`, at most [`MAX_TOOL_NAME`]); else every other
/// character becomes `_`, a name too long is cut, and a suffix of its hash (`_h<6 hex>`) is
/// added so names stay distinct. The tool keeps the server's name beside it for the call.
pub fn model_name(server: &str, remote: &str, taken: impl Fn(&str) -> bool) -> String {
    let plain = format!("{server}__{remote}");
    let fine = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if plain.len() <= MAX_TOOL_NAME && plain.chars().all(fine) && !taken(&plain) {
        return plain;
    }
    let mapped: String = plain
        .chars()
        .map(|c| if fine(c) { c } else { '_' })
        .collect();
    if mapped.len() <= MAX_TOOL_NAME && !taken(&mapped) {
        return mapped;
    }
    // FNV-1a of the server's name: the same tool gets the same name every time.
    let hash = remote.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("_h{:06x}", hash & 0xff_ffff);
    let mut head = mapped;
    head.truncate(MAX_TOOL_NAME - suffix.len());
    head + &suffix
}

/// One tool of an MCP server.
pub struct McpTool {
    server: Arc<McpServer>,
    /// The server's name for it.
    remote: String,
    spec: ToolSpec,
    /// The server says a call may be made again (see [`Tool::rerunnable`]).
    rerunnable: bool,
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn brings_untrusted(&self, _input: &Value) -> Option<String> {
        Some(format!("the answer of the MCP tool {}", self.spec.name))
    }

    fn level(&self) -> Level {
        self.server.config.level
    }

    fn rerunnable(&self, _input: &Value) -> bool {
        self.rerunnable
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let arguments = match input {
            Value::Object(_) => input,
            Value::Null => json!({}),
            _ => return Err(ToolError("the arguments must be a JSON object".into())),
        };
        self.server.call(&self.remote, arguments).await
    }
}

#[cfg(test)]
mod tests;
