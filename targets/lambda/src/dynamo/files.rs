//! The Files port over the table: no bucket to create. A file is one item (`p = "file"`,
//! `s = path`) holding its first [`PART`] bytes; a bigger one, up to [`MAX_FILE`], keeps the
//! rest in parts (`p = "filepart"`, `s = path#generation#index`), since an item holds at most
//! 400 KB. A write puts the new generation's parts first and the head item last, so a reader
//! sees the old file or the new one whole; the old parts are deleted after. A crash between
//! leaves unreferenced parts behind (never read; bounded by one file's size). `append` is
//! read-modify-write.

use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use clawless_platform::files::{normalize, normalize_dir};
use clawless_platform::{async_trait, ErrorKind, Files, PortError};

use super::{blob, num, s, sdk_err, string, Item, Table};

/// Largest file the Files adapter stores (a picture, a voice answer, a document).
pub const MAX_FILE: usize = 8 * 1024 * 1024;

/// Bytes of a file one item holds (the item limit is 400 KB, with the keys).
pub const PART: usize = 350 * 1024;

/// The partition of the parts past the first.
const PARTS: &str = "filepart";

/// The Files port over the `file` partition.
pub struct DynamoFiles(pub Table);

/// Where a file's parts are: their generation and how many there are (the head's included).
struct Layout {
    generation: String,
    parts: u64,
}

impl Layout {
    fn of(head: &Item) -> Layout {
        Layout {
            generation: string(head, "g").unwrap_or_default(),
            parts: num(head, "n").unwrap_or(1).max(1),
        }
    }

    /// The sort keys of the parts past the head.
    fn keys(&self, path: &str) -> Vec<String> {
        (1..self.parts)
            .map(|i| format!("{path}#{}#{i:03}", self.generation))
            .collect()
    }
}

/// A generation no other write of this file shares: the time, this process, a counter.
fn generation(now_ms: u64) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{now_ms:x}-{:x}-{n:x}", std::process::id())
}

impl DynamoFiles {
    async fn put_item(
        &self,
        p: &str,
        sk: &str,
        v: &[u8],
        head: Option<&Layout>,
    ) -> Result<Option<Item>, PortError> {
        let mut put = self
            .0
            .client
            .put_item()
            .table_name(&self.0.name)
            .item("p", s(p))
            .item("s", s(sk))
            .item("v", AttributeValue::B(Blob::new(v.to_vec())))
            .return_values(ReturnValue::AllOld);
        if let Some(l) = head.filter(|l| l.parts > 1) {
            put = put
                .item("g", s(l.generation.clone()))
                .item("n", AttributeValue::N(l.parts.to_string()));
        }
        let out = put.send().await.map_err(sdk_err)?;
        Ok(out.attributes.filter(|a| !a.is_empty()))
    }

    async fn put(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        if data.len() > MAX_FILE {
            return Err(PortError::invalid(format!(
                "{path}: {} bytes; files are limited to {MAX_FILE}",
                data.len()
            )));
        }
        let mut chunks = data.chunks(PART);
        let first = chunks.next().unwrap_or(&[]);
        let layout = Layout {
            generation: generation(self.0.clock.now_ms()),
            parts: data.len().div_ceil(PART).max(1) as u64,
        };
        for (key, chunk) in layout.keys(path).iter().zip(chunks) {
            self.put_item(PARTS, key, chunk, None).await?;
        }
        let old = self.put_item("file", path, first, Some(&layout)).await?;
        if let Some(old) = old {
            self.drop_parts(path, &Layout::of(&old)).await;
        }
        Ok(())
    }

    /// Deletes the parts of `layout` (best effort: a part left behind is never read).
    async fn drop_parts(&self, path: &str, layout: &Layout) {
        for key in layout.keys(path) {
            if let Err(e) = self.0.delete_item(PARTS.into(), &key).await {
                tracing::warn!(error = %e, "a file's old part was not deleted");
            }
        }
    }

    /// The whole file at `path` as `head` describes it; `None` when a part is gone (a
    /// write replaced the file while it was read).
    async fn gather(&self, path: &str, head: &Item) -> Result<Option<Vec<u8>>, PortError> {
        let mut data = blob(head, "v").unwrap_or_default();
        for key in Layout::of(head).keys(path) {
            match self.0.get_item(PARTS.into(), &key).await? {
                Some(part) => data.extend(blob(&part, "v").unwrap_or_default()),
                None => return Ok(None),
            }
        }
        Ok(Some(data))
    }
}

#[async_trait]
impl Files for DynamoFiles {
    async fn read(&self, path: &str) -> Result<Vec<u8>, PortError> {
        let path = normalize(path)?;
        // A write between reading the head and its parts: read the new head once more.
        for _ in 0..3 {
            let Some(head) = self.0.get_item("file".into(), &path).await? else {
                return Err(PortError::not_found(path));
            };
            if let Some(data) = self.gather(&path, &head).await? {
                return Ok(data);
            }
        }
        Err(PortError::new(
            ErrorKind::Unavailable,
            format!("{path}: its parts changed while it was read"),
        ))
    }

    async fn write(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        self.put(&normalize(path)?, data).await
    }

    async fn append(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        let path = normalize(path)?;
        let mut current = match self.read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        current.extend_from_slice(data);
        self.put(&path, &current).await
    }

    async fn list(&self, dir: &str) -> Result<Vec<String>, PortError> {
        let dir = normalize_dir(dir)?;
        let prefix = if dir.is_empty() {
            dir
        } else {
            format!("{dir}/")
        };
        let items = self
            .0
            .query("file", &prefix, "", usize::MAX, |_| true)
            .await?;
        Ok(items.iter().filter_map(|i| string(i, "s")).collect())
    }

    async fn delete(&self, path: &str) -> Result<(), PortError> {
        let path = normalize(path)?;
        let old = self
            .0
            .client
            .delete_item()
            .table_name(&self.0.name)
            .key("p", s("file"))
            .key("s", s(&path))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(sdk_err)?
            .attributes;
        if let Some(old) = old {
            self.drop_parts(&path, &Layout::of(&old)).await;
        }
        Ok(())
    }
}
