//! Files port: read / write / append / list / delete under one root. Paths are relative,
//! `/`-separated, and may not escape the root.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::error::{PortError, Result};

#[async_trait]
pub trait Files: Send + Sync {
    /// Reads a whole file.
    ///
    /// # Behavior
    /// A missing file is `NotFound`, and so is a directory. An invalid path (see
    /// [`normalize`]) is `Invalid`, for every method, and touches nothing.
    async fn read(&self, path: &str) -> Result<Vec<u8>>;

    /// Creates or replaces a file, creating parent directories as needed.
    ///
    /// # Behavior
    /// Writing where a directory is, or below a file, is not defined (a directory store
    /// refuses it, a key store would keep both): callers check first, as the workspace tools
    /// do.
    async fn write(&self, path: &str, data: &[u8]) -> Result<()>;

    /// Appends to a file, creating it when missing.
    async fn append(&self, path: &str, data: &[u8]) -> Result<()>;

    /// Lists the files under directory `dir` (`""` is the root), recursively.
    ///
    /// # Behavior
    /// Returns root-relative file paths in lexical order (of their UTF-8 bytes); a missing
    /// directory, or a file, lists empty. There are no empty directories.
    async fn list(&self, dir: &str) -> Result<Vec<String>>;

    /// Deletes a file.
    ///
    /// # Behavior
    /// Deleting a missing file is `Ok`; so is deleting a directory, which deletes nothing.
    async fn delete(&self, path: &str) -> Result<()>;
}

/// Longest path the port accepts, in bytes (a DynamoDB sort key holds 1024).
pub const MAX_PATH_BYTES: usize = 1024;

/// Longest path segment the port accepts, in bytes (most file systems hold 255).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Validates a root-relative path and returns it normalised (no `.` segments, no empty
/// segments).
///
/// # Behavior
/// `Invalid`: an empty path (after normalising), a path starting with `/`, any `..` segment,
/// a backslash, a `:` (drive letters, URL schemes), a control character (NUL, newline, DEL,
/// C1 …), a segment over [`MAX_SEGMENT_BYTES`] or a path over [`MAX_PATH_BYTES`].
/// Everything else is a literal name: `%2e%2e` is a file named `%2e%2e`, `~` is a file named
/// `~` (no adapter decodes or expands anything); Unicode names are kept as given.
pub fn normalize(path: &str) -> Result<String> {
    let refuse = |why: &str| Err(PortError::invalid(format!("path {path:?} {why}")));
    if path.starts_with('/') || path.contains('\\') || path.contains(':') {
        return refuse("must be relative to the root");
    }
    if path.chars().any(char::is_control) {
        return refuse("holds a control character");
    }
    if path.len() > MAX_PATH_BYTES {
        return refuse(&format!("is over {MAX_PATH_BYTES} bytes"));
    }
    let mut parts = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => return refuse("escapes the root"),
            s if s.len() > MAX_SEGMENT_BYTES => {
                return refuse(&format!("has a name over {MAX_SEGMENT_BYTES} bytes"))
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return Err(PortError::invalid("empty path"));
    }
    Ok(parts.join("/"))
}

/// Normalises a directory for listing: `""` is the root.
pub fn normalize_dir(dir: &str) -> Result<String> {
    if dir.trim_matches('/').is_empty() && !dir.starts_with('/') {
        return Ok(String::new());
    }
    normalize(dir)
}

/// In-memory [`Files`].
#[derive(Default)]
pub struct MemoryFiles {
    files: Mutex<BTreeMap<String, Vec<u8>>>,
    ops: std::sync::atomic::AtomicUsize,
}

impl MemoryFiles {
    /// Operations so far (what a database adapter would send as queries).
    pub fn ops(&self) -> usize {
        self.ops.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.ops.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Files for MemoryFiles {
    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        let path = normalize(path)?;
        self.lock()
            .get(&path)
            .cloned()
            .ok_or_else(|| PortError::not_found(path))
    }
    async fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        self.lock().insert(normalize(path)?, data.to_vec());
        Ok(())
    }
    async fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        self.lock()
            .entry(normalize(path)?)
            .or_default()
            .extend_from_slice(data);
        Ok(())
    }
    async fn list(&self, dir: &str) -> Result<Vec<String>> {
        let dir = normalize_dir(dir)?;
        let prefix = if dir.is_empty() {
            dir
        } else {
            format!("{dir}/")
        };
        Ok(self
            .lock()
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect())
    }
    async fn delete(&self, path: &str) -> Result<()> {
        self.lock().remove(&normalize(path)?);
        Ok(())
    }
}

