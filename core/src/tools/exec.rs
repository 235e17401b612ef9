//! `exec` (Unsafe): runs a shell command in the conversation's workspace directory through the
//! Exec port, which only the native binary has. The command runs with a timeout (its whole
//! process group killed), its output capped, and an environment without any secret of the
//! bot's; where the shell has a sandbox (native on Linux) it writes only its workspace, reads
//! only the system besides, and has no network unless the agent's `sandbox:` allows it. It
//! acts on the bot's machine all the same, so under the default policy every call asks first,
//! and only the connector's owner may allow it (`turn/approval.rs`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Exec, ExecRequest};
use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::tools::{Level, Tool, ToolContext, ToolError};

/// The timeout when the call gives none, and the longest a call may ask for.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
pub const MAX_TIMEOUT_SECS: u64 = 300;
/// Bytes kept of stdout and of stderr each.
pub const MAX_OUTPUT: usize = 16 * 1024;
/// The longest command line taken.
const MAX_COMMAND: usize = 8 * 1024;

pub struct ExecTool {
    pub exec: Arc<dyn Exec>,
    pub sandbox: SandboxConfig,
}

/// `sandbox:` of an agent: how its commands are fenced in where the shell has a sandbox
/// (native on Linux: Landlock to the workspace, resource limits, no new privileges, a PID
/// namespace; see the native `sandbox.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// Commands may reach the network (off: a network namespace of their own, no network).
    #[serde(default)]
    pub network: bool,
    /// Refuse to run a command where any part of the sandbox is missing on this machine.
    #[serde(default)]
    pub require: bool,
}

#[async_trait]
impl Tool for ExecTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "exec".into(),
            description: format!(
                "Run a shell command (/bin/sh -c) in your workspace directory on the bot's \
                 machine. Returns the exit status, stdout and stderr (each cut at {} KB). The \
                 default timeout is {DEFAULT_TIMEOUT_SECS} s (at most {MAX_TIMEOUT_SECS}); at \
                 the timeout everything the command started is killed. No secrets are in its \
                 environment. It may run sandboxed: writing only in your workspace (also its \
                 HOME and TMPDIR){}.",
                MAX_OUTPUT / 1024,
                match self.sandbox.network {
                    true => "",
                    false => ", without network access",
                }
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS}
                },
                "required": ["command"]
            }),
        }
    }

    fn level(&self) -> Level {
        Level::Unsafe
    }

    /// What a command prints may come from anywhere (`cat` of a downloaded file, `curl`).
    fn brings_untrusted(&self, input: &Value) -> Option<String> {
        Some(format!(
            "the output of the command {}",
            crate::tools::named(input, "command")
        ))
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let command = input
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| ToolError("command is required (a non-empty string)".into()))?;
        if command.len() > MAX_COMMAND || command.contains('\0') {
            return Err(ToolError(format!(
                "the command must be at most {} KB and hold no NUL byte",
                MAX_COMMAND / 1024
            )));
        }
        let secs = input
            .get("timeout_secs")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .clamp(1, MAX_TIMEOUT_SECS);
        let out = self
            .exec
            .run(ExecRequest {
                command: command.to_owned(),
                // The file tools' workspace, so a command sees the files they wrote.
                workdir: super::files::path::root(&ctx.scope),
                timeout: Duration::from_secs(secs),
                max_output: MAX_OUTPUT,
                network: self.sandbox.network,
                require_sandbox: self.sandbox.require,
            })
            .await
            .map_err(|e| ToolError(format!("the command could not run: {}", e.message)))?;
        let status = match (out.timed_out, out.status) {
            (true, _) => format!("killed after {secs} s (timeout)"),
            (false, Some(code)) => format!("exit status {code}"),
            (false, None) => "ended by a signal".to_owned(),
        };
        let mut text = status;
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            if !bytes.is_empty() {
                text.push_str(&format!(
                    "\n--- {name} ---\n{}",
                    String::from_utf8_lossy(bytes)
                ));
            }
        }
        if out.truncated {
            text.push_str(&format!(
                "\n[output cut: only the first {} KB of each stream are shown]",
                MAX_OUTPUT / 1024
            ));
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use clawless_platform::{ExecOutput, PortError};
    use futures::executor::block_on;

    use super::*;
    use crate::ids::Scope;

    #[derive(Default)]
    struct Recorder {
        seen: Mutex<Vec<ExecRequest>>,
        answer: Mutex<Option<Result<ExecOutput, PortError>>>,
    }

    #[async_trait]
    impl Exec for Recorder {
        async fn run(&self, r: ExecRequest) -> Result<ExecOutput, PortError> {
            self.seen.lock().unwrap().push(r);
            self.answer
                .lock()
                .unwrap()
                .take()
                .unwrap_or(Ok(ExecOutput::default()))
        }
    }

    fn ctx() -> ToolContext {
        ToolContext {
            scope: Scope::new("assistant/main/user-7"),
            granted: Default::default(),
            origin: None,
            depth: 0,
            budget: None,
            call: String::new(),
            tainted: None,
            allowance: None,
        }
    }

    #[test]
    fn runs_in_the_workspace_and_reports_status_and_output() {
        let rec = Arc::new(Recorder::default());
        *rec.answer.lock().unwrap() = Some(Ok(ExecOutput {
            status: Some(2),
            stdout: b"out\n".to_vec(),
            stderr: b"err\n".to_vec(),
            truncated: true,
            timed_out: false,
        }));
        let tool = ExecTool {
            exec: rec.clone(),
            sandbox: SandboxConfig::default(),
        };
        assert_eq!(tool.level(), Level::Unsafe);
        let text =
            block_on(tool.call(&ctx(), json!({"command": "ls", "timeout_secs": 9999}))).unwrap();
        assert_eq!(
            text,
            "exit status 2\n--- stdout ---\nout\n\n--- stderr ---\nerr\n\n[output cut: only the first 16 KB of each stream are shown]"
        );
        let seen = rec.seen.lock().unwrap();
        assert_eq!(seen[0].workdir, "workspace/assistant/main/user-7");
        assert_eq!(seen[0].timeout, Duration::from_secs(MAX_TIMEOUT_SECS));
    }

    #[test]
    fn a_timeout_and_bad_calls_are_said() {
        let rec = Arc::new(Recorder::default());
        *rec.answer.lock().unwrap() = Some(Ok(ExecOutput {
            timed_out: true,
            ..ExecOutput::default()
        }));
        let tool = ExecTool {
            exec: rec.clone(),
            sandbox: SandboxConfig::default(),
        };
        assert_eq!(
            block_on(tool.call(&ctx(), json!({"command": "sleep 99", "timeout_secs": 2}))).unwrap(),
            "killed after 2 s (timeout)"
        );
        for bad in [
            json!({}),
            json!({"command": " "}),
            json!({"command": "a\u{0}b"}),
        ] {
            assert!(block_on(tool.call(&ctx(), bad.clone())).is_err(), "{bad}");
        }
        *rec.answer.lock().unwrap() =
            Some(Err(PortError::invalid("\"x\" passes through a symlink")));
        assert_eq!(
            block_on(tool.call(&ctx(), json!({"command": "true"})))
                .unwrap_err()
                .0,
            "the command could not run: \"x\" passes through a symlink"
        );
    }
}
