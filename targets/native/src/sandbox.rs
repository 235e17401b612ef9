//! The sandbox a command (`exec`) or a local program (an MCP server's `command:`) runs in, on
//! Linux, inside the namespaces of [`crate::fence`]. This binary starts itself as a helper
//! (`clawless __sandbox …`, a fresh single-threaded process), which fences itself in, starts
//! the program and supervises it ([`supervise`]), so the program and everything it starts
//! inherit:
//!
//! - **A read-only system** ([`view`]): in its mount namespace every mount is read-only but
//!   its workspace, so not even root's commands change a file's mode, owner, attributes or
//!   times outside it.
//! - **No capabilities** ([`seal`]): none held, none in the bounding set, so root's commands
//!   cannot `chown`, `mknod`, set the host name, read the kernel log or override file modes.
//! - **No terminal**: a session of its own, without the bot's controlling terminal.
//! - **Landlock**: read and execute in the system's directories ([`SYSTEM`], less
//!   [`SECRET_FILES`]), read and write in the one directory given (the conversation's
//!   workspace) and a few devices ([`DEVICES`]); nothing else — not the data directory, the
//!   database, the config, another workspace, `/tmp`, the disks. A protected path under a
//!   system directory (the data or config directory kept in `/opt` or `/etc`) is left out:
//!   the rule is set on its siblings instead. Signals and abstract sockets reach nothing
//!   outside (kernels from 6.12).
//! - **No new privileges** (`PR_SET_NO_NEW_PRIVS`: a set-uid program gains nothing).
//! - **Resource limits**: CPU seconds, data memory, file size, no core dumps; the number of
//!   processes in a cgroup of its own ([`PidsGroup`], where one can be made: as root, cgroup
//!   v1's `pids` or a v2 root that delegates it). Not `RLIMIT_NPROC`: it counts every process
//!   of the user (a desktop session passes any useful bound) and does not bind root.
//! - **A deadline it keeps itself**, and its end when the bot is gone ([`supervise`]).
//! - **No network** unless asked: a network namespace of its own (only a loopback that is
//!   down), made by `unshare --net` in the fence, and no Unix socket nor io_uring (a seccomp
//!   filter): a socket file is reached by its path, past the network namespace.
//!
//! Where the kernel lacks Landlock (before 5.13, or not enabled) the rest still holds and the
//! log says so once; with `require`, the helper refuses to run the program instead. Any other
//! part that fails stops the helper (exit 126): nothing runs half-sandboxed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

mod argv;
mod cgroup;
mod seal;
mod supervise;
mod view;

pub use argv::{args, request, MAX_REQUEST, SPARE};
use argv::{parse, split, Asked};
pub use cgroup::{sweep, PidsGroup, PROCESSES};
pub use supervise::{DEADLINE, ORPHANED};

/// Directories read (and executed from), not written.
pub const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
];
/// Devices read and written.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];
/// Files of the system no command reads, though they lie in [`SYSTEM`] and root owns them
/// (root's commands have no capability, but an owner reads a file of mode 0640).
pub const SECRET_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssl/private",
];

/// The bounds of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The directory it may write (and read).
    pub rw: PathBuf,
    /// More directories it may write and read (a local program's `paths:`).
    pub also: Vec<PathBuf>,
    /// May it reach the network.
    pub network: bool,
    /// CPU seconds (0: no limit, for a program that runs as long as the bot).
    pub cpu_secs: u64,
    /// Refuse to run without the whole sandbox.
    pub require: bool,
    /// The cgroup capping its processes, when one was made ([`PidsGroup`]).
    pub cgroup: Option<PathBuf>,
    /// When the sandbox itself ends it (none: as long as it runs).
    pub deadline: Option<Duration>,
}

/// Data memory (heap and anonymous mappings), bytes.
pub const MEMORY: u64 = 1 << 30;
/// The largest file it may write, bytes.
pub const FILE_SIZE: u64 = 256 << 20;

/// Where the helper is and what it must never open.
#[derive(Debug, Clone)]
pub struct Helper {
    pub exe: PathBuf,
    pub protected: Vec<PathBuf>,
}

static EXE: OnceLock<PathBuf> = OnceLock::new();
static PROTECTED: std::sync::RwLock<Vec<PathBuf>> = std::sync::RwLock::new(Vec::new());

/// Names the helper: the running `clawless` binary, set by its `main` (tests of the library
/// run without one: their commands are fenced, not sandboxed).
pub fn set_exe(exe: PathBuf) {
    let _ = EXE.set(exe);
}

/// Adds paths no command may read (the data and config directories, where `.env` is).
pub fn protect(paths: impl IntoIterator<Item = PathBuf>) {
    let mut list = PROTECTED.write().unwrap_or_else(|e| e.into_inner());
    for p in paths {
        let p = std::fs::canonicalize(&p).unwrap_or(p);
        if !list.contains(&p) {
            list.push(p);
        }
    }
}

