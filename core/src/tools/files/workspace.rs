//! [`Workspace`]: what the workspace tools share (the Files port, the size cap) and the
//! checks they make before they read or write: a missing file, a directory or a binary file
//! said as such; no file where a directory is or below a file; nothing over the cap. Port
//! errors reach the model with paths relative to its workspace.

use std::sync::Arc;

use clawless_platform::{ErrorKind, Files, PortError};

use super::path::{root, shown};
use super::{ToolError, DEFAULT_MAX_FILE_BYTES};
use crate::ids::Scope;

/// What the workspace tools share: the Files port and the size cap of what they write.
#[derive(Clone)]
pub struct Workspace {
    pub files: Arc<dyn Files>,
    pub max_file_bytes: usize,
}

impl Workspace {
    pub fn new(files: Arc<dyn Files>) -> Workspace {
        Workspace {
            files,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }

    /// A port error as the model sees it: paths relative to its workspace.
    pub(super) fn port_err(&self, scope: &Scope, e: PortError) -> ToolError {
        let prefix = format!("{}/", root(scope));
        ToolError(e.to_string().replace(&prefix, ""))
    }

    /// The file's bytes, `None` when there is no such file.
    pub(super) async fn bytes(
        &self,
        scope: &Scope,
        full: &str,
    ) -> Result<Option<Vec<u8>>, ToolError> {
        match self.files.read(full).await {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.port_err(scope, e)),
        }
    }

    /// Whether files live under `full`, i.e. it is a directory.
    async fn is_dir(&self, scope: &Scope, full: &str) -> Result<bool, ToolError> {
        let under = self.files.list(full).await;
        Ok(!under.map_err(|e| self.port_err(scope, e))?.is_empty())
    }

    /// The file's text; a missing file, a directory or a binary file is an error saying so.
    pub(super) async fn text(&self, scope: &Scope, full: &str) -> Result<String, ToolError> {
        let rel = shown(scope, full);
        let Some(bytes) = self.bytes(scope, full).await? else {
            return Err(self.missing(scope, full).await);
        };
        String::from_utf8(bytes).map_err(|e| {
            ToolError(format!(
                "{rel} is a binary file ({} bytes, not UTF-8 text); these tools read and edit text only",
                e.as_bytes().len()
            ))
        })
    }

    /// Why there is no file at `full`: it is a directory, or nothing is there.
    pub(super) async fn missing(&self, scope: &Scope, full: &str) -> ToolError {
        let rel = shown(scope, full);
        match self.is_dir(scope, full).await {
            Ok(true) => ToolError(format!("{rel} is a directory; list it with list_dir")),
            Ok(false) => ToolError(format!("{rel} does not exist; list_dir shows what does")),
            Err(e) => e,
        }
    }

    /// Refuses to write `full` where a directory is, or under a name that is a file.
    pub(super) async fn check_writable(&self, scope: &Scope, full: &str) -> Result<(), ToolError> {
        if self.is_dir(scope, full).await? {
            return Err(ToolError(format!(
                "{} is a directory; write a file inside it",
                shown(scope, full)
            )));
        }
        let root = root(scope);
        let rel = shown(scope, full);
        for (end, _) in rel.match_indices('/') {
            let parent = &rel[..end];
            if self
                .bytes(scope, &format!("{root}/{parent}"))
                .await?
                .is_some()
            {
                return Err(ToolError(format!(
                    "{parent} is a file, so it cannot hold {rel}"
                )));
            }
        }
        Ok(())
    }

    /// Refuses a file of `len` bytes over the cap.
    pub(super) fn check_size(&self, what: &str, len: usize) -> Result<(), ToolError> {
        if len > self.max_file_bytes {
            return Err(ToolError(format!(
                "{what} would be {len} bytes, over the limit of {} per workspace file; write less, or split it into several files",
                size(self.max_file_bytes)
            )));
        }
        Ok(())
    }
}

/// `1024 KB`, or `10 bytes` for what is not a whole number of KB.
fn size(bytes: usize) -> String {
    match (bytes / 1024, bytes % 1024) {
        (kb, 0) if kb > 0 => format!("{kb} KB"),
        _ => format!("{bytes} bytes"),
    }
}
