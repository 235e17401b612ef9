//! How the commands (`exec`) and programs (local MCP servers) the assistant runs are fenced in
//! on this machine. Each runs in a PID namespace of its own (util-linux `unshare --pid --fork
//! --kill-child --mount-proc`, with a user namespace when this process is not root), so
//! everything it starts — also what detaches with `setsid` or a double fork — ends when it
//! ends or is killed, and its `/proc` shows only its own processes (none of this process's
//! memory or environment). Always: a scrubbed environment ([`PASSED_ENV`] and what the caller
//! adds), and a process group of its own, killed whole at the end. Where no namespace can be
//! made (`unshare` missing, or refused inside a container), the process group alone, said
//! once in the log.

use std::process::Stdio;
use std::sync::OnceLock;

/// The variables a command gets, when this process has them. Everything else (bot tokens, API
/// keys, the webhook secret, cloud credentials) stays out.
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "TMPDIR",
];

/// What fences a child in here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// A PID namespace (and a mount namespace for its `/proc`); `user`: inside a user
    /// namespace too, as an unprivileged process needs.
    Namespace { user: bool },
    /// Its process group only: a `setsid` escapes it.
    Group,
}

/// `unshare`'s arguments before the program, for a namespace fence.
fn unshare_args(user: bool) -> Vec<&'static str> {
    let mut args = vec!["--pid", "--fork", "--kill-child", "--mount-proc"];
    if user {
        args.extend(["--user", "--map-root-user"]);
    }
    args.push("--");
    args
}

/// The fence this machine allows, probed once (a run of `true` in each kind, the cheapest
/// first).
pub fn fence() -> Fence {
    static FENCE: OnceLock<Fence> = OnceLock::new();
    *FENCE.get_or_init(|| {
        let root = rustix::process::geteuid().is_root();
        let tries: &[bool] = if root { &[false, true] } else { &[true] };
        for &user in tries {
            let works = std::process::Command::new("unshare")
                .args(unshare_args(user))
                .arg("true")
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if works {
                return Fence::Namespace { user };
            }
        }
        tracing::warn!(
            "commands run without a PID namespace (`unshare` is missing or refused here): what a command detaches with setsid can outlive it"
        );
        Fence::Group
    })
}

/// `program args` fenced in: under `unshare` when the fence is a namespace, with only the
/// passed variables and `env`, in a process group of its own, killed when dropped. The caller
/// sets the directory and the standard streams.
pub fn command(
    program: &str,
    args: &[String],
    env: &[(String, String)],
) -> tokio::process::Command {
    let mut cmd = match fence() {
        Fence::Namespace { user } => {
            let mut cmd = tokio::process::Command::new("unshare");
            cmd.args(unshare_args(user)).arg(program);
            cmd
        }
        Fence::Group => tokio::process::Command::new(program),
    };
    cmd.args(args)
        .env_clear()
        .envs(
            PASSED_ENV
                .iter()
                .filter_map(|k| Some((*k, std::env::var_os(k)?))),
        )
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

/// Kills the process group `pgid` (the fenced child's id); gone already is fine. With a
/// namespace fence, `unshare` dying takes its namespace, and all in it, along.
pub fn kill_group(pgid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::Kill);
    }
}