/// The directories a local program's `paths:` name, checked: each must be an existing
/// directory and may neither be nor hold a protected path (the bot's data or config, the
/// directory of its `.env`), nor lie inside the data or config directory: the sandbox cannot
/// give a program one of those and still keep them. (Inside the directory the bot was started
/// from is fine: what is kept there is its `.env`, beside, not inside.) Each refusal names
/// the path and why.
pub fn writable(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| std::fs::canonicalize(d).ok());
    let protected = PROTECTED.read().unwrap_or_else(|e| e.into_inner()).clone();
    paths
        .iter()
        .map(|p| {
            let real = std::fs::canonicalize(p)
                .map_err(|e| format!("paths: {} cannot be used: {e}", p.display()))?;
            if !real.is_dir() {
                return Err(format!("paths: {} is not a directory", p.display()));
            }
            let inside = |q: &PathBuf| real.starts_with(q) && Some(q) != cwd.as_ref();
            if let Some(q) = protected
                .iter()
                .find(|q| q.starts_with(&real) || inside(q))
            {
                return Err(format!(
                    "paths: {} would open the bot's own {} to the program: name a directory apart from the bot's data and config",
                    p.display(),
                    q.display()
                ));
            }
            Ok(real)
        })
        .collect()
}

/// The helper, when this is the `clawless` binary.
pub fn helper() -> Option<Helper> {
    Some(Helper {
        exe: EXE.get()?.clone(),
        protected: PROTECTED.read().unwrap_or_else(|e| e.into_inner()).clone(),
    })
}

/// The paths to give read access to: each of `roots`, or, where a protected path lies
/// inside one, its parts that hold no protected path (depth-bounded).
pub fn readable(roots: &[&str], protected: &[PathBuf]) -> Vec<PathBuf> {
    fn walk(dir: &Path, protected: &[PathBuf], depth: usize, out: &mut Vec<PathBuf>) {
        if protected.iter().any(|p| p == dir) {
            return;
        }
        if !protected.iter().any(|p| p.starts_with(dir)) {
            out.push(dir.to_path_buf());
            return;
        }
        // A protected path deeper down: give the siblings on the way to it.
        if depth == 0 {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten().take(10_000) {
            walk(&entry.path(), protected, depth - 1, out);
        }
    }
    let mut out = Vec::new();
    for root in roots {
        walk(Path::new(root), protected, 8, &mut out);
    }
    out
}

/// The helper's main (`clawless __sandbox …`): fences this process in, then runs the program
/// under its supervision ([`supervise`]). Returns the exit code to end with: the program's,
/// 124 past the deadline, 125 when the bot is gone, 126 when it could not be sandboxed or
/// started, 127 when the program does not exist. A spare (`__sandbox --spare`, made ahead in
/// its namespaces) first reads what to run from its standard input ([`request`]); the bot
/// gone before asking, it ends with 0.
pub fn main(args: &[OsString]) -> u8 {
    let asked = match args {
        [spare, rest @ ..] if spare == SPARE => match spare_request(rest) {
            Ok(Some(asked)) => asked,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("clawless sandbox: {e}");
                return 126;
            }
        },
        _ => match parse(args) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("clawless sandbox: {e}");
                return 126;
            }
        },
    };
    if let Some(dir) = &asked.dir {
        if let Err(e) = std::env::set_current_dir(dir) {
            eprintln!("clawless sandbox: entering {}: {e}", dir.display());
            return 126;
        }
    }
    match fence_in(&asked) {
        Ok(()) => supervise::run(&asked),
        Err(e) => {
            eprintln!("clawless sandbox: {e}");
            126
        }
    }
}

/// A spare's start (`--spare [--cgroup G]`): it joins its cgroup at once — moving a process
/// between cgroups waits out an RCU grace period when none was moved lately, 10 – 20 ms on
/// an idle machine, paid here ahead of the command — then waits for its request.
fn spare_request(args: &[OsString]) -> Result<Option<Asked>, String> {
    match args {
        [] => {}
        [flag, group] if flag == "--cgroup" => join(Path::new(group))?,
        _ => return Err(format!("unknown arguments {args:?} after {SPARE}")),
    }
    read_request()
}

/// Moves this process (and so all it starts) into `group`.
fn join(group: &Path) -> Result<(), String> {
    let me = std::process::id().to_string();
    std::fs::write(group.join("cgroup.procs"), me)
        .map_err(|e| format!("joining {}: {e}", group.display()))
}

/// A spare's request, read from standard input to its end (bounded); none when empty.
fn read_request() -> Result<Option<Asked>, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_REQUEST as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the request: {e}"))?;
    if bytes.len() > MAX_REQUEST {
        return Err(format!("the request is over {MAX_REQUEST} bytes"));
    }
    let args = split(&bytes);
    if args.is_empty() {
        return Ok(None);
    }
    let mut asked = parse(&args)?;
    asked.spare = true;
    Ok(Some(asked))
}

