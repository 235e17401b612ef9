//! Shared helpers for the native tests: temp dirs, the binary as a child process, raw sockets.

#![allow(dead_code)]

pub mod bot;
pub mod raw;
pub mod shells;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh empty directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "clawless-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
