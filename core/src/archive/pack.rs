//! The archive's bytes: a gzip-compressed tar holding `manifest.json` first, then `kv.jsonl`,
//! then `files/<path>` for each file. [`pack`] writes one; [`unpack`] reads one whole into
//! memory, within [`Limits`], and checks every name, size, count and checksum before anything
//! is written anywhere.

use std::collections::BTreeMap;
use std::io::Read;

use clawless_platform::KvEntry;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{ArchiveError, Contents, Manifest, FORMAT};

/// The manifest's name in the archive.
pub const MANIFEST: &str = "manifest.json";
/// The Kv entries' name in the archive: one JSON object per line.
pub const KV: &str = "kv.jsonl";
/// The directory of the Files port's files in the archive.
pub const FILES: &str = "files/";

/// The last expiry instant read (the end of the year 9999, in ms): a larger one is no date.
const LAST_MS: u64 = 253_402_300_799_999;

/// What an archive may hold; past any of them it is refused, nothing written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The compressed archive's size.
    pub packed_bytes: usize,
    /// Everything it unpacks to (tar headers included).
    pub unpacked_bytes: u64,
    /// Entries in the tar.
    pub entries: usize,
    /// One file's size.
    pub file_bytes: u64,
    /// Lines of `kv.jsonl`.
    pub kv_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            packed_bytes: 64 << 20,
            unpacked_bytes: 256 << 20,
            entries: 50_000,
            file_bytes: 16 << 20,
            kv_entries: 1_000_000,
        }
    }
}

/// One line of `kv.jsonl`: the key, its value as text (`v`) when it is UTF-8, else as
/// base64 (`b64`), and its expiry instant in ms (`exp`), when it has one.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    k: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    v: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    b64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exp: Option<u64>,
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn kv_lines(entries: &[KvEntry]) -> Vec<u8> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for e in entries {
        let (v, b64) = match std::str::from_utf8(&e.value) {
            Ok(text) => (Some(text.to_owned()), None),
            Err(_) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(&e.value)),
            ),
        };
        let line = Line {
            k: e.key.clone(),
            v,
            b64,
            exp: e.expires_at_ms,
        };
        // A struct of strings and numbers always serialises.
        if let Ok(json) = serde_json::to_vec(&line) {
            out.extend_from_slice(&json);
            out.push(b'\n');
        }
    }
    out
}

/// Writes the archive: `manifest`'s counts and checksums are filled in from `contents`.
pub fn pack(mut manifest: Manifest, contents: &Contents) -> Result<Vec<u8>, ArchiveError> {
    let kv = kv_lines(&contents.kv);
    manifest.format = FORMAT;
    manifest.kv_entries = contents.kv.len();
    manifest.files = contents.files.len();
    manifest.sha256 = BTreeMap::from([(KV.to_owned(), hex(&kv))]);
    for (path, bytes) in &contents.files {
        manifest.sha256.insert(format!("{FILES}{path}"), hex(bytes));
    }
    let head = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| ArchiveError::Write(format!("the manifest: {e}")))?;
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mtime = manifest.created_at_ms / 1000;
    let mut add = |name: &str, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(mtime);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, name, data)
            .map_err(|e| ArchiveError::Write(format!("{name}: {e}")))
    };
    add(MANIFEST, &head)?;
    add(KV, &kv)?;
    for (path, bytes) in &contents.files {
        add(&format!("{FILES}{path}"), bytes)?;
    }
    let gz = tar
        .into_inner()
        .map_err(|e| ArchiveError::Write(e.to_string()))?;
    gz.finish().map_err(|e| ArchiveError::Write(e.to_string()))
}

/// Counts what the decompressor hands out, and stops it past the limit.
struct Bounded<R> {
    inner: R,
    read: u64,
    limit: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.read > self.limit {
            return Err(std::io::Error::other("over the unpacked limit"));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(std::io::Error::other("over the unpacked limit"));
        }
        Ok(n)
    }
}

/// Whether `name` may be a file's name in an archive: exactly as the Files port writes it
/// (no `..`, no leading `/`, no backslash, no `:`, no control character, nothing normalised
/// away such as `./` or `//`).
fn file_path(name: &str) -> Option<&str> {
    let path = name.strip_prefix(FILES)?;
    let normal = clawless_platform::files::normalize(path).ok()?;
    (normal == path).then_some(path)
}