/// Every part of the sandbox, in the order each needs: the limits and the cgroup while this
/// process may still write there, the mount view while it may still mount, then no
/// capabilities, no new privileges, Landlock, and the seccomp filter last.
fn fence_in(asked: &Asked) -> Result<(), String> {
    limit(asked.cpu).map_err(|e| format!("resource limits: {e}"))?;
    // Joined before Landlock, which would not let it write there; everything it starts
    // stays in the group.
    if let Some(group) = &asked.cgroup {
        join(group)?;
    }
    // A session of its own: no controlling terminal (the bot's, when started from a shell),
    // so nothing it runs can type into it. Refused only to a process-group leader (the
    // process-group fence), where Landlock still keeps /dev/tty closed.
    let _ = rustix::process::setsid();
    if asked.view {
        view::seal(&asked.rw, SECRET_FILES)?;
    }
    seal::drop_capabilities()?;
    // Not traced or read through /proc by what it runs (it holds nothing secret, but it is
    // the namespace's init).
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    match restrict(asked)? {
        true => {}
        false if asked.require => {
            return Err(
                "this kernel does not enforce Landlock fully, and the sandbox is required (sandbox.require)".into(),
            )
        }
        false => {}
    }
    if asked.no_network {
        no_unix_sockets()?;
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn no_unix_sockets() -> Result<(), String> {
    seal::no_unix_sockets()
}

#[cfg(not(target_os = "linux"))]
fn no_unix_sockets() -> Result<(), String> {
    Ok(())
}

/// CPU time, data memory, file size; no core dumps.
fn limit(cpu: u64) -> std::io::Result<()> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    let cpu = (cpu > 0).then_some((Resource::Cpu, cpu));
    for (resource, value) in cpu.into_iter().chain([
        (Resource::Data, MEMORY),
        (Resource::Fsize, FILE_SIZE),
        (Resource::Core, 0),
    ]) {
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )?;
    }
    Ok(())
}

/// No new privileges, then the Landlock rules; says whether the kernel enforced them fully.
#[cfg(target_os = "linux")]
fn restrict(asked: &Asked) -> Result<bool, String> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, ABI,
    };
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
    if asked.rw.is_empty() {
        return Err("--rw is required".into());
    }
    let abi = ABI::V6;
    let mut protect = asked.protect.clone();
    // Without a mount view to hide them in, Landlock leaves them out (at the cost of a rule
    // for each of their siblings in /etc).
    if !asked.view {
        protect.extend(SECRET_FILES.iter().map(PathBuf::from));
    }
    let read = readable(SYSTEM, &protect);
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(&read, AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(&asked.rw, AccessFs::from_all(abi))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("landlock: {e}"))?;
    Ok(status.ruleset == RulesetStatus::FullyEnforced)
}

#[cfg(not(target_os = "linux"))]
fn restrict(_: &Asked) -> Result<bool, String> {
    Ok(false)
}

/// Whether this kernel enforces the sandbox fully, probed once by running `true` through the
/// helper with `require` and without the network (false without a helper).
pub fn enforced() -> bool {
    refusal().is_none()
}

/// Why the helper refused to run `true` with `require` and without the network (what this
/// machine lacks, in the helper's words), probed once; none when it ran (or there is no
/// helper: nothing to say of a sandbox that is not used).
pub fn refusal() -> Option<&'static str> {
    static REFUSAL: OnceLock<Option<String>> = OnceLock::new();
    REFUSAL
        .get_or_init(|| {
            let helper = helper()?;
            let limits = Limits {
                rw: std::env::temp_dir(),
                also: Vec::new(),
                network: false,
                cpu_secs: 5,
                require: true,
                cgroup: None,
                deadline: None,
            };
            let out = std::process::Command::new(&helper.exe)
                .args(args(&helper, &limits, false, "true", &[]))
                .env_clear()
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .output();
            let refusal = match out {
                Ok(o) if o.status.success() => return None,
                Ok(o) => String::from_utf8_lossy(&o.stderr)
                    .trim()
                    .trim_start_matches("clawless sandbox: ")
                    .chars()
                    .take(300)
                    .collect(),
                Err(e) => format!("the helper did not start: {e}"),
            };
            tracing::warn!(
                refusal = %refusal,
                "commands run without the whole sandbox here: they can reach what the bot's user can"
            );
            Some(refusal)
        })
        .as_deref()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_protected_path_inside_a_system_directory_is_left_out_and_its_siblings_kept() {
        let root = std::env::temp_dir().join(format!("clawless-readable-{}", std::process::id()));
        let secret = root.join("opt/clawless/data");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::create_dir_all(root.join("opt/clawless/bin")).unwrap();
        std::fs::create_dir_all(root.join("opt/other")).unwrap();
        let opt = root.join("opt");
        let got = readable(&[opt.to_str().unwrap()], std::slice::from_ref(&secret));
        let mut got: Vec<String> = got
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["opt/clawless/bin", "opt/other"]);
        assert_eq!(
            readable(&[opt.to_str().unwrap()], &[]),
            vec![opt.clone()],
            "nothing protected: the directory itself"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
