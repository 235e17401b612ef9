//! The cgroup that caps a command's processes ([`PidsGroup`]), and the sweep at start of the
//! groups an earlier bot left behind ([`sweep`]): a bot killed with `kill -9` never removes
//! its groups, and a process of an older release may still run in one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Processes and threads one command may have at once (its cgroup's `pids.max`).
pub const PROCESSES: u64 = 256;

/// Where groups are made: cgroup v1's `pids` hierarchy, else a v2 root.
const BASES: [(&str, bool); 2] = [("/sys/fs/cgroup/pids", true), ("/sys/fs/cgroup", false)];
/// A group's name: this prefix, the bot's pid, a counter.
const PREFIX: &str = "clawless-";

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
        for (base, v1) in BASES {
            let base = Path::new(base);
            if !base.join("cgroup.procs").exists() || !(v1 || v2_pids()) {
                continue;
            }
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("{PREFIX}{}-{n}", std::process::id()));
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
        if !remove(&self.0) {
            tracing::warn!(group = %self.0.display(), "a command's cgroup could not be removed");
        }
    }
}

/// Removes an empty group, waiting a moment for its last processes to be reaped (they end
/// with their PID namespace a moment after the command's end).
fn remove(dir: &Path) -> bool {
    for _ in 0..40 {
        if std::fs::remove_dir(dir).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    false
}

/// Ends what runs in the groups of bots that are no longer running (their pid in the group's
/// name names no process) and removes those groups; says how many it removed. Groups of a
/// running bot, this one included, are left alone.
pub fn sweep() -> usize {
    let mut removed = 0;
    for (base, _) in BASES {
        let Ok(entries) = std::fs::read_dir(base) else {
            continue;
        };
        for entry in entries.flatten().take(10_000) {
            let name = entry.file_name();
            let Some(owner) = name
                .to_str()
                .and_then(|n| n.strip_prefix(PREFIX))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if owner == std::process::id() || Path::new(&format!("/proc/{owner}")).exists() {
                continue;
            }
            let dir = entry.path();
            kill_members(&dir);
            if remove(&dir) {
                removed += 1;
            } else {
                tracing::warn!(group = %dir.display(), "an earlier bot's cgroup could not be removed");
            }
        }
    }
    if removed > 0 {
        tracing::info!(groups = removed, "removed the cgroups an earlier bot left");
    }
    removed
}

/// Kills every process in the group: cgroup v2's `cgroup.kill`, else each listed pid.
fn kill_members(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs.lines().take(100_000) {
        if let Some(pid) = pid
            .trim()
            .parse()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}
