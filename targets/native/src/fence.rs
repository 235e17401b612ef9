//! How the commands (`exec`) and programs (local MCP servers) the assistant runs are fenced in
//! on this machine. Each runs in PID, mount and UTS namespaces of its own (util-linux `unshare
//! --pid --fork --kill-child --mount-proc --uts`, with a user namespace when this process is
//! not root), so everything it starts — also what detaches with `setsid` or a double fork —
//! ends when it ends or is killed, its `/proc` shows only its own processes (none of this
//! process's memory or environment), and its mounts and host name are its own; without
//! network unless asked (a network namespace of its own); and, started through this binary,
//! in the sandbox of [`crate::sandbox`] (a read-only system, no capabilities, no terminal,
//! Landlock, resource limits, a deadline it keeps itself, its end when the bot is gone).
//! Always: a scrubbed environment ([`PASSED_ENV`] and what the caller adds), and a process
//! group of its own, killed whole at the end. Where no namespace can be made (`unshare`
//! missing, or refused inside a container), the process group alone, said once in the log.

use std::process::Stdio;
use std::sync::OnceLock;

use crate::sandbox::{self, Limits};

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

/// `unshare`'s arguments before the program, for a namespace fence; `network`: keep this
/// machine's network (else a namespace of its own, with only a loopback that is down).
fn unshare_args(user: bool, network: bool) -> Vec<&'static str> {
    let mut args = vec!["--pid", "--fork", "--kill-child", "--mount-proc", "--uts"];
    if user {
        args.extend(["--user", "--map-root-user"]);
    }
    if !network {
        args.push("--net");
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
                .args(unshare_args(user, false))
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

/// The whole command line of `program args` fenced in: under `unshare` when the fence is a
/// namespace, through the helper in the sandbox of `limits` when this is the `clawless`
/// binary ([`crate::sandbox`]).
pub fn argv(program: &str, args: &[String], limits: &Limits) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = Vec::new();
    if let Fence::Namespace { user } = fence() {
        out.push("unshare".into());
        out.extend(
            unshare_args(user, limits.network)
                .into_iter()
                .map(Into::into),
        );
    }
    match sandbox::helper() {
        Some(helper) => {
            out.push(helper.exe.clone().into());
            let view = matches!(fence(), Fence::Namespace { .. });
            out.extend(sandbox::args(&helper, limits, view, program, args));
        }
        None => {
            out.push(program.into());
            out.extend(args.iter().map(Into::into));
        }
    }
    out
}

/// [`argv`] as a command, with only the passed variables and `env` (`HOME` and `TMPDIR` its
/// writable directory when sandboxed), in a process group of its own, killed when dropped.
/// The caller sets the directory and the standard streams. Its standard output must be read
/// for as long as it runs: the sandbox ends a command nobody reads any more.
pub fn command(
    program: &str,
    args: &[String],
    env: &[(String, String)],
    limits: &Limits,
) -> tokio::process::Command {
    let argv = argv(program, args, limits);
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(
            PASSED_ENV
                .iter()
                .filter_map(|k| Some((*k, std::env::var_os(k)?))),
        )
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .kill_on_drop(true);
    if sandbox::helper().is_some() {
        cmd.env("HOME", &limits.rw).env("TMPDIR", &limits.rw);
    }
    cmd
}

/// A sandbox made ahead of its command (the helper run as [`sandbox::SPARE`], in the fence's
/// namespaces, without the network unless `network`, in the cgroup `group` when given): the
/// namespaces, the helper's start and joining the cgroup, most of a short command's time,
/// are paid before it is asked for. It waits for its
/// [`request`] on its standard input (piped, like its output) and ends when that closes
/// empty — the bot gone before asking. None without the helper (this is not the `clawless`
/// binary). Spawned with the passed variables only, in a process group of its own, killed
/// when dropped.
pub fn spare(network: bool, group: Option<&std::path::Path>) -> Option<tokio::process::Command> {
    let helper = sandbox::helper()?;
    let mut argv: Vec<std::ffi::OsString> = Vec::new();
    if let Fence::Namespace { user } = fence() {
        argv.push("unshare".into());
        argv.extend(unshare_args(user, network).into_iter().map(Into::into));
    }
    argv.push(helper.exe.into());
    argv.push("__sandbox".into());
    argv.push(sandbox::SPARE.into());
    if let Some(group) = group {
        argv.push("--cgroup".into());
        argv.push(group.into());
    }
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(
            PASSED_ENV
                .iter()
                .filter_map(|k| Some((*k, std::env::var_os(k)?))),
        )
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    Some(cmd)
}

