//! A config directory read from disk, for the shells that take one at run time
//! (`CLAWLESS_CONFIG`).

use std::collections::BTreeMap;
use std::path::Path;

/// The longest config tree read: far above any real config, it stops a mistaken
/// `CLAWLESS_CONFIG=/` from reading a disk into memory.
const MAX_FILES: usize = 1000;
const MAX_BYTES: u64 = 16 << 20;

/// Every file under `root` (hidden ones left out, as in the embedded tree): path relative to
/// `root` with `/` → text. Fails on an unreadable or non-UTF-8 file, or past 1,000 files or
/// 16 MB in all.
pub fn read_config_dir(root: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    let mut bytes = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            bytes += std::fs::metadata(&path)?.len();
            if files.len() >= MAX_FILES || bytes > MAX_BYTES {
                return Err(std::io::Error::other(format!(
                    "more than {MAX_FILES} files or {} MB under {}",
                    MAX_BYTES >> 20,
                    root.display()
                )));
            }
            if let Ok(rel) = path.strip_prefix(root) {
                let rel = rel.to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
                })?;
                files.insert(rel, text);
            }
        }
    }
    Ok(files)
}
