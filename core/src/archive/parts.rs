//! An archive in parts, for the admin endpoint: each request and each answer stays within what
//! one serverless request carries and may do — a Lambda Function URL carries 6 MB each way, a
//! free-plan Worker makes 50 D1 queries and uses 10 ms of CPU per request, a Worker isolate has
//! 128 MB — so a shell never holds more than one part in memory.
//!
//! - [`Admin::export_part`] answers the part of an export that starts at a cursor; its manifest
//!   names the next part's cursor ([`Manifest::next`]). [`Joined`] puts the parts back together
//!   into one archive.
//! - [`split`] cuts an archive's contents into parts to import one by one, each a whole archive
//!   of its own that defers the memory index ([`Manifest::reindex`]); [`reindex_parts`] then asks
//!   for the memory files' index, a few files a request.

use clawless_platform::ErrorKind;

use super::{pack, unpack, ArchiveError, Contents, Limits, Manifest, Whom, FORMAT};
use crate::app::{Admin, App};
use crate::keys;

/// Kv entries or files in one imported part; about two queries each (a read, then a write
/// where needed), so a part stays under a free-plan Worker's 50.
pub const PART_ITEMS: usize = 10;
/// Bytes of values and files in one part, at most (a single file is never split): packed and
/// in base64, as a Function URL carries it, a part stays under the Lambda's 6 MB.
pub const PART_BYTES: usize = 3 << 20;
/// One part packed, at most (tar headers and gzip around [`PART_BYTES`]): what a shell reads
/// as the body of one request.
pub const PART_PACKED: usize = PART_BYTES + (1 << 20);

/// Memory files one request indexes: each takes about four store operations (its manifest,
/// the file, the manifest written twice) and an embedding call.
const REINDEX_FILES: usize = 4;
/// Entries one scan of an export part reads.
const SCAN: usize = 10;
/// Reads (scans, the file listing, file reads) one export part makes, at most.
const READS: usize = 30;

impl Limits {
    /// What a shell takes in one request of the admin endpoint: one part.
    pub fn part() -> Limits {
        Limits {
            packed_bytes: PART_PACKED,
            unpacked_bytes: 4 * PART_BYTES as u64,
            entries: PART_ITEMS + 2,
            file_bytes: PART_BYTES as u64,
            kv_entries: PART_ITEMS,
        }
    }

    /// What one part of an export holds, at most: [`READS`] scans and file reads of about
    /// [`PART_BYTES`].
    pub fn export_part() -> Limits {
        Limits {
            packed_bytes: PART_PACKED,
            unpacked_bytes: 4 * PART_BYTES as u64,
            entries: READS + 2,
            file_bytes: PART_BYTES as u64,
            kv_entries: READS * SCAN,
        }
    }
}

/// `cursor=<c>` for the query of `GET /admin/export`, percent-encoded.
pub fn cursor_query(cursor: &str) -> String {
    let encoded = percent_encoding::utf8_percent_encode(cursor, percent_encoding::NON_ALPHANUMERIC);
    format!("cursor={encoded}")
}

/// Where an export part starts: after `after` among the keys of the `prefix`-th of
/// [`keys::EXPORTED`], or after `after` among the files.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cursor {
    Kv { prefix: usize, after: String },
    Files { after: String },
}

impl Cursor {
    /// `k<prefix>:<key>` or `f:<path>`; empty is the start.
    fn parse(text: &str) -> Result<Cursor, ArchiveError> {
        let bad = || ArchiveError::Damaged(format!("a cursor this build did not give: {text:.80}"));
        if text.is_empty() {
            return Ok(Cursor::Kv {
                prefix: 0,
                after: String::new(),
            });
        }
        let (head, after) = text.split_once(':').ok_or_else(bad)?;
        match head {
            "f" => Ok(Cursor::Files {
                after: after.to_owned(),
            }),
            _ => {
                let prefix = (head.strip_prefix('k').and_then(|n| n.parse().ok()))
                    .filter(|&n: &usize| n < keys::EXPORTED.len())
                    .ok_or_else(bad)?;
                Ok(Cursor::Kv {
                    prefix,
                    after: after.to_owned(),
                })
            }
        }
    }

    fn text(&self) -> String {
        match self {
            Cursor::Kv { prefix, after } => format!("k{prefix}:{after}"),
            Cursor::Files { after } => format!("f:{after}"),
        }
    }
}

