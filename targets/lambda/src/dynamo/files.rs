//! The Files port over the table: `p = "file"`, `s = path`: no bucket to create; a file may be
//! at most 350 KB (the item limit is 400 KB) and `append` is read-modify-write.

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use clawless_platform::files::{normalize, normalize_dir};
use clawless_platform::{async_trait, ErrorKind, Files, PortError};

use super::{blob, s, sdk_err, string, Table};

/// Largest file the Files adapter stores.
pub const MAX_FILE: usize = 350 * 1024;

/// The Files port over the `file` partition.
pub struct DynamoFiles(pub Table);

impl DynamoFiles {
    async fn put(&self, path: &str, data: Vec<u8>) -> Result<(), PortError> {
        if data.len() > MAX_FILE {
            return Err(PortError::invalid(format!(
                "{path}: {} bytes; files are limited to {MAX_FILE}",
                data.len()
            )));
        }
        self.0
            .client
            .put_item()
            .table_name(&self.0.name)
            .item("p", s("file"))
            .item("s", s(path))
            .item("v", AttributeValue::B(Blob::new(data)))
            .send()
            .await
            .map_err(sdk_err)?;
        Ok(())
    }
}

#[async_trait]
impl Files for DynamoFiles {
    async fn read(&self, path: &str) -> Result<Vec<u8>, PortError> {
        let path = normalize(path)?;
        let item = self.0.get_item("file".into(), &path).await?;
        item.and_then(|i| blob(&i, "v"))
            .ok_or_else(|| PortError::not_found(path))
    }

    async fn write(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        self.put(&normalize(path)?, data.to_vec()).await
    }

    async fn append(&self, path: &str, data: &[u8]) -> Result<(), PortError> {
        let path = normalize(path)?;
        let mut current = match self.read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        current.extend_from_slice(data);
        self.put(&path, current).await
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
        self.0.delete_item("file".into(), &normalize(path)?).await
    }
}
