//! Tidy checks over the repository: every Rust file opens with a `//!` line saying what lives
//! there, and `clawless-core` depends on no runtime crate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | "node_modules" | "data" | "build" | ".git"
            ) {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["core", "platform", "targets", "tests", "fuzz"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} files", files.len());
    let missing: Vec<_> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty() && !l.starts_with("#!["))
                .unwrap_or("");
            // Unit-test files (`tests.rs` beside their module) are documented by it.
            !first.starts_with("//!") && !f.ends_with("tests.rs")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! opening line: {missing:?}"
    );
}

#[test]
fn core_depends_on_no_runtime_crate() {
    let manifest = std::fs::read_to_string(root().join("core/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for banned in [
        "tokio", "reqwest", "worker", "aws", "libsql", "lambda", "hyper", "axum",
    ] {
        assert!(
            !deps.contains(banned),
            "core/Cargo.toml [dependencies] names {banned}"
        );
    }
}

#[test]
fn core_never_reads_env_or_the_clock_sleeps_or_spawns() {
    let mut files = Vec::new();
    rust_files(&root().join("core/src"), &mut files);
    assert!(files.len() > 10, "found only {} files", files.len());
    for f in files {
        // Code only: comments may name what core avoids.
        let text: String = std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for banned in [
            "std::env",
            "env::var",
            "SystemTime",
            "Instant::now",
            "thread::",
            "tokio",
        ] {
            assert!(
                !text.contains(banned),
                "{} uses {banned}: core reaches env, time and tasks only through Env and the ports",
                f.display()
            );
        }
    }
}

#[test]
fn kv_keys_are_built_only_in_the_keys_module() {
    let mut files = Vec::new();
    rust_files(&root().join("core/src"), &mut files);
    let prefixes = [
        "inbox/",
        "seen/",
        "lease/",
        "stranger/",
        "botinfo/",
        "session/",
        "summarized/",
        "consolidation/",
        "consolidating/",
        "consolidated/",
        "memscope/",
        "memidx/",
        "poll/",
    ];
    for f in files {
        // Tests may spell keys out to check what is stored; the keys module builds them.
        if f.ends_with("keys.rs") || f.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for p in prefixes {
            assert!(
                !text.contains(&format!("\"{p}")),
                "{} spells the Kv key prefix {p:?}: build it in core/src/keys.rs",
                f.display()
            );
        }
    }
}

#[test]
fn no_rust_file_is_over_600_lines() {
    let mut files = Vec::new();
    for dir in ["core", "platform", "targets", "tests", "fuzz"] {
        let dir = root().join(dir);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
    }
    let long: Vec<_> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 600).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these files: {long:?}");
}
