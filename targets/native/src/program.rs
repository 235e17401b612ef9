//! Programs kept running and spoken to in lines (the Exec port's `start`): an MCP server run
//! as a local program. No shell; fenced in as `exec`'s commands are (see [`crate::fence`]),
//! with the config's variables added, its processes capped in a cgroup of their own; stderr
//! into this process's log and, when it exits, into the error ([`last_words`]); killed with
//! all it started when dropped.

mod last_words;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use clawless_platform::{async_trait, PortError, Program};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::Mutex;

/// A running program.
pub struct LineProgram {
    stdin: Mutex<ChildStdin>,
    /// Its stdout, and a line read in part before a timeout.
    stdout: Mutex<(BufReader<ChildStdout>, Vec<u8>)>,
    /// Held so the program is killed (`kill_on_drop`) and reaped with the last handle.
    _child: Child,
    /// The end of its standard error, said when it has exited.
    last_words: last_words::LastWords,
    /// Its process group (its id): what it started (`sh -c`, `npx` …) goes with it.
    group: Option<u32>,
    /// The cgroup capping its processes, removed after them (dropped last).
    _pids: Option<crate::sandbox::PidsGroup>,
}

impl Drop for LineProgram {
    fn drop(&mut self) {
        let Some(pid) = self.group else {
            return;
        };
        // Gone already is fine: there is nothing left to stop.
        crate::fence::kill_group(pid);
    }
}

/// Starts `argv` in `dir` with the safe variables and `env`.
pub fn start(
    dir: &Path,
    argv: &[String],
    env: &[(String, String)],
    reach: &clawless_platform::Reach,
) -> Result<Arc<dyn Program>, PortError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(PortError::invalid("no program named"));
    };
    // A server runs as long as the bot: no CPU limit; its memory and file sizes are capped as
    // a command's, and its processes too, in a cgroup of its own where one can be made; the
    // network and directories beyond `dir` only when its config says so.
    let pids = crate::sandbox::helper()
        .is_some()
        .then(crate::sandbox::PidsGroup::new)
        .flatten();
    let also: Vec<std::path::PathBuf> = reach.paths.iter().map(Into::into).collect();
    let also = crate::sandbox::writable(&also).map_err(PortError::invalid)?;
    let limits = crate::sandbox::Limits {
        rw: dir.to_path_buf(),
        also,
        network: reach.network,
        cpu_secs: 0,
        require: false,
        cgroup: pids.as_ref().map(|g| g.path().to_path_buf()),
        deadline: None,
    };
    let mut cmd = crate::fence::command(program, args, env, &limits);
    cmd.current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| PortError::unavailable(format!("cannot start {program}: {e}")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(PortError::unavailable("the program's pipes are missing"));
    };
    Ok(Arc::new(LineProgram {
        stdin: Mutex::new(stdin),
        stdout: Mutex::new((BufReader::new(stdout), Vec::new())),
        group: child.id(),
        _child: child,
        last_words: last_words::LastWords::watch(stderr, program.clone()),
        _pids: pids,
    }))
}

fn exited(e: impl std::fmt::Display) -> PortError {
    PortError::unavailable(format!("the program has exited: {e}"))
}

impl LineProgram {
    /// `error` with the program's last words added, when it is an exit.
    async fn said(&self, error: PortError) -> PortError {
        if error.kind != clawless_platform::ErrorKind::Unavailable {
            return error;
        }
        let words = self.last_words.explain().await;
        PortError::unavailable(format!("{}{words}", error.message))
    }
}

#[async_trait]
impl Program for LineProgram {
    async fn send(&self, line: &str) -> Result<(), PortError> {
        if line.contains('\n') {
            return Err(PortError::invalid("a line may not hold a newline"));
        }
        let mut stdin = self.stdin.lock().await;
        let sent = async {
            stdin.write_all(line.as_bytes()).await.map_err(exited)?;
            stdin.write_all(b"\n").await.map_err(exited)?;
            stdin.flush().await.map_err(exited)
        };
        match sent.await {
            Err(e) => Err(self.said(e).await),
            Ok(()) => Ok(()),
        }
    }

