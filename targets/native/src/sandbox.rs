//! The sandbox a command (`exec`) or a local program (an MCP server's `command:`) runs in, on
//! Linux, inside the PID namespace of [`crate::fence`]. This binary starts itself as a helper
//! (`clawless __sandbox …`, a fresh single-threaded process), which fences itself in and then
//! becomes the program (`exec`), so the program and everything it starts inherit:
//!
//! - **Landlock**: read and execute in the system's directories ([`SYSTEM`]), read and write in
//!   the one directory given (the conversation's workspace) and a few devices ([`DEVICES`]);
//!   nothing else — not the data directory, the database, the config, another workspace,
//!   `/tmp`, the disks. A protected path under a system directory (the data or config directory
//!   kept in `/opt` or `/etc`) is left out: the rule is set on its siblings instead.
//!   Signals and abstract sockets reach nothing outside (kernels from 6.12).
//! - **No new privileges** (`PR_SET_NO_NEW_PRIVS`: a set-uid program gains nothing).
//! - **Resource limits**: CPU seconds, data memory, file size, no core dumps; the number of
//!   processes in a cgroup of its own ([`PidsGroup`], where one can be made: as root, cgroup
//!   v1's `pids` or a v2 root that delegates it). Not `RLIMIT_NPROC`: it counts every process
//!   of the user (a desktop session passes any useful bound) and does not bind root.
//! - **No network** unless asked: a network namespace of its own (only a loopback that is
//!   down), made by `unshare --net` in the fence.
//!
//! Where the kernel lacks Landlock (before 5.13, or not enabled) the rest still holds and the
//! log says so once; with `require`, the helper refuses to run the program instead.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
    "/dev/tty",
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
}

/// Processes and threads one command may have at once (its cgroup's `pids.max`).
pub const PROCESSES: u64 = 256;

/// A cgroup of its own that caps a command's processes at [`PROCESSES`]; removed when dropped
/// (after the command and all it started are gone).
#[derive(Debug)]
pub struct PidsGroup(PathBuf);

impl PidsGroup {
    /// A new group under the `pids` controller (cgroup v1's `/sys/fs/cgroup/pids`, or a v2
    /// root whose `cgroup.subtree_control` holds `pids`); none where one cannot be made.
    pub fn new() -> Option<PidsGroup> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let v2_pids = || {
            std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
                .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"))
        };
        let bases = [
            (Path::new("/sys/fs/cgroup/pids"), true),
            (Path::new("/sys/fs/cgroup"), false),
        ];
        for (base, v1) in bases {
            if !base.join("cgroup.procs").exists() || !(v1 || v2_pids()) {
                continue;
            }
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("clawless-{}-{n}", std::process::id()));
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            if std::fs::write(dir.join("pids.max"), PROCESSES.to_string()).is_err() {
                let _ = std::fs::remove_dir(&dir);
                continue;
            }
            return Some(PidsGroup(dir));
        }
        None
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Whether a group can be made here (probed once).
    pub fn available() -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(|| PidsGroup::new().is_some())
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        // Its processes end with their PID namespace a moment after the command's end.
        for _ in 0..40 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        tracing::warn!(group = %self.0.display(), "a command's cgroup could not be removed");
    }
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

/// The helper, when this is the `clawless` binary.
pub fn helper() -> Option<Helper> {
    Some(Helper {
        exe: EXE.get()?.clone(),
        protected: PROTECTED.read().unwrap_or_else(|e| e.into_inner()).clone(),
    })
}

/// The helper's arguments: `__sandbox --rw DIR [--protect P]… [--require] --cpu N -- program
/// args…`.
pub fn args(helper: &Helper, limits: &Limits, program: &str, args: &[String]) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["__sandbox".into(), "--rw".into(), limits.rw.clone().into()];
    for p in &limits.also {
        out.push("--rw".into());
        out.push(p.clone().into());
    }
    for p in &helper.protected {
        out.push("--protect".into());
        out.push(p.clone().into());
    }
    if limits.require {
        out.push("--require".into());
    }
    if let Some(group) = &limits.cgroup {
        out.push("--cgroup".into());
        out.push(group.clone().into());
    }
    out.push("--cpu".into());
    out.push(limits.cpu_secs.to_string().into());
    out.push("--".into());
    out.push(program.into());
    out.extend(args.iter().map(OsString::from));
    out
}

