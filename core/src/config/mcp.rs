//! `mcp:` of an agent: the MCP servers whose tools it is offered (see [`crate::mcp`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::tools::Level;

/// One MCP server an agent uses, reached over Streamable HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Its tools appear as `<name>__<tool>`: letters, digits, `-` and `_`, no `__`.
    pub name: String,
    /// The endpoint (`https://…/mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Or the env var holding the endpoint, for a URL that carries a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    /// Header name → env var holding its value (`Authorization: GITHUB_MCP_AUTH`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Or a local program to start (native only): the program, then its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The program's environment: variable → the env var holding its value (the program gets
    /// no other secret).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The program may reach the network (off: where the shell can take it away, it has
    /// none — native on Linux gives it a network namespace of its own).
    #[serde(default)]
    pub network: bool,
    /// Absolute directories the program may read and write besides the files directory
    /// (where the shell sandboxes it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The server's tools offered, by the server's names; absent: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// What its tools can affect, for the agent's policy: `unsafe` unless set, so each call
    /// asks first.
    #[serde(default = "default_level")]
    pub level: Level,
    /// The longest a request to it may take.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// How long its tool list is reused before it is asked again.
    #[serde(default = "default_cache")]
    pub cache_secs: u64,
}

fn default_level() -> Level {
    Level::Unsafe
}
fn default_timeout() -> u64 {
    30
}
fn default_cache() -> u64 {
    300
}

/// The longest server name (its tools' names must fit the model APIs' 64 characters).
pub const MAX_NAME: usize = 24;
/// The most MCP servers one agent may list.
pub const MAX_SERVERS: usize = 16;

impl McpServerConfig {
    /// What is wrong with it, as `(field, message)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        let name = &self.name;
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME
            && !name.contains("__")
            && !name.starts_with('_')
            && !name.ends_with('_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(("mcp.name".into(), format!("{name:?} must be 1–{MAX_NAME} letters, digits, - or _ (no __, no _ first or last): its tools are named <name>__<tool>")));
        }
        let field = |f: &str| format!("mcp.{name}.{f}");
        match (&self.url, &self.url_env, &self.command) {
            (Some(url), None, None) => {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err((field("url"), format!("{url:?} is not an http(s) URL")));
                }
            }
            (None, Some(env), None) if !env.is_empty() => {}
            (None, None, Some(argv)) => {
                if argv.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err((field("command"), "name the program first".into()));
                }
                if !self.headers.is_empty() {
                    return Err((field("headers"), "a program takes env:, not headers".into()));
                }
            }
            _ => {
                let message = "set exactly one of url, url_env and command";
                return Err((field("url"), message.into()));
            }
        }
        if self.command.is_none() && !self.env.is_empty() {
            return Err((field("env"), "only a program (command:) takes env:".into()));
        }
        if self.command.is_none() && (self.network || !self.paths.is_empty()) {
            return Err((
                field("network"),
                "only a program (command:) takes network: and paths:".into(),
            ));
        }
        if let Some(p) = self
            .paths
            .iter()
            .find(|p| !p.starts_with('/') || p.contains(".."))
        {
            return Err((
                field("paths"),
                format!("{p:?} must be an absolute path without .."),
            ));
        }
        if !(1..=300).contains(&self.timeout_secs) {
            return Err((field("timeout_secs"), "must be 1 to 300".into()));
        }
        for header in self.headers.keys() {
            let token = !header.is_empty()
                && header
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
            if !token {
                return Err((field("headers"), format!("{header:?} is not a header name")));
            }
        }
        Ok(())
    }
}
