//! Shared helpers for the native tests: temp dirs, the binary as a child process, raw sockets.

#![allow(dead_code)]

pub mod bot;
pub mod raw;
pub mod shells;

use std::path::PathBuf;

/// A fresh empty directory for one test (see `clawless_testkit::scratch`: swept once this
/// run has ended).
pub fn temp_dir(tag: &str) -> PathBuf {
    clawless_testkit::scratch::dir(tag)
}
