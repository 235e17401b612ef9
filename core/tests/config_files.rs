//! The embedded config is the whole `config/` tree (core/build.rs walks it), so a YAML file
//! added to `agents.d/` or `providers.d/` reaches the Worker and the Lambda without a code
//! change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config")
}

#[test]
fn every_config_file_is_embedded() {
    if option_env!("CLAWLESS_CONFIG").is_some() {
        // Built with another config on purpose: say so rather than pass quietly.
        panic!("built with CLAWLESS_CONFIG set: this test checks the repository's config/");
    }
    let mut on_disk = Vec::new();
    all_files(&root(), &mut on_disk);
    let embedded = clawless_core::config::embedded();
    let mut on_disk: Vec<String> = on_disk
        .iter()
        .map(|p| {
            p.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    on_disk.sort();
    let names: Vec<&String> = embedded.0.keys().collect();
    assert_eq!(names, on_disk.iter().collect::<Vec<_>>());
    for (name, text) in &embedded.0 {
        let disk = std::fs::read_to_string(root().join(name)).unwrap();
        assert_eq!(&disk, text, "{name}");
    }
}

/// Every non-hidden file under `dir`.
fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push(path);
        }
    }
}