/// What the helper was asked, read back from its arguments (after `__sandbox`).
#[derive(Debug, Default, PartialEq)]
struct Asked {
    rw: Vec<PathBuf>,
    protect: Vec<PathBuf>,
    require: bool,
    cpu: u64,
    cgroup: Option<PathBuf>,
    program: Vec<OsString>,
}

fn parse(args: &[OsString]) -> Result<Asked, String> {
    let mut asked = Asked::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.to_str() {
            Some("--rw") => asked.rw.push(value("--rw")?.into()),
            Some("--protect") => asked.protect.push(value("--protect")?.into()),
            Some("--require") => asked.require = true,
            Some("--cgroup") => asked.cgroup = Some(value("--cgroup")?.into()),
            Some("--cpu") => {
                asked.cpu = value("--cpu")?
                    .to_str()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--cpu needs a number of seconds")?
            }
            Some("--") => {
                asked.program = it.cloned().collect();
                break;
            }
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    if asked.program.is_empty() {
        return Err("no program after --".into());
    }
    Ok(asked)
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

/// The helper's main (`clawless __sandbox …`): fences this process in and becomes the program.
/// Returns only on failure, with the exit code to end with (126: it could not be sandboxed
/// or started).
pub fn main(args: &[OsString]) -> u8 {
    let asked = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("clawless sandbox: {e}");
            return 126;
        }
    };
    if let Err(e) = limit(asked.cpu) {
        eprintln!("clawless sandbox: resource limits: {e}");
        return 126;
    }
    // Joined before Landlock, which would not let it write there; everything it starts
    // stays in the group.
    if let Some(group) = &asked.cgroup {
        let me = std::process::id().to_string();
        if let Err(e) = std::fs::write(group.join("cgroup.procs"), me) {
            eprintln!("clawless sandbox: joining {}: {e}", group.display());
            return 126;
        }
    }
    match restrict(&asked) {
        Ok(true) => {}
        Ok(false) if asked.require => {
            eprintln!(
                "clawless sandbox: this kernel does not enforce Landlock fully, and the sandbox is required (sandbox.require)"
            );
            return 126;
        }
        Ok(false) => {}
        Err(e) => {
            eprintln!("clawless sandbox: {e}");
            return 126;
        }
    }
    use std::os::unix::process::CommandExt;
    let (program, rest) = match asked.program.split_first() {
        Some(p) => p,
        None => return 126,
    };
    let err = std::process::Command::new(program).args(rest).exec();
    eprintln!("clawless sandbox: cannot start {program:?}: {err}");
    126
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
    let read = readable(SYSTEM, &asked.protect);
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
/// helper with `require` (false without a helper).
pub fn enforced() -> bool {
    static ENFORCED: OnceLock<bool> = OnceLock::new();
    *ENFORCED.get_or_init(|| {
        let Some(helper) = helper() else {
            return false;
        };
        let limits = Limits {
            rw: std::env::temp_dir(),
            also: Vec::new(),
            network: false,
            cpu_secs: 5,
            require: true,
            cgroup: None,
        };
        let works = std::process::Command::new(&helper.exe)
            .args(args(&helper, &limits, "true", &[]))
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !works {
            tracing::warn!(
                "commands run without Landlock (this kernel lacks it or it is not enabled): they can read what the bot's user can"
            );
        }
        works
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn arguments_read_back_as_written() {
        let helper = Helper {
            exe: "/x/clawless".into(),
            protected: vec!["/etc/clawless".into()],
        };
        let limits = Limits {
            rw: "/data/files/workspace/a".into(),
            also: vec!["/srv/shared".into()],
            network: false,
            cpu_secs: 31,
            require: true,
            cgroup: Some("/sys/fs/cgroup/pids/clawless-1-0".into()),
        };
        let written = args(
            &helper,
            &limits,
            "/bin/sh",
            &["-c".into(), "echo --rw".into()],
        );
        assert_eq!(written[0], "__sandbox");
        let asked = parse(&written[1..]).unwrap();
        assert_eq!(
            asked,
            Asked {
                rw: vec![limits.rw.clone(), "/srv/shared".into()],
                protect: vec!["/etc/clawless".into()],
                require: true,
                cpu: 31,
                cgroup: limits.cgroup.clone(),
                program: vec!["/bin/sh".into(), "-c".into(), "echo --rw".into()],
            }
        );
        assert!(parse(&["--rw".into()]).is_err());
        assert!(parse(&["--rw".into(), "/a".into()]).is_err(), "no program");
        assert!(parse(&["--bogus".into(), "--".into(), "true".into()]).is_err());
    }

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
