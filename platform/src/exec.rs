//! Exec port: runs a shell command on this machine, or starts a program kept running and
//! spoken to in lines. Only the native binary has one; the Worker and the Lambda leave
//! [`crate::Platform::exec`] empty, and the `exec` tool and MCP servers run as programs are
//! not offered there.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;

/// One command to run.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// Run by `/bin/sh -c`.
    pub command: String,
    /// The working directory, relative to the Files root (created when missing).
    pub workdir: String,
    pub timeout: Duration,
    /// The most bytes kept of stdout and of stderr each; the rest is read and dropped.
    pub max_output: usize,
    /// May it reach the network (else, where the shell can, it has none).
    pub network: bool,
    /// Refuse to run unless the shell's whole sandbox holds.
    pub require_sandbox: bool,
}

impl std::fmt::Debug for ExecRequest {
    // A command line can hold anything the model was told, secrets included.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecRequest")
            .field("command_len", &self.command.len())
            .field("workdir", &self.workdir)
            .finish_non_exhaustive()
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    /// The exit code; `None` when a signal ended it (the timeout's kill among them).
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Output past `max_output` was dropped.
    pub truncated: bool,
    /// The timeout passed and the command's whole process group was killed.
    pub timed_out: bool,
}

#[async_trait]
pub trait Exec: Send + Sync {
    /// Runs `request.command`.
    ///
    /// # Behavior
    /// The command runs in `workdir` under the Files root (an invalid path is `Invalid`), in a
    /// process group of its own, with an environment holding none of this process's
    /// variables but a safe few (`PATH`, `HOME`, `LANG`, `TZ` …): no token, key or secret. At
    /// `timeout` the whole group is killed and the output so far returned with `timed_out`.
    /// A command that cannot be started is `Unavailable`.
    async fn run(&self, request: ExecRequest) -> Result<ExecOutput>;

    /// Starts `argv[0]` with the arguments after it (no shell), kept running to be spoken to
    /// in lines (an MCP server run as a local program).
    ///
    /// # Behavior
    /// It runs in the Files root, in a process group of its own, with the safe few variables
    /// of [`Exec::run`] plus `env`; its stderr goes to this process's log. Where the shell can
    /// fence it in, it reaches the network only when `reach.network` and no directory beyond
    /// the Files root but `reach.paths`. It is killed when the last handle to it is dropped.
    /// One that cannot be started is `Unavailable`; this default starts nothing.
    async fn start(
        &self,
        argv: &[String],
        env: &[(String, String)],
        reach: &Reach,
    ) -> Result<Arc<dyn Program>> {
        let _ = (argv, env, reach);
        Err(crate::PortError::unavailable(
            "this shell does not run programs",
        ))
    }
}

/// What a started program may reach beyond its directory, where the shell can fence it in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// The network (else none).
    pub network: bool,
    /// Absolute directories it may read and write besides its own.
    pub paths: Vec<String>,
}

/// A program started with [`Exec::start`].
#[async_trait]
pub trait Program: Send + Sync {
    /// Writes `line` and a newline to its stdin.
    ///
    /// # Behavior
    /// `Invalid` when `line` holds a newline; `Unavailable` once the program has exited.
    async fn send(&self, line: &str) -> Result<()>;

    /// The next line of its stdout, without the newline.
    ///
    /// # Behavior
    /// Waits at most `timeout` (`Timeout`; a line half read is kept for the next call). A
    /// line longer than `max` bytes is `Invalid`; `Unavailable` once the program has exited.
    async fn next_line(&self, timeout: Duration, max: usize) -> Result<String>;
}