impl Admin<'_> {
    /// The part of `whom`'s export that starts at `cursor` (empty: the first), as an archive
    /// whose manifest names the next part's cursor, if any. At most [`READS`] reads and about
    /// [`PART_BYTES`] of data: a part may hold nothing and still name a next one. Reads only.
    pub async fn export_part(
        self,
        whom: &Whom,
        source: &str,
        cursor: &str,
    ) -> Result<Vec<u8>, ArchiveError> {
        let kv = &*self.app.platform.kv;
        let files = &*self.app.platform.files;
        let mut at = Cursor::parse(cursor)?;
        let (mut out, mut left_out) = (Contents::default(), Vec::new());
        let (mut reads, mut bytes) = (0, 0);
        // Whether `size` more bytes still fit (the first item always does).
        let fits = |bytes: usize, size: usize| bytes == 0 || bytes + size <= PART_BYTES;
        let over = |name: &str, len: usize| {
            format!("{name:.120}: {len} bytes, over the {PART_BYTES} one request carries")
        };
        let next = loop {
            if reads >= READS || bytes >= PART_BYTES {
                break Some(at);
            }
            match at {
                Cursor::Kv { prefix, after } => {
                    let page = kv.scan(keys::EXPORTED[prefix], &after, SCAN).await?;
                    reads += 1;
                    let more = page.len() == SCAN;
                    let mut consumed = None;
                    let mut stopped = false;
                    for e in page {
                        let size = e.key.len() + e.value.len();
                        if whom.has_key(&e.key, &e.value) {
                            if size > PART_BYTES {
                                left_out.push(over(&e.key, size));
                            } else if !fits(bytes, size) {
                                stopped = true;
                                break;
                            } else {
                                bytes += size;
                                consumed = Some(e.key.clone());
                                out.kv.push(e);
                                continue;
                            }
                        }
                        consumed = Some(e.key);
                    }
                    at = if more || stopped {
                        Cursor::Kv {
                            prefix,
                            after: consumed.unwrap_or(after),
                        }
                    } else if prefix + 1 < keys::EXPORTED.len() {
                        Cursor::Kv {
                            prefix: prefix + 1,
                            after: String::new(),
                        }
                    } else {
                        Cursor::Files {
                            after: String::new(),
                        }
                    };
                    if stopped {
                        break Some(at);
                    }
                }
                // The listing and at least one file, or the next part.
                Cursor::Files { after } if reads + 2 > READS => {
                    break Some(Cursor::Files { after });
                }
                Cursor::Files { after } => {
                    let mut paths = files.list("").await?;
                    reads += 1;
                    paths.retain(|p| *p > after && whom.has_file(p));
                    paths.sort();
                    let mut consumed = None;
                    for path in &paths {
                        if reads >= READS || bytes >= PART_BYTES {
                            break;
                        }
                        reads += 1;
                        match files.read(path).await {
                            Ok(held) if held.len() > PART_BYTES => {
                                left_out.push(over(path, held.len()))
                            }
                            // Read again by the next part.
                            Ok(held) if !fits(bytes, held.len()) => break,
                            Ok(held) => {
                                bytes += held.len();
                                out.files.insert(path.clone(), held);
                            }
                            Err(e) if e.kind == ErrorKind::NotFound => {}
                            Err(e) if e.kind == ErrorKind::Invalid => left_out
                                .push(format!("{path}: a name the store does not read back")),
                            Err(e) => return Err(e.into()),
                        }
                        consumed = Some(path.clone());
                    }
                    if consumed.as_ref() == paths.last() {
                        break None;
                    }
                    // Full: the next part goes on after the last file taken (or from the same
                    // place, when none was).
                    break Some(Cursor::Files {
                        after: consumed.unwrap_or(after),
                    });
                }
            }
        };
        let mut manifest = manifest(self.app, whom, source);
        manifest.left_out = left_out;
        manifest.next = next.map(|c| c.text());
        pack(manifest, &out)
    }
}

/// Exported parts put back together: one archive's manifest and contents, within the
/// default [`Limits`] of one archive.
#[derive(Debug, Default)]
pub struct Joined {
    manifest: Option<Manifest>,
    contents: Contents,
    bytes: u64,
}

impl Joined {
    /// Adds a part; the cursor of the next, if there is one. A part of another export (another
    /// person, format or store version than the first) is refused.
    pub fn add(
        &mut self,
        manifest: Manifest,
        part: Contents,
    ) -> Result<Option<String>, ArchiveError> {
        let next = manifest.next.clone();
        match &mut self.manifest {
            None => self.manifest = Some(manifest),
            Some(first) => {
                if (first.whom.as_str(), first.store_version, first.format)
                    != (
                        manifest.whom.as_str(),
                        manifest.store_version,
                        manifest.format,
                    )
                {
                    return Err(ArchiveError::Damaged(format!(
                        "a part of another export ({}, store {}) after one of {} (store {})",
                        manifest.whom, manifest.store_version, first.whom, first.store_version
                    )));
                }
                first.left_out.extend(manifest.left_out);
            }
        }
        let limits = Limits::default();
        self.bytes += (part.kv.iter())
            .map(|e| (e.key.len() + e.value.len()) as u64)
            .sum::<u64>()
            + part.files.values().map(|b| b.len() as u64).sum::<u64>();
        self.contents.kv.extend(part.kv);
        self.contents.files.extend(part.files);
        if self.bytes > limits.unpacked_bytes
            || self.contents.kv.len() > limits.kv_entries
            || self.contents.files.len() + 2 > limits.entries
        {
            return Err(ArchiveError::TooBig(format!(
                "the export (so far {} entries, {} files, {} bytes; one archive holds {} bytes)",
                self.contents.kv.len(),
                self.contents.files.len(),
                self.bytes,
                limits.unpacked_bytes
            )));
        }
        Ok(next)
    }