    async fn next_line(&self, timeout: Duration, max: usize) -> Result<String, PortError> {
        let mut guard = self.stdout.lock().await;
        let (reader, partial) = &mut *guard;
        let read = async {
            loop {
                // At most what is left of `max` (and one byte more, to tell "too long").
                let room = (max + 1).saturating_sub(partial.len()) as u64;
                let n = (&mut *reader)
                    .take(room)
                    .read_until(b'\n', partial)
                    .await
                    .map_err(exited)?;
                if partial.ends_with(b"\n") {
                    partial.pop();
                    let line = std::mem::take(partial);
                    return String::from_utf8(line)
                        .map_err(|_| PortError::invalid("a line that is not UTF-8"));
                }
                if partial.len() > max {
                    partial.clear();
                    return Err(PortError::invalid(format!(
                        "a line longer than {max} bytes"
                    )));
                }
                if n == 0 {
                    return Err(exited("its output ended"));
                }
            }
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(Err(e)) => Err(self.said(e).await),
            Ok(line) => line,
            Err(_) => Err(PortError::timeout("no line in time")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use clawless_platform::ErrorKind;

    use super::*;

    fn sh(script: &str) -> Arc<dyn Program> {
        let argv = ["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()];
        start(
            &std::env::temp_dir(),
            &argv,
            &[("GREETING".into(), "hi".into())],
            &Default::default(),
        )
        .unwrap()
    }

    const WAIT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn lines_go_in_and_come_out_with_only_the_given_variables() {
        let p = sh(
            r#"echo "$GREETING ${TELEGRAM_BOT_TOKEN:-none}"; while read l; do echo "got $l"; done"#,
        );
        assert_eq!(p.next_line(WAIT, 100).await.unwrap(), "hi none");
        p.send("one").await.unwrap();
        assert_eq!(p.next_line(WAIT, 100).await.unwrap(), "got one");
        let e = p.send("two\nthree").await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
    }

    /// Whether a process whose command line holds `marker` runs (a zombie does not). By
    /// command line, not pid: a fenced program sees pids of its own namespace.
    fn running(marker: &str) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return false;
        };
        entries.flatten().any(|e| {
            let dir = e.path();
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let zombie = std::fs::read_to_string(dir.join("stat"))
                .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|s| s.starts_with(" Z")));
            !zombie && String::from_utf8_lossy(&cmdline).replace('\0', " ").trim() == marker
        })
    }

    #[tokio::test]
    async fn what_the_program_started_is_killed_with_it() {
        // Also what it detached with setsid.
        let marker = format!("sleep {}", 300_000 + std::process::id() % 50_000);
        let p = sh(&format!(
            "{marker} & setsid {marker} & echo started; while read l; do :; done"
        ));
        assert_eq!(p.next_line(WAIT, 100).await.unwrap(), "started");
        let mut waited = Duration::ZERO;
        while !running(&marker) && waited < WAIT {
            tokio::time::sleep(Duration::from_millis(20)).await;
            waited += Duration::from_millis(20);
        }
        assert!(running(&marker));
        drop(p);
        let mut waited = Duration::ZERO;
        while running(&marker) && waited < WAIT {
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += Duration::from_millis(50);
        }
        assert!(!running(&marker), "what the program started outlived it");
    }

    #[tokio::test]
    async fn a_line_half_read_at_the_timeout_is_kept() {
        let p = sh("printf 'par'; sleep 1; echo 'tial'; sleep 5");
        let e = p
            .next_line(Duration::from_millis(300), 100)
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Timeout);
        assert_eq!(p.next_line(WAIT, 100).await.unwrap(), "partial");
    }

    #[tokio::test]
    async fn a_long_line_is_refused_and_an_exit_is_unavailable() {
        let p = sh("printf '%0200d\\n' 0; echo short");
        assert_eq!(
            p.next_line(WAIT, 100).await.unwrap_err().kind,
            ErrorKind::Invalid
        );
        let p = sh("exit 0");
        assert_eq!(
            p.next_line(WAIT, 100).await.unwrap_err().kind,
            ErrorKind::Unavailable
        );
    }

    #[tokio::test]
    async fn an_exit_says_the_programs_last_words_and_the_likely_cause() {
        for (said, cause) in [
            (
                "npm error code EAI_AGAIN\nnpm error request to https://registry.npmjs.org failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org",
                "network: true",
            ),
            (
                "Error: EACCES: permission denied, open '/root/.local/lib/server.js'",
                "paths:",
            ),
        ] {
            let p = sh(&format!("printf '%s\\n' \"{said}\" >&2; exit 1"));
            let e = p.next_line(WAIT, 100).await.unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unavailable);
            let last = said.lines().last().unwrap();
            assert!(e.message.contains(last), "{}", e.message);
            assert!(e.message.contains(cause), "{}", e.message);
        }
        // Many lines, one very long: the last few kept, each cut.
        let p = sh("seq 1 100 >&2; printf '%05000d\\n' 0 >&2; exit 1");
        let e = p.next_line(WAIT, 100).await.unwrap_err();
        assert!(
            e.message.contains("«97 / 98 / 99 / 100 / 000"),
            "{}",
            e.message
        );
        assert!(e.message.len() < 1500, "{}", e.message.len());
        // Writing to it fails once the pipe is gone (perhaps not on the first write).
        let mut sent = Ok(());
        for _ in 0..3 {
            sent = p.send("x").await;
            if sent.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(sent.unwrap_err().kind, ErrorKind::Unavailable);
    }
}
