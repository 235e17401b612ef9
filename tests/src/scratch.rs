//! Scratch directories for tests: each under one parent per test process
//! (`clawless-tests-<pid>` in the system's temp dir), so nothing a run writes is scattered
//! over `/tmp`. The first call in a process removes the parents of test processes that have
//! ended: whatever a run leaves (a failed test's data kept to look at, a run killed midway)
//! is gone once the next run starts, and a directory in use is never touched (its process is
//! alive). Where the system has no `/proc` to tell, nothing is swept.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

const PREFIX: &str = "clawless-tests-";

/// This process's parent of its scratch directories.
pub fn parent() -> PathBuf {
    std::env::temp_dir().join(format!("{PREFIX}{}", std::process::id()))
}

/// A fresh empty directory named after `tag`, under [`parent`].
pub fn dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    static SWEPT: Once = Once::new();
    SWEPT.call_once(sweep_ended);
    let dir = parent().join(format!("{tag}-{}", N.fetch_add(1, Ordering::SeqCst)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// Removes the parents left by test processes that have ended.
fn sweep_ended() {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            // Another user's, or half gone already: left as it is.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_is_fresh_and_an_ended_runs_parent_is_swept() {
        // A parent no live process owns (pid numbers stop well below u32::MAX).
        let ended = std::env::temp_dir().join(format!("{PREFIX}{}", u32::MAX - 1));
        std::fs::create_dir_all(ended.join("e2e-0")).unwrap();
        let mine = dir("scratch");
        assert!(mine.starts_with(parent()));
        assert_eq!(std::fs::read_dir(&mine).unwrap().count(), 0);
        sweep_ended();
        assert!(!ended.exists(), "an ended run's parent is removed");
        assert_ne!(dir("scratch"), mine, "each call a new directory");
        assert!(mine.exists(), "this run's own are kept");
    }
}
