//! Embeds a config tree (see `config::embedded`): `CLAWLESS_EMBED_CONFIG` at build time when set,
//! else the repository's `config/`. Every file under it is embedded, so a YAML file added to
//! `agents.d/` or `providers.d/` reaches the Worker and the Lambda without a code change.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=CLAWLESS_EMBED_CONFIG");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = match std::env::var("CLAWLESS_EMBED_CONFIG") {
        Ok(dir) if !dir.is_empty() => manifest.join(dir),
        _ => manifest.join("../config"),
    };
    let mut files = Vec::new();
    if let Err(e) = walk(&root, &root, &mut files) {
        println!(
            "cargo:warning=cannot read the config directory {}: {e}",
            root.display()
        );
        std::process::exit(1);
    }
    files.sort();
    let mut out = String::from("&[\n");
    for (rel, path) in &files {
        out.push_str(&format!("    ({rel:?}, include_str!({path:?})),\n"));
    }
    out.push_str("]\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("config_files.rs");
    if let Err(e) = std::fs::write(&dest, out) {
        println!("cargo:warning=cannot write {}: {e}", dest.display());
        std::process::exit(1);
    }
}

/// Every file under `dir` (hidden ones left out) as (path relative to `root` with `/`,
/// absolute path), and a rerun trigger on each directory and file.
fn walk(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) -> std::io::Result<()> {
    println!("cargo:rerun-if-changed={}", dir.display());
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, files)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            println!("cargo:rerun-if-changed={}", path.display());
            let abs = path.canonicalize()?;
            files.push((
                rel.to_string_lossy().replace('\\', "/"),
                abs.to_string_lossy().into_owned(),
            ));
        }
    }
    Ok(())
}