/// Conformance suite for [`Files`] adapters; `files` must start empty.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod conformance {
    use super::*;
    use crate::error::ErrorKind;

    pub async fn run(files: &dyn Files) {
        assert_eq!(
            files.read("missing.md").await.unwrap_err().kind,
            ErrorKind::NotFound
        );
        files.write("notes/a.md", b"alpha").await.unwrap();
        assert_eq!(files.read("notes/a.md").await.unwrap(), b"alpha");
        assert_eq!(
            files.read("./notes//a.md").await.unwrap(),
            b"alpha",
            "paths are normalised"
        );
        files.write("notes/a.md", b"beta").await.unwrap();
        assert_eq!(
            files.read("notes/a.md").await.unwrap(),
            b"beta",
            "write replaces"
        );
        files.append("notes/a.md", b"+more").await.unwrap();
        assert_eq!(files.read("notes/a.md").await.unwrap(), b"beta+more");
        files.append("notes/deep/b.md", b"new").await.unwrap();
        assert_eq!(
            files.read("notes/deep/b.md").await.unwrap(),
            b"new",
            "append creates"
        );
        files.write("top.md", b"t").await.unwrap();
        assert_eq!(
            files.list("").await.unwrap(),
            vec!["notes/a.md", "notes/deep/b.md", "top.md"]
        );
        assert_eq!(
            files.list("notes").await.unwrap(),
            vec!["notes/a.md", "notes/deep/b.md"]
        );
        assert!(files.list("nope").await.unwrap().is_empty());
        files_are_not_directories(files).await;
        files.delete("top.md").await.unwrap();
        files.delete("top.md").await.unwrap();
        assert_eq!(
            files.read("top.md").await.unwrap_err().kind,
            ErrorKind::NotFound
        );
        refuses_escapes(files).await;
        keeps_names_literal(files).await;
    }

    /// A directory is not a file and a file is not a directory, whatever the store.
    async fn files_are_not_directories(files: &dyn Files) {
        assert_eq!(
            files.read("notes").await.unwrap_err().kind,
            ErrorKind::NotFound,
            "reading a directory finds no file"
        );
        assert!(
            files.list("notes/a.md").await.unwrap().is_empty(),
            "a file lists empty"
        );
        files.delete("notes").await.unwrap();
        assert_eq!(
            files.list("notes").await.unwrap(),
            vec!["notes/a.md", "notes/deep/b.md"],
            "deleting a directory deletes no file"
        );
    }

    /// Root-relative paths every adapter refuses as `Invalid`: ways out of the root (`..`,
    /// absolute, drive and UNC forms, backslashes), control characters, and names too long to
    /// store everywhere. The workspace tools refuse these and more (`clawless_core`'s
    /// `tools::files::path`).
    pub fn escapes() -> Vec<String> {
        let mut bad: Vec<String> = [
            "..",
            "../x",
            "../../../../../../etc/passwd",
            "a/../../x",
            "a/../b",
            "a/..",
            "./../x",
            "a/./../x",
            "notes/../../../outside.md",
            "",
            ".",
            "./",
            "//",
            "/",
            "/etc/passwd",
            "//server/share/x",
            "\\\\server\\share\\x",
            "\\\\?\\C:\\x",
            "..\\x",
            "a\\..\\..\\x",
            "a\\b",
            "C:\\x",
            "C:/x",
            "C:x",
            "file:///etc/passwd",
            "a\0b",
            "a\nb",
            "a\rb",
            "\tx",
            "x\u{7f}",
            "x\u{85}",
            "x\u{1b}[31m",
        ]
        .map(String::from)
        .to_vec();
        bad.push(format!("a/{}", "x".repeat(MAX_SEGMENT_BYTES + 1)));
        bad.push(vec!["abcdefgh"; MAX_PATH_BYTES / 8].join("/"));
        bad
    }

    /// Every path of [`escapes`] is `Invalid` on every method and changes nothing.
    async fn refuses_escapes(files: &dyn Files) {
        let before = files.list("").await.unwrap();
        for bad in escapes() {
            let bad = bad.as_str();
            let invalid = |r: Result<()>, op: &str| {
                assert_eq!(
                    r.err().map(|e| e.kind),
                    Some(ErrorKind::Invalid),
                    "{op} {bad:?} must be refused"
                );
            };
            invalid(files.write(bad, b"x").await, "write");
            invalid(files.append(bad, b"x").await, "append");
            invalid(files.delete(bad).await, "delete");
            invalid(files.read(bad).await.map(drop), "read");
            if !bad.is_empty() {
                invalid(files.list(bad).await.map(drop), "list");
            }
        }
        assert_eq!(files.list("").await.unwrap(), before, "nothing was written");
    }

    /// What looks encoded or special to some other system is a plain name here: no adapter
    /// decodes `%2e%2e`, expands `~`, or changes Unicode.
    async fn keeps_names_literal(files: &dyn Files) {
        let before = files.list("").await.unwrap();
        let names = [
            "%2e%2e/%2e%2e/pct.md",
            "%2f..%5c.md",
            "~/tilde.md",
            "...",
            "dir./ünïcödé 📄.md",
        ];
        for (i, name) in names.iter().enumerate() {
            files.write(name, &[b'0' + i as u8]).await.unwrap();
        }
        let mut expected = before.clone();
        expected.extend(names.iter().map(|n| n.to_string()));
        expected.sort();
        assert_eq!(
            files.list("").await.unwrap(),
            expected,
            "names kept as given"
        );
        for (i, name) in names.iter().enumerate() {
            assert_eq!(files.read(name).await.unwrap(), [b'0' + i as u8], "{name}");
            files.delete(name).await.unwrap();
        }
        assert_eq!(files.list("").await.unwrap(), before);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_files_conform() {
        futures::executor::block_on(super::conformance::run(&super::MemoryFiles::default()));
    }
}
