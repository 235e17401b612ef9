//! Tidy checks over the repository: every Rust file opens with a `//!` line saying what lives
//! there, no file is over 500 lines, `clawless-core` depends on no runtime crate and reads no
//! env or clock, Kv keys are spelt only in its keys module, `clawless-platform` names a runtime
//! crate only as an optional dependency, and no code reads a path outside the repository (the
//! tests pass on any clone, nothing beside it). Import circles: `modules.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use clawless_testkit::repo::root;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    out.extend(clawless_testkit::repo::rust_files(dir));
}

/// The tests pass on a fresh clone with nothing beside it: no Rust code names the folder
/// beside the repository (`../shared` is compared with the vendored copies in `.ci/run`).
#[test]
fn no_code_reads_a_path_outside_the_repository() {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    // Spelt in two pieces so this file does not match itself.
    let climbs = [concat!("..", "/shared/")];
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if climbs.iter().any(|c| code.contains(c)) {
                bad.push(format!("{}:{}: {}", f.display(), n + 1, code));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "paths outside the repository:\n{}",
        bad.join("\n")
    );
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

/// Crates that tie a build to a runtime (an executor, an HTTP stack, a cloud SDK, a
/// database): the ports' crate may name them only as optional dependencies, behind features
/// the wasm32 build never enables. An `aws-` prefix covers every AWS SDK crate.
const RUNTIME_CRATES: [&str; 8] = [
    "tokio",
    "reqwest",
    "worker",
    "aws-",
    "libsql",
    "lambda_runtime",
    "hyper",
    "axum",
];

/// `(name, optional)` of every dependency a manifest declares outside `[dev-dependencies]` and
/// `[build-dependencies]`: `[dependencies]` and `[target.….dependencies]`, as `name = …`
/// lines, `name.key = …` lines or `[dependencies.name]` tables. A renamed dependency
/// (`package = "…"`) is named by its real crate. Enough TOML for Cargo manifests.
fn declared_dependencies(manifest: &str) -> Vec<(String, bool)> {
    let mut deps: Vec<(String, bool)> = Vec::new();
    // The section: a list of dependencies, or one dependency's table.
    let mut list = false;
    let mut table: Option<usize> = None;
    for line in manifest.lines() {
        let line = line.split(" #").next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            let (path, name) = match header.rsplit_once(".dependencies.") {
                Some((path, name)) => (format!("{path}.dependencies"), Some(name)),
                None => match header.strip_prefix("dependencies.") {
                    Some(name) => ("dependencies".to_owned(), Some(name)),
                    None => (header.to_owned(), None),
                },
            };
            let is_deps = path == "dependencies"
                || (path.starts_with("target.") && path.ends_with(".dependencies"));
            list = is_deps && name.is_none();
            table = match name {
                Some(name) if is_deps => {
                    deps.push((name.trim_matches('"').to_owned(), false));
                    Some(deps.len() - 1)
                }
                _ => None,
            };
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if let Some(i) = table {
            match key {
                "optional" => deps[i].1 = value == "true",
                "package" => deps[i].0 = value.trim_matches('"').to_owned(),
                _ => {}
            }
        } else if list {
            let (name, field) = match key.split_once('.') {
                Some((name, field)) => (name.trim(), Some(field.trim())),
                None => (key, None),
            };
            let name = name.trim_matches('"');
            let inline = |field: &str| {
                value
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .find(|(k, _)| k.trim() == field)
                    .map(|(_, v)| v.trim().trim_matches('"').to_owned())
            };
            let (real, optional) = match field {
                Some("optional") => (name.to_owned(), value == "true"),
                Some("package") => (value.trim_matches('"').to_owned(), false),
                Some(_) => (name.to_owned(), false),
                None => (
                    inline("package").unwrap_or_else(|| name.to_owned()),
                    inline("optional").as_deref() == Some("true"),
                ),
            };
            // `name.key = …` lines add to one dependency.
            match deps.iter_mut().find(|(n, _)| *n == name || *n == real) {
                Some(dep) => {
                    dep.1 |= optional;
                    if field == Some("package") {
                        dep.0 = real;
                    }
                }
                None => deps.push((real, optional)),
            }
        }
    }
    deps
}

/// The runtime crates among `manifest`'s non-optional dependencies.
fn required_runtime_crates(manifest: &str) -> Vec<String> {
    declared_dependencies(manifest)
        .into_iter()
        .filter(|(name, optional)| {
            !optional
                && RUNTIME_CRATES.iter().any(|banned| {
                    name == banned || (banned.ends_with('-') && name.starts_with(banned))
                })
        })
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn platform_depends_on_no_runtime_crate_unless_optional() {
    let path = root().join("platform/Cargo.toml");
    let manifest = std::fs::read_to_string(&path).unwrap();
    let deps = declared_dependencies(&manifest);
    assert!(
        deps.iter().any(|(name, _)| name == "serde_json"),
        "{} read wrong: {deps:?}",
        path.display()
    );
    let required = required_runtime_crates(&manifest);
    assert!(
        required.is_empty(),
        "{} depends on {} without `optional = true`: the ports' crate must build without a \
         runtime (put it behind a feature, as native-io does with tokio)",
        path.display(),
        required.join(", ")
    );
}

#[test]
fn the_runtime_crate_check_reads_every_form_of_dependency() {
    let manifest = r#"
[package]
name = "x"
tokio = "1"

[features]
native = ["dep:reqwest"]

[dependencies]
serde = "1"
tokio = { workspace = true, features = ["rt"] }
reqwest = { workspace = true, optional = true }
aws-config.workspace = true
hyper.workspace = true
hyper.optional = true
rt = { package = "lambda_runtime", version = "1" }

[dependencies.libsql]
version = "0.10"

[dependencies.axum]
version = "0.8"
optional = true

[target.'cfg(target_arch = "wasm32")'.dependencies]
worker = "0.8"

[dev-dependencies]
tokio = "1"
"#;
    assert_eq!(
        required_runtime_crates(manifest),
        ["tokio", "aws-config", "lambda_runtime", "libsql", "worker"]
    );
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
            "std::fs",
            "SystemTime",
            "Instant::now",
            "thread::",
            "tokio",
        ] {
            assert!(
                !text.contains(banned),
                "{} uses {banned}: core reaches env, files, time and tasks only through Env and the ports",
                f.display()
            );
        }
    }
}

