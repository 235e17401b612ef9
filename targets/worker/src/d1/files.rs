//! Files over the `files` table: a row per file, `append` one atomic `||`.

use async_trait::async_trait;
use clawless_platform::files::{normalize, normalize_dir};
use clawless_platform::{Files, PortError, Result};

use super::{Arg, Cell, D1};

/// Files over the `files` table (a row per file; append is one atomic `||`).
pub struct D1Files(pub D1);

/// D1 refuses rows over 2 MB; memory files stay far below.
pub const MAX_FILE_BYTES: usize = 1_900_000;

fn check_size(len: usize) -> Result<()> {
    if len > MAX_FILE_BYTES {
        return Err(PortError::invalid(format!(
            "file of {len} bytes is over the {MAX_FILE_BYTES}-byte limit"
        )));
    }
    Ok(())
}

#[async_trait]
impl Files for D1Files {
    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        let path = normalize(path)?;
        let rows = self
            .0
            .rows(
                "SELECT data FROM files WHERE path = ?1",
                &[Arg::Text(&path)],
            )
            .await?;
        rows.first()
            .and_then(|r| r.first())
            .and_then(Cell::bytes)
            .ok_or_else(|| PortError::not_found(path))
    }

    async fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        let path = normalize(path)?;
        check_size(data.len())?;
        self.0
            .run(
                "INSERT INTO files (path, data) VALUES (?1, ?2) ON CONFLICT(path) DO UPDATE SET data = excluded.data",
                &[Arg::Text(&path), Arg::Blob(data)],
            )
            .await
            .map(drop)
    }

    async fn append(&self, path: &str, data: &[u8]) -> Result<()> {
        let path = normalize(path)?;
        check_size(data.len())?;
        self.0
            .run(
                "INSERT INTO files (path, data) VALUES (?1, ?2) ON CONFLICT(path) DO UPDATE SET data = CAST(files.data || excluded.data AS BLOB)",
                &[Arg::Text(&path), Arg::Blob(data)],
            )
            .await
            .map(drop)
    }

    async fn list(&self, dir: &str) -> Result<Vec<String>> {
        let dir = normalize_dir(dir)?;
        let prefix = if dir.is_empty() {
            dir
        } else {
            format!("{dir}/")
        };
        let rows = self
            .0
            .rows(
                "SELECT path FROM files WHERE substr(path, 1, length(?1)) = ?1 ORDER BY path",
                &[Arg::Text(&prefix)],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.first().and_then(Cell::text))
            .collect())
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let path = normalize(path)?;
        self.0
            .run("DELETE FROM files WHERE path = ?1", &[Arg::Text(&path)])
            .await
            .map(drop)
    }
}
