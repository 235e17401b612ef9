//! The repository's own files, for the checks that read it (tidy, ARCHITECTURE.md, the module
//! graph): where it is, and its Rust files.

use std::path::{Path, PathBuf};

/// The repository's root: the workspace around the package under test, found at run time.
///
/// Not from the testkit's own compile-time `CARGO_MANIFEST_DIR`: cargo shares a path
/// package's build between two clones that use one target directory, so a testkit built in
/// one clone would read the other clone's files.
pub fn root() -> PathBuf {
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    start
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|toml| toml.lines().any(|l| l.trim() == "[workspace]"))
        })
        .map(Path::to_path_buf)
        .unwrap_or(start)
}

/// Every `.rs` file under `dir`, leaving out build output, npm packages and data.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    files_ending(dir, &[".rs"])
}

/// Every file under `dir` whose name ends with one of `endings`, in order, leaving out build
/// output, npm packages and data.
pub fn files_ending(dir: &Path, endings: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, endings, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, endings: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | "node_modules" | "data" | "build" | "build-test" | ".git"
            ) {
                walk(&path, endings, out);
            }
        } else if endings.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}
