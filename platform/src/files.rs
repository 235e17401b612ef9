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
    /// A missing file is `NotFound`. An invalid path (see [`normalize`]) is `Invalid`.
    async fn read(&self, path: &str) -> Result<Vec<u8>>;

    /// Creates or replaces a file, creating parent directories as needed.
    async fn write(&self, path: &str, data: &[u8]) -> Result<()>;

    /// Appends to a file, creating it when missing.
    async fn append(&self, path: &str, data: &[u8]) -> Result<()>;

    /// Lists the files under directory `dir` (`""` is the root), recursively.
    ///
    /// # Behavior
    /// Returns root-relative file paths in lexical order; a missing directory lists empty.
    async fn list(&self, dir: &str) -> Result<Vec<String>>;

    /// Deletes a file.
    ///
    /// # Behavior
    /// Deleting a missing file is `Ok`.
    async fn delete(&self, path: &str) -> Result<()>;
}

/// Validates a root-relative path and returns it normalised (no `.` segments, no empty
/// segments).
///
/// # Behavior
/// Absolute paths, `..` segments, backslashes, NUL bytes and empty paths are `Invalid`.
pub fn normalize(path: &str) -> Result<String> {
    if path.starts_with('/') || path.contains('\\') || path.contains('\0') || path.contains(':') {
        return Err(PortError::invalid(format!(
            "path {path:?} must be relative to the root"
        )));
    }
    let mut parts = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                return Err(PortError::invalid(format!(
                    "path {path:?} escapes the root"
                )))
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
}

impl MemoryFiles {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
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
        files.delete("top.md").await.unwrap();
        files.delete("top.md").await.unwrap();
        assert_eq!(
            files.read("top.md").await.unwrap_err().kind,
            ErrorKind::NotFound
        );
        for bad in ["../x", "/etc/passwd", "a/../../x", "", "a\\b", "C:/x"] {
            let err = files.write(bad, b"x").await.unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{bad:?} must be refused");
            assert_eq!(
                files.read(bad).await.unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn memory_files_conform() {
        futures::executor::block_on(super::conformance::run(&super::MemoryFiles::default()));
    }
}
