//! The Exec port on this machine: `/bin/sh -c` in a directory under the Files root, fenced in
//! (see [`crate::fence`]: a PID namespace of its own where the machine allows, so the end of
//! the command or its timeout ends everything it started; a scrubbed environment, none of
//! this process's tokens, keys or secrets), output capped.

use std::path::PathBuf;
use std::process::Stdio;

use clawless_platform::files::normalize_dir;
use clawless_platform::{async_trait, Exec, ExecOutput, ExecRequest, PortError};
use tokio::io::{AsyncRead, AsyncReadExt};

mod spare;
use spare::{Spare, Spares};

use crate::fence;
use crate::sandbox::Limits;

/// How long after its timeout the sandbox ends a command this process did not end first.
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

pub struct ShellExec {
    root: PathBuf,
    /// The sandbox made ahead for the next command ([`spare`]); killed with this.
    spares: Spares,
}

impl ShellExec {
    /// Commands run under `root` (the Files root).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            spares: Spares::default(),
        }
    }

    /// The sandbox made ahead for the next command, when one waits: its process id and
    /// its cgroup.
    pub fn spare(&self) -> Option<(u32, Option<PathBuf>)> {
        self.spares.waiting()
    }

    /// The working directory on disk, created when missing; no component may be a symlink.
    fn workdir(&self, rel: &str) -> Result<PathBuf, PortError> {
        let rel = normalize_dir(rel)?;
        let mut path = self.root.clone();
        for seg in rel.split('/').filter(|s| !s.is_empty()) {
            path.push(seg);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(PortError::invalid(format!(
                    "{rel:?} passes through a symlink"
                )));
            }
        }
        std::fs::create_dir_all(&path)
            .map_err(|e| PortError::unavailable(format!("creating the working directory: {e}")))?;
        Ok(path)
    }
}

/// Makes this process's memory and environment unreadable through `/proc` to processes of the
/// same user (`prctl(PR_SET_DUMPABLE, 0)`): a command `exec` runs could otherwise read the bot's
/// tokens and keys from `/proc/$PPID/environ`. Root still can. Called before the first command.
pub fn hide_from_commands() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// Reads `from` to the end, keeping the first `max` bytes; says whether it dropped any.
async fn capped(mut from: impl AsyncRead + Unpin, max: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut dropped = false;
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return (kept, dropped),
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped |= n > room;
            }
        }
    }
}

#[async_trait]
impl Exec for ShellExec {
    async fn run(&self, req: ExecRequest) -> Result<ExecOutput, PortError> {
        let dir = self.workdir(&req.workdir)?;
        // Its processes are capped in a cgroup of its own (the spare's: [`spare`]), removed
        // once all have ended.
        let limits = Limits {
            rw: dir.clone(),
            also: Vec::new(),
            network: req.network,
            cpu_secs: req.timeout.as_secs() + 1,
            require: req.require_sandbox,
            cgroup: None,
            // Kept by the sandbox itself too, a moment after this process's own timer: it
            // holds when this process is gone.
            deadline: Some(req.timeout + GRACE),
        };
        if req.require_sandbox {
            let lacks = fence::missing(limits.network);
            if !lacks.is_empty() {
                return Err(PortError::unavailable(format!(
                    "the sandbox is required (sandbox.require) and this machine lacks {}",
                    lacks.join("; ")
                )));
            }
        }
        let (mut child, group) = match crate::sandbox::helper() {
            Some(_) => {
                let argv = ["-c".into(), req.command.clone()];
                let request = fence::request("/bin/sh", &argv, &[], &dir, &limits)
                    .map_err(PortError::invalid)?;
                let Spare { child, group } = self.spares.start(&request, req.network).await?;
                (child, group)
            }
            // Not the `clawless` binary (a library's tests): fenced, not sandboxed.
            None => {
                let argv = ["-c".into(), req.command.clone()];
                let mut cmd = fence::command("/bin/sh", &argv, &[], &limits);
                cmd.current_dir(&dir)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let child = cmd
                    .spawn()
                    .map_err(|e| PortError::unavailable(format!("cannot start /bin/sh: {e}")))?;
                (child, None)
            }
        };
        let pgid = child.id().unwrap_or(0);
        let (stdout, stderr) = match (child.stdout.take(), child.stderr.take()) {
            (Some(o), Some(e)) => (o, e),
            _ => {
                return Err(PortError::unavailable(
                    "the command's output pipes are missing",
                ))
            }
        };
        let max = req.max_output;
        let output = async {
            let ((out, cut_out), (err, cut_err)) =
                tokio::join!(capped(stdout, max), capped(stderr, max));
            let status = child.wait().await.ok().and_then(|s| s.code());
            ExecOutput {
                status,
                stdout: out,
                stderr: err,
                truncated: cut_out || cut_err,
                timed_out: false,
            }
        };
        let ended = match tokio::time::timeout(req.timeout, output).await {
            // What the command left running in the background (`cmd &`) ends with it.
            Ok(done) => done,
            Err(_) => ExecOutput {
                timed_out: true,
                ..ExecOutput::default()
            },
        };
        fence::kill_group(pgid);
        // Removed off the runtime's threads: it waits for the last process to be reaped.
        if let Some(group) = group {
            tokio::task::spawn_blocking(move || drop(group));
        }
        Ok(ended)
    }