    /// The whole archive (refused past `limits`, as an import would refuse it).
    pub fn archive(mut self, limits: &Limits) -> Result<Vec<u8>, ArchiveError> {
        let mut manifest = self
            .manifest
            .ok_or_else(|| ArchiveError::Damaged("no part was exported".into()))?;
        manifest.next = None;
        self.contents.kv.sort_by(|a, b| a.key.cmp(&b.key));
        self.contents.kv.dedup_by(|a, b| a.key == b.key);
        let bytes = pack(manifest, &self.contents)?;
        // Read back as an import reads it: near the limits, what the parts held can pack into
        // more than an import takes.
        unpack(&bytes, limits)?;
        Ok(bytes)
    }
}

/// `contents` cut into parts of at most [`PART_ITEMS`] entries and files and about
/// [`PART_BYTES`], each packed with `manifest`'s origin and the memory index deferred; then
/// the memory files among them, for [`reindex_parts`]. A file or an entry larger than one part
/// is refused here, before anything is sent.
pub fn split(
    manifest: &Manifest,
    contents: &Contents,
) -> Result<(Vec<Vec<u8>>, Vec<String>), ArchiveError> {
    let over = |name: &str, len: usize| {
        ArchiveError::TooBig(format!(
            "{name:.120} ({len} bytes; one request to a shell carries {PART_BYTES})"
        ))
    };
    if let Some((path, held)) = contents.files.iter().find(|(_, b)| b.len() > PART_BYTES) {
        return Err(over(path, held.len()));
    }
    if let Some(e) = (contents.kv.iter()).find(|e| e.key.len() + e.value.len() > PART_BYTES) {
        return Err(over(&e.key, e.value.len()));
    }
    let part = |contents: Contents| {
        let mut m = manifest.clone();
        m.next = None;
        m.reindex = Some(Vec::new());
        m.left_out = Vec::new();
        pack(m, &contents)
    };
    let mut parts = Vec::new();
    let (mut open, mut items, mut bytes) = (Contents::default(), 0, 0);
    let kv = contents
        .kv
        .iter()
        .map(|e| (e.key.len() + e.value.len(), Some(e), None));
    let files = (contents.files.iter()).map(|(p, b)| (b.len(), None, Some((p, b))));
    for (size, entry, file) in kv.chain(files) {
        if items > 0 && (items == PART_ITEMS || bytes + size > PART_BYTES) {
            parts.push(part(std::mem::take(&mut open))?);
            (items, bytes) = (0, 0);
        }
        if let Some(e) = entry {
            open.kv.push(e.clone());
        }
        if let Some((p, b)) = file {
            open.files.insert(p.clone(), b.clone());
        }
        items += 1;
        bytes += size;
    }
    if items > 0 || parts.is_empty() {
        parts.push(part(open)?);
    }
    let notes = (contents.files.keys())
        .filter(|p| super::import::memory_scope(p).is_some())
        .cloned()
        .collect();
    Ok((parts, notes))
}

/// Parts that ask for nothing but the index of the memory files `notes`, [`REINDEX_FILES`] a
/// part.
pub fn reindex_parts(manifest: &Manifest, notes: &[String]) -> Result<Vec<Vec<u8>>, ArchiveError> {
    notes
        .chunks(REINDEX_FILES)
        .map(|chunk| {
            let mut m = manifest.clone();
            m.next = None;
            m.left_out = Vec::new();
            m.reindex = Some(chunk.to_vec());
            pack(m, &Contents::default())
        })
        .collect()
}

/// The manifest of an export of `whom` from `app`'s store, written by `source`.
pub(super) fn manifest(app: &App, whom: &Whom, source: &str) -> Manifest {
    Manifest {
        format: FORMAT,
        source: source.to_owned(),
        by: env!("CARGO_PKG_VERSION").to_owned(),
        created_at_ms: app.platform.clock.now_ms(),
        store_version: crate::upgrade::CURRENT,
        whom: whom.label(),
        kv_entries: 0,
        files: 0,
        sha256: Default::default(),
        left_out: Vec::new(),
        next: None,
        reindex: None,
    }
}