/// What a [`spare`] made with `limits.network` is sent to run `program args` in `dir` under
/// `limits`, with the passed variables, `env`, and `HOME` and `TMPDIR` its writable
/// directory. Refused with a sentence when no program could be given it (a NUL byte, or over
/// [`sandbox::MAX_REQUEST`]), or without the helper.
pub fn request(
    program: &str,
    args: &[String],
    env: &[(String, String)],
    dir: &std::path::Path,
    limits: &Limits,
) -> Result<Vec<u8>, String> {
    let helper = sandbox::helper().ok_or("no sandbox helper (not the clawless binary)")?;
    let view = matches!(fence(), Fence::Namespace { .. });
    let mut all: Vec<(std::ffi::OsString, std::ffi::OsString)> =
        env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    all.push(("HOME".into(), limits.rw.clone().into()));
    all.push(("TMPDIR".into(), limits.rw.clone().into()));
    sandbox::request(&helper, limits, view, dir, &all, program, args)
}

/// What this machine lacks of the sandbox, for a command without the network unless
/// `network` (empty: all of it holds), each part named. The first call probes and logs what
/// is missing.
pub fn missing(network: bool) -> Vec<String> {
    let mut lacks = Vec::new();
    if fence() == Fence::Group {
        lacks.push("a PID namespace (unshare)".to_owned());
        lacks.push("a read-only view of the rest of the system (a mount namespace)".to_owned());
        if !network {
            lacks.push("a network namespace".to_owned());
        }
    }
    if let Some(why) = sandbox::refusal() {
        let lower = why.to_lowercase();
        lacks.push(if lower.contains("landlock") {
            "Landlock".to_owned()
        } else if lower.contains("seccomp") {
            format!("a seccomp filter (no Unix sockets without the network): {why}")
        } else if lower.contains("capabilit") {
            format!("dropping every capability: {why}")
        } else {
            format!("the sandbox helper: {why}")
        });
    } else if let Some(why) = whole_refusal() {
        lacks.push(format!("the sandbox in its namespaces: {why}"));
    }
    if !sandbox::PidsGroup::available() {
        lacks.push("a cap on its processes (a pids cgroup)".to_owned());
    }
    lacks
}

/// Why `true` did not run in the whole fence (namespaces, the read-only view and the rest),
/// probed once; none when it ran, or when there is no namespace or no helper to try.
fn whole_refusal() -> Option<&'static str> {
    static REFUSAL: OnceLock<Option<String>> = OnceLock::new();
    REFUSAL
        .get_or_init(|| {
            if fence() == Fence::Group || sandbox::helper().is_none() {
                return None;
            }
            let dir = std::env::temp_dir();
            let limits = Limits {
                rw: dir.clone(),
                also: Vec::new(),
                network: false,
                cpu_secs: 5,
                require: true,
                cgroup: None,
                deadline: Some(std::time::Duration::from_secs(30)),
            };
            let argv = argv("true", &[], &limits);
            let out = std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .current_dir(&dir)
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output();
            match out {
                Ok(o) if o.status.success() => None,
                Ok(o) => Some(
                    String::from_utf8_lossy(&o.stderr)
                        .trim()
                        .trim_start_matches("clawless sandbox: ")
                        .chars()
                        .take(300)
                        .collect(),
                ),
                Err(e) => Some(format!("unshare did not start: {e}")),
            }
        })
        .as_deref()
}

/// The `doctor` line on this machine's sandbox for commands: all of it, or what it lacks.
pub fn check() -> clawless_core::doctor::Check {
    use clawless_core::doctor::{Check, Status};
    let lacks = missing(false);
    let (status, detail) = match lacks.is_empty() {
        true => (
            Status::Ok,
            "commands (exec) and local programs run under Landlock (their workspace only), in PID, mount and network namespaces of their own (the system read-only, no Unix sockets without the network), with no capabilities, no terminal, resource limits and a deadline the sandbox keeps itself".to_owned(),
        ),
        false => (
            Status::Warn,
            format!(
                "commands (exec) run here without {}: they can reach more than their workspace; set `sandbox: {{require: true}}` on an agent to refuse them instead",
                lacks.join("; ")
            ),
        ),
    };
    Check {
        name: "sandbox".into(),
        status,
        detail,
    }
}

/// Kills the process group `pgid` (the fenced child's id); gone already is fine. With a
/// namespace fence, `unshare` dying takes its namespace, and all in it, along.
pub fn kill_group(pgid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