    async fn start(
        &self,
        argv: &[String],
        env: &[(String, String)],
        reach: &clawless_platform::Reach,
    ) -> Result<std::sync::Arc<dyn clawless_platform::Program>, PortError> {
        let dir = self.workdir("")?;
        crate::program::start(&dir, argv, env, reach)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use super::*;

    fn temp_root() -> PathBuf {
        clawless_testkit::scratch::dir("exec")
    }

    fn req(command: &str, timeout: Duration) -> ExecRequest {
        ExecRequest {
            command: command.into(),
            workdir: "workspace/a/main/user-1".into(),
            timeout,
            max_output: 1000,
            network: false,
            require_sandbox: false,
        }
    }

    #[tokio::test]
    async fn runs_in_the_workspace_with_output_and_status() {
        let root = temp_root();
        let exec = ShellExec::new(&root);
        let out = exec
            .run(req("pwd; echo err >&2; exit 3", Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(out.status, Some(3));
        let pwd = String::from_utf8(out.stdout).unwrap();
        assert!(pwd.trim_end().ends_with("workspace/a/main/user-1"), "{pwd}");
        assert_eq!(out.stderr, b"err\n");
        assert!(!out.truncated && !out.timed_out);
        let out = exec
            .run(req("yes | head -c 5000", Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!((out.stdout.len(), out.truncated), (1000, true));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_is_hidden_from_commands() {
        hide_from_commands().unwrap();
        assert_eq!(
            rustix::process::dumpable_behavior().unwrap(),
            rustix::process::DumpableBehavior::NotDumpable
        );
    }

    #[tokio::test]
    async fn a_background_job_ends_with_its_command() {
        let root = temp_root();
        let marker = root.join("outlived");
        let command = format!(
            "(sleep 2; touch {}) >/dev/null 2>&1 & echo started",
            marker.display()
        );
        let out = ShellExec::new(&root)
            .run(req(&command, Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(
            (out.status, out.stdout.as_slice()),
            (Some(0), &b"started\n"[..])
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            !marker.exists(),
            "a background process outlived its command"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn nothing_it_started_outlives_it_through_setsid_nohup_double_fork_disown_or_daemon() {
        // Each way out: setsid, nohup, a double fork, bash's disown, a daemon (setsid, cd /,
        // streams closed, forked again).
        assert!(
            matches!(fence::fence(), fence::Fence::Namespace { .. }),
            "this machine gives commands no PID namespace: {:?}",
            fence::fence()
        );
        let root = temp_root();
        let tag = format!("{}", 40_000 + std::process::id() % 20_000);
        let command = format!(
            "setsid sleep {tag} >/dev/null 2>&1 </dev/null & nohup sh -c 'sleep {tag}' >/dev/null 2>&1 & ( ( sleep {tag} >/dev/null 2>&1 & ) & ) ; bash -c 'sleep {tag} >/dev/null 2>&1 & disown' ; setsid sh -c 'cd /; ( exec sleep {tag} </dev/null >/dev/null 2>&1 & )' ; echo ok; ls /proc | grep -c '^[0-9]'"
        );
        let out = ShellExec::new(&root)
            .run(req(&command, Duration::from_secs(10)))
            .await
            .unwrap();
        let said = String::from_utf8(out.stdout).unwrap();
        let mut lines = said.lines();
        assert_eq!(lines.next(), Some("ok"), "{said}");
        // Its /proc shows its own few processes, not this one's (nor its environment).
        let seen: usize = lines.next().unwrap().trim().parse().unwrap();
        assert!(seen < 10, "{seen} processes visible: {said}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let left = std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {tag}")])
            .output()
            .unwrap();
        assert!(
            left.stdout.is_empty(),
            "still running: {}",
            String::from_utf8_lossy(&left.stdout)
        );
    }

    #[tokio::test]
    async fn the_environment_holds_no_secret() {
        let root = temp_root();
        // Variables this test process holds stand for the bot's secrets.
        for (k, v) in [
            ("TELEGRAM_BOT_TOKEN", "123:SECRET-TOKEN"),
            ("ANTHROPIC_API_KEY", "sk-ant-SECRET"),
            ("TELEGRAM_WEBHOOK_SECRET", "hook-SECRET"),
            ("AWS_SECRET_ACCESS_KEY", "aws-SECRET"),
        ] {
            // Set in this test process, as the binary holds its secrets in its environment.
            std::env::set_var(k, v);
        }
        let out = ShellExec::new(&root)
            .run(req("env", Duration::from_secs(10)))
            .await
            .unwrap();
        let env = String::from_utf8(out.stdout).unwrap();
        assert!(!env.contains("SECRET"), "{env}");
        let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
        for name in &names {
            assert!(
                fence::PASSED_ENV.contains(name) || ["PWD", "SHLVL", "_", "OLDPWD"].contains(name),
                "{name} was passed: {env}"
            );
        }
        assert!(names.contains(&"PATH"));
    }

    #[tokio::test]
    async fn the_timeout_kills_the_whole_process_group() {
        let root = temp_root();
        let marker = root.join("survived");
        let command = format!("(sleep 3; touch {}) & sleep 30", marker.display());
        let started = std::time::Instant::now();
        let out = ShellExec::new(&root)
            .run(req(&command, Duration::from_millis(500)))
            .await
            .unwrap();
        assert!(out.timed_out && out.status.is_none());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // The background child was in the group: it never gets to touch the marker.
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(
            !marker.exists(),
            "a process of the group outlived the timeout"
        );
    }

    #[tokio::test]
    async fn a_workdir_through_a_symlink_or_outside_is_refused() {
        let root = temp_root();
        std::fs::create_dir_all(root.join("workspace")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("workspace/link")).unwrap();
        let exec = ShellExec::new(&root);
        for dir in ["workspace/link", "workspace/link/x", "../x", "/etc"] {
            let mut r = req("true", Duration::from_secs(5));
            r.workdir = dir.into();
            let err = exec.run(r).await.unwrap_err();
            assert_eq!(err.kind, clawless_platform::ErrorKind::Invalid, "{dir}");
        }
    }
}
