//! [`App::export`]: the store's Kv entries of [`keys::EXPORTED`] and the Files port's files,
//! whose they are chosen by [`Whom`], packed into one archive.

use super::{pack, ArchiveError, Contents, Manifest, Whom, FORMAT};
use crate::app::App;
use crate::keys;

/// Entries read per page of a scan.
const PAGE: usize = 500;

impl App {
    /// Reads what `whom` owns and returns it as an archive (see [`super`]). `source` names the
    /// shell (`native`, `worker`, `lambda`). Reads only.
    pub async fn export(&self, whom: &Whom, source: &str) -> Result<Vec<u8>, ArchiveError> {
        let contents = self.export_contents(whom).await?;
        let manifest = Manifest {
            format: FORMAT,
            source: source.to_owned(),
            by: env!("CARGO_PKG_VERSION").to_owned(),
            created_at_ms: self.platform.clock.now_ms(),
            store_version: crate::upgrade::CURRENT,
            whom: whom.label(),
            kv_entries: 0,
            files: 0,
            sha256: Default::default(),
        };
        pack(manifest, &contents)
    }

    /// What an export of `whom` holds.
    pub async fn export_contents(&self, whom: &Whom) -> Result<Contents, ArchiveError> {
        let kv = &*self.platform.kv;
        let mut out = Contents::default();
        for prefix in keys::EXPORTED {
            let mut after = String::new();
            loop {
                let page = kv.scan(prefix, &after, PAGE).await?;
                let Some(last) = page.last() else { break };
                after = last.key.clone();
                let full = page.len() == PAGE;
                out.kv
                    .extend(page.into_iter().filter(|e| whom.has_key(&e.key, &e.value)));
                if !full {
                    break;
                }
            }
        }
        out.kv.sort_by(|a, b| a.key.cmp(&b.key));
        let files = &*self.platform.files;
        for path in files.list("").await? {
            if !whom.has_file(&path) {
                continue;
            }
            match files.read(&path).await {
                Ok(bytes) => {
                    out.files.insert(path, bytes);
                }
                // Deleted since the listing: nothing to carry.
                Err(e) if e.kind == clawless_platform::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }
}