/// Reads an archive whole, refusing anything [`pack`] would not have written: a bad name or
/// entry type, a size past `limits`, a checksum that differs, an entry the manifest does not
/// list or one it lists that is missing, a newer format.
pub fn unpack(bytes: &[u8], limits: &Limits) -> Result<(Manifest, Contents), ArchiveError> {
    if bytes.len() > limits.packed_bytes {
        return Err(ArchiveError::TooBig(format!(
            "the archive is {} bytes; at most {} are read",
            bytes.len(),
            limits.packed_bytes
        )));
    }
    let over = limits.unpacked_bytes;
    let gz = Bounded {
        inner: flate2::read::GzDecoder::new(bytes),
        read: 0,
        limit: over,
    };
    let mut tar = tar::Archive::new(gz);
    let damaged = |e: std::io::Error| {
        if e.to_string().contains("over the unpacked limit") {
            ArchiveError::TooBig(format!("it unpacks to more than {over} bytes"))
        } else {
            ArchiveError::Damaged(e.to_string())
        }
    };
    let mut manifest: Option<Manifest> = None;
    let mut kv: Option<Vec<u8>> = None;
    let mut files = BTreeMap::new();
    let mut count = 0;
    for entry in tar.entries().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        count += 1;
        if count > limits.entries {
            return Err(ArchiveError::TooBig(format!(
                "more than {} entries",
                limits.entries
            )));
        }
        let name = String::from_utf8(entry.path_bytes().into_owned())
            .map_err(|_| ArchiveError::BadName("a name that is not UTF-8".into()))?;
        let shown: String = name.chars().take(120).map(visible).collect();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            // Other tools add directories: a good name is skipped, a bad one refused.
            let dir = name.trim_end_matches('/');
            if dir == FILES.trim_end_matches('/') || file_path(dir).is_some() {
                continue;
            }
            return Err(ArchiveError::BadName(shown));
        }
        if !kind.is_file() {
            return Err(ArchiveError::BadName(format!(
                "{shown} (not a regular file: links and devices are never read)"
            )));
        }
        let size = entry.size();
        let cap = if name == KV {
            limits.unpacked_bytes
        } else {
            limits.file_bytes
        };
        if size > cap {
            return Err(ArchiveError::TooBig(format!(
                "{shown} is {size} bytes; at most {cap}"
            )));
        }
        let mut data = Vec::with_capacity(size.min(1 << 20) as usize);
        (&mut entry)
            .take(size)
            .read_to_end(&mut data)
            .map_err(damaged)?;
        if (data.len() as u64) < size {
            return Err(ArchiveError::Damaged(format!("{shown} is cut short")));
        }
        if name == MANIFEST && manifest.is_none() && count == 1 {
            manifest = Some(read_manifest(&data)?);
        } else if name == KV && kv.is_none() {
            kv = Some(data);
        } else if let Some(path) = file_path(&name) {
            if files.insert(path.to_owned(), data).is_some() {
                return Err(ArchiveError::BadName(format!("{shown} (twice)")));
            }
        } else {
            return Err(ArchiveError::BadName(shown));
        }
    }
    let manifest = manifest.ok_or_else(|| {
        ArchiveError::Damaged("no manifest.json first: not a clawless archive".into())
    })?;
    let kv = kv.ok_or_else(|| ArchiveError::Damaged("kv.jsonl is missing".into()))?;
    // A name that is also another's folder cannot be written as both.
    for path in files.keys() {
        let mut at = 0;
        while let Some(i) = path[at..].find('/') {
            at += i + 1;
            if files.contains_key(&path[..at - 1]) {
                let shown: String = path.chars().take(120).map(visible).collect();
                return Err(ArchiveError::BadName(format!(
                    "{shown} (below a file of the same name)"
                )));
            }
        }
    }
    check_sums(&manifest, &kv, &files)?;
    let kv = read_kv(&kv, limits)?;
    if kv.len() != manifest.kv_entries || files.len() != manifest.files {
        return Err(ArchiveError::Damaged(format!(
            "the manifest counts {} entries and {} files; the archive holds {} and {}",
            manifest.kv_entries,
            manifest.files,
            kv.len(),
            files.len()
        )));
    }
    Ok((manifest, Contents { kv, files }))
}

fn visible(c: char) -> char {
    if c.is_control() {
        '?'
    } else {
        c
    }
}

fn read_manifest(data: &[u8]) -> Result<Manifest, ArchiveError> {
    // The format first, so a newer archive is named as such even if the rest differs.
    #[derive(Deserialize)]
    struct Format {
        format: u32,
    }
    let format: Format = serde_json::from_slice(data)
        .map_err(|e| ArchiveError::Damaged(format!("manifest.json: {e}")))?;
    if format.format > FORMAT {
        return Err(ArchiveError::TooNew(format.format));
    }
    serde_json::from_slice(data).map_err(|e| ArchiveError::Damaged(format!("manifest.json: {e}")))
}

fn check_sums(
    manifest: &Manifest,
    kv: &[u8],
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<(), ArchiveError> {
    let held = std::iter::once((KV.to_owned(), kv)).chain(
        files
            .iter()
            .map(|(p, b)| (format!("{FILES}{p}"), b.as_slice())),
    );
    let mut seen = 0;
    for (name, bytes) in held {
        let Some(want) = manifest.sha256.get(&name) else {
            return Err(ArchiveError::Damaged(format!(
                "{} is not in the manifest",
                name.chars().take(120).map(visible).collect::<String>()
            )));
        };
        if *want != hex(bytes) {
            return Err(ArchiveError::Checksum(
                name.chars().take(120).map(visible).collect(),
            ));
        }
        seen += 1;
    }
    if seen != manifest.sha256.len() {
        return Err(ArchiveError::Damaged(format!(
            "the manifest lists {} entries and the archive holds {seen}: it is cut short",
            manifest.sha256.len()
        )));
    }
    Ok(())
}

fn read_kv(data: &[u8], limits: &Limits) -> Result<Vec<KvEntry>, ArchiveError> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for (n, raw) in data.split(|b| *b == b'\n').enumerate() {
        if raw.is_empty() {
            continue;
        }
        if out.len() >= limits.kv_entries {
            return Err(ArchiveError::TooBig(format!(
                "more than {} entries in kv.jsonl",
                limits.kv_entries
            )));
        }
        let bad = |why: String| ArchiveError::Damaged(format!("kv.jsonl line {}: {why}", n + 1));
        let line: Line = serde_json::from_slice(raw).map_err(|e| bad(e.to_string()))?;
        clawless_platform::kv::validate_key(&line.k).map_err(|e| bad(e.to_string()))?;
        let value = match (line.v, line.b64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| bad(e.to_string()))?,
            _ => return Err(bad("exactly one of v and b64 is needed".into())),
        };
        if line.exp.is_some_and(|at| at > LAST_MS) {
            return Err(bad("exp is past the year 9999".into()));
        }
        out.push(KvEntry {
            key: line.k,
            value,
            expires_at_ms: line.exp,
        });
    }
    Ok(out)
}