/// Every Kv key prefix, read from the table that opens `core/src/keys.rs` (its first column:
/// `inbox/<lane>/<update_id:020>` → `inbox/`), so a new prefix is checked once it is listed.
fn kv_prefixes() -> Vec<String> {
    let keys = std::fs::read_to_string(root().join("core/src/keys.rs")).unwrap();
    let mut out = Vec::new();
    for line in keys.lines().filter(|l| l.starts_with("//! | `")) {
        let first_cell = line
            .trim_start_matches("//! |")
            .split(" | ")
            .next()
            .unwrap_or("");
        for item in first_cell.split('`').skip(1).step_by(2) {
            if let Some(end) = item.find('/') {
                out.push(item[..=end].to_owned());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_kv_prefixes_come_from_the_keys_table() {
    let prefixes = kv_prefixes();
    for p in [
        "inbox/",
        "compacted/",
        "model/",
        "agent/",
        "preview/",
        "menu/",
        "sched-due/",
    ] {
        assert!(
            prefixes.iter().any(|q| q == p),
            "{p} missing from {prefixes:?}"
        );
    }
    assert!(prefixes.len() >= 25, "{prefixes:?}");
}

#[test]
fn kv_keys_are_built_only_in_the_keys_module() {
    let mut files = Vec::new();
    rust_files(&root().join("core/src"), &mut files);
    let prefixes = kv_prefixes();
    for f in files {
        // Tests may spell keys out to check what is stored; the keys module builds them.
        if f.ends_with("keys.rs") || f.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for p in &prefixes {
            assert!(
                !text.contains(&format!("\"{p}")),
                "{} spells the Kv key prefix {p:?}: build it in core/src/keys.rs",
                f.display()
            );
        }
    }
}

#[test]
fn no_rust_file_is_over_500_lines() {
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
            (n > 500).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these files: {long:?}");
}

/// The files of `core/src` allowed an `impl App` block: the update path's entry points
/// (ARCHITECTURE.md). The operator's calls are `Admin`'s (`App::admin`), the control
/// panel's `Panel`'s: a new concern is a handle of its own, not more methods on `App`.
const IMPL_APP: [&str; 7] = [
    "app.rs",
    "assemble.rs",
    "drain.rs",
    "fire.rs",
    "ingress.rs",
    "local.rs",
    "upgrade.rs",
];

#[test]
fn impl_app_is_only_in_the_entry_point_files() {
    let src = root().join("core/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let has = text
                .lines()
                .any(|l| l.trim_start().starts_with("impl App "));
            has
        })
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap();
            rel.to_string_lossy().replace('\\', "/")
        })
        .collect();
    found.sort();
    assert_eq!(
        found, IMPL_APP,
        "impl App in other files: put the operator's calls on Admin (core/src/admin.rs), a new concern on a handle of its own"
    );
}
