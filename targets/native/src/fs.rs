//! The Files port over a directory. Paths are checked by the port's `normalize`, no
//! component on the way may be a symlink (whether it points outside the root or not), and no
//! file may have a second hard link, so nothing escapes the root: reading, writing, appending, listing and deleting through a link
//! are `Invalid`, and a listing skips links. Nothing the assistant does creates a link, so a
//! link is there only if someone with the machine put it there; the check runs before each
//! call (a link swapped in during a call is outside this guard: that someone could write the
//! files directly).

use std::path::{Path, PathBuf};

use clawless_platform::files::{normalize, normalize_dir};
use clawless_platform::{async_trait, Files, PortError};

pub struct FsFiles {
    root: PathBuf,
}

impl FsFiles {
    pub fn new(root: impl Into<PathBuf>) -> std::io::Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root)?;
        Ok(Self { root })
    }

    /// The on-disk path for a port path, refusing symlinks below the root and a file with
    /// another hard link (a name planted for a file elsewhere, `ln /etc/shadow notes.md`:
    /// nothing the assistant writes has a second link).
    fn resolve(&self, rel: &str) -> Result<PathBuf, PortError> {
        let mut path = self.root.clone();
        for seg in rel.split('/') {
            path.push(seg);
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                if meta.file_type().is_symlink() {
                    return Err(PortError::invalid(format!(
                        "{rel:?} passes through a symlink"
                    )));
                }
                #[cfg(unix)]
                if meta.is_file() && std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
                    return Err(PortError::invalid(format!(
                        "{rel:?} has another hard link: a name for a file elsewhere"
                    )));
                }
            }
        }
        Ok(path)
    }
}

/// A new file next to `path` for an atomic replace: `.<name>.<pid>-<n>.clawless-tmp`,
/// created exclusively. A name already taken (by a leftover, a planted file or a symlink) is
/// skipped, never opened.
fn temp_beside(path: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_file_name(format!(".{name}.{}-{n}.clawless-tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

fn io_err(path: &str, e: std::io::Error) -> PortError {
    match e.kind() {
        std::io::ErrorKind::NotFound => PortError::not_found(path.to_owned()),
        _ => PortError::unavailable(format!("{path}: {e}")),
    }
}

/// Whether an error says there is no file at the path: nothing there, a directory there, or a
/// file where a directory on the way should be.
fn no_file(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{IsADirectory, NotADirectory, NotFound};
    matches!(e.kind(), NotFound | IsADirectory | NotADirectory)
}

fn collect(dir: &Path, rel: &str, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(&entry.path(), &child, out)?;
        } else if kind.is_file() {
            out.push(child);
        }
    }
    Ok(())
}

#[async_trait]
impl Files for FsFiles {
    async fn read(&self, path: &str) -> Result<Vec<u8>, PortError> {
        let rel = normalize(path)?;
        std::fs::read(self.resolve(&rel)?).map_err(|e| {
            if no_file(&e) {
                PortError::not_found(rel.clone())
            } else {
                io_err(&rel, e)
            }
        })
    }

    async fn write(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        let rel = normalize(path)?;
        let full = self.resolve(&rel)?;
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(&rel, e))?;
        }
        // Write then rename, so a crash never leaves half a file. The temporary file is
        // created exclusively (`create_new`: never through a link or over a file planted at
        // its name) under a name of this process's own.
        let (tmp, mut file) = temp_beside(&full).map_err(|e| io_err(&rel, e))?;
        let written = std::io::Write::write_all(&mut file, data)
            .and_then(|_| file.sync_data())
            .and_then(|_| std::fs::rename(&tmp, &full));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(|e| io_err(&rel, e))
    }

    async fn append(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        use std::io::Write;
        let rel = normalize(path)?;
        let full = self.resolve(&rel)?;
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(&rel, e))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&full)
            .map_err(|e| io_err(&rel, e))?;
        f.write_all(data).map_err(|e| io_err(&rel, e))
    }

    async fn list(&self, dir: &str) -> Result<Vec<String>, PortError> {
        let rel = normalize_dir(dir)?;
        let full = if rel.is_empty() {
            self.root.clone()
        } else {
            self.resolve(&rel)?
        };
        let mut out = Vec::new();
        match collect(&full, &rel, &mut out) {
            Ok(()) => {}
            Err(e) if no_file(&e) => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&rel, e)),
        }
        out.sort();
        Ok(out)
    }

    async fn delete(&self, path: &str) -> Result<(), PortError> {
        let rel = normalize(path)?;
        let full = self.resolve(&rel)?;
        if std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir()) {
            return Ok(()); // a directory is no file: nothing to delete
        }
        match std::fs::remove_file(full) {
            Err(e) if !no_file(&e) => Err(io_err(&rel, e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
