//! [`Admin::export`]: the store's Kv entries of [`keys::EXPORTED`] and the Files port's files,
//! whose they are chosen by [`Whom`], packed into one archive.

use clawless_platform::ErrorKind;

use super::{pack, ArchiveError, Contents, Limits, Whom};
use crate::app::Admin;
use crate::keys;

/// Entries read per page of a scan.
const PAGE: usize = 500;
/// Files left out that the manifest names one by one.
const MAX_LEFT_OUT: usize = 100;

impl Admin<'_> {
    /// Reads what `whom` owns and returns it as an archive (see [`super`]). `source` names the
    /// shell (`native`, `worker`, `lambda`). Reads only.
    pub async fn export(self, whom: &Whom, source: &str) -> Result<Vec<u8>, ArchiveError> {
        let (contents, left_out) = self.export_contents(whom).await?;
        let mut manifest = super::parts::manifest(self.app, whom, source);
        manifest.left_out = left_out;
        pack(manifest, &contents)
    }

    /// What an export of `whom` holds, and the files it leaves out (each with why): a name
    /// the Files port does not read back (a command's output can have one), or a file larger
    /// than an import takes. An export an import would refuse is refused here.
    pub async fn export_contents(
        self,
        whom: &Whom,
    ) -> Result<(Contents, Vec<String>), ArchiveError> {
        let kv = &*self.app.platform.kv;
        let limits = Limits::default();
        let mut out = Contents::default();
        for prefix in keys::EXPORTED {
            let mut after = String::new();
            loop {
                let page = kv.scan(prefix, &after, PAGE).await?;
                let Some(last) = page.last() else { break };
                after = last.key.clone();
                out.kv
                    .extend(page.into_iter().filter(|e| whom.has_key(&e.key, &e.value)));
            }
        }
        out.kv.sort_by(|a, b| a.key.cmp(&b.key));
        let files = &*self.app.platform.files;
        let mut left_out = Vec::new();
        for path in files.list("").await? {
            if !whom.has_file(&path) {
                continue;
            }
            match files.read(&path).await {
                Ok(bytes) if bytes.len() as u64 > limits.file_bytes => left_out.push(format!(
                    "{path}: {} bytes, over {}",
                    bytes.len(),
                    limits.file_bytes
                )),
                Ok(bytes) => {
                    out.files.insert(path, bytes);
                }
                // Deleted since the listing: nothing to carry.
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) if e.kind == ErrorKind::Invalid => {
                    left_out.push(format!("{path}: a name the store does not read back"))
                }
                Err(e) => return Err(e.into()),
            }
        }
        if left_out.len() > MAX_LEFT_OUT {
            let more = left_out.len() - MAX_LEFT_OUT;
            left_out.truncate(MAX_LEFT_OUT);
            left_out.push(format!("and {more} more"));
        }
        let size: u64 = out.files.values().map(|b| b.len() as u64).sum::<u64>()
            + out
                .kv
                .iter()
                .map(|e| e.value.len() as u64 + 256)
                .sum::<u64>();
        if out.files.len() + 2 > limits.entries
            || out.kv.len() > limits.kv_entries
            || size > limits.unpacked_bytes
        {
            return Err(ArchiveError::TooBig(format!(
                "this store ({} files, {} entries, about {size} bytes) is more than one archive holds ({} entries, {} bytes)",
                out.files.len(),
                out.kv.len(),
                limits.entries,
                limits.unpacked_bytes
            )));
        }
        Ok((out, left_out))
    }
}
