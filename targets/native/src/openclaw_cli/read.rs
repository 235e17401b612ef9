//! Reading OpenClaw's folders, bounded and untrusted: its state directory (`~/.openclaw`:
//! `openclaw.json`, `workspace/`, `skills/`, `agents/<agent>/sessions/`) or a workspace alone
//! (then its parent too, when that is the state directory). Only what maps is read: keys
//! (`credentials/`, `agents/<agent>/agent/`) never are. Whatever is not read is listed with
//! why: a name that is not UTF-8, a link, a file too large, one that could not be read; none
//! of them stops the rest.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// Files read, by path below the state directory (`workspace/MEMORY.md`).
pub type Files = BTreeMap<String, Vec<u8>>;

/// Most files read, of one file's size, and of all of them.
const MAX_FILES: usize = 10_000;
const MAX_FILE_BYTES: u64 = 4 << 20;
const MAX_BYTES: u64 = 128 << 20;
/// Of a transcript, the last bytes read (the newest messages), and how many are read.
const TRANSCRIPT_TAIL: u64 = 1 << 20;
const MAX_TRANSCRIPTS: usize = 400;
/// Folders of a workspace not read: version control and packages.
const SKIPPED_DIRS: [&str; 3] = [".git", "node_modules", ".venv"];

/// What was read, and what was not (each with why).
#[derive(Debug, Default)]
pub struct Found {
    pub files: Files,
    pub unread: Vec<String>,
    total: u64,
}

/// Reads `dir`: OpenClaw's state directory, or a workspace (and its state directory when
/// `dir` is inside one).
pub fn read(dir: &Path) -> Result<Found> {
    if !dir.is_dir() {
        bail!(
            "{} is not a directory (OpenClaw's ~/.openclaw, or its workspace ~/.openclaw/workspace)",
            dir.display()
        );
    }
    let is_state = |d: &Path| d.join("openclaw.json").is_file() || d.join("agents").is_dir();
    let mut found = Found::default();
    let (state, workspace) = if is_state(dir) || dir.join("workspace").is_dir() {
        (Some(dir.to_path_buf()), dir.join("workspace"))
    } else {
        (
            dir.parent().filter(|p| is_state(p)).map(Path::to_path_buf),
            dir.to_path_buf(),
        )
    };
    if workspace.is_dir() {
        found.walk(&workspace, "workspace")?;
    }
    if let Some(state) = state {
        found.state(&state, workspace.file_name())?;
    }
    Ok(found)
}

impl Found {
    /// The state directory's entries but the workspace read already (`workspace`).
    fn state(&mut self, state: &Path, workspace: Option<&std::ffi::OsStr>) -> Result<()> {
        for (entry, name, kind) in self.entries(state, "") {
            if Some(entry.file_name().as_os_str()) == workspace {
                continue;
            }
            let why = match (name.as_str(), kind.is_dir()) {
                ("openclaw.json", false) => {
                    self.file(&entry.path(), name, MAX_FILE_BYTES)?;
                    continue;
                }
                ("skills", true) => {
                    self.walk(&entry.path(), "skills")?;
                    continue;
                }
                ("agents", true) => {
                    self.agents(&entry.path())?;
                    continue;
                }
                ("credentials", _) => "OpenClaw's keys and pairings, not read (keys go in the environment here; people in allowed_users or pairing)",
                ("memory", true) => "OpenClaw's search index, not needed (the notes are indexed again here)",
                ("cron", _) => "OpenClaw's scheduled jobs, not carried: set reminders or scheduled tasks here",
                (n, true) if n.starts_with("workspace") => "another workspace (a profile's or another agent's): import it on its own",
                (n, false) if n.starts_with("openclaw.json") => "a copy of openclaw.json, not read",
                _ => "not read: no place for it here",
            };
            let slash = if kind.is_dir() { "/" } else { "" };
            self.unread.push(format!("{name}{slash}: {why}"));
        }
        Ok(())
    }

    /// `agents/<agent>/sessions/`: `sessions.json` and the tail of each transcript, the
    /// newest first; nothing else of an agent's folder (its `agent/` holds model keys).
    fn agents(&mut self, dir: &Path) -> Result<()> {
        for (entry, agent, kind) in self.entries(dir, "agents") {
            if !kind.is_dir() {
                self.unread
                    .push(format!("agents/{agent}: not read: no place for it here"));
                continue;
            }
            for (inner, name, kind) in self.entries(&entry.path(), &format!("agents/{agent}")) {
                let shown = format!("agents/{agent}/{name}");
                match (name.as_str(), kind.is_dir()) {
                    ("sessions", true) => self.sessions(&inner.path(), &shown)?,
                    ("agent", true) => self.unread.push(format!("{shown}/: OpenClaw's model keys and settings, not read (keys go in the environment here)")),
                    _ => self.unread.push(format!("{shown}: not read: no place for it here")),
                }
            }
        }
        Ok(())
    }

    fn sessions(&mut self, dir: &Path, shown: &str) -> Result<()> {
        let mut transcripts = Vec::new();
        for (entry, name, kind) in self.entries(dir, shown) {
            let path = entry.path();
            match name.as_str() {
                "sessions.json" if kind.is_file() => {
                    self.file(&path, format!("{shown}/{name}"), MAX_FILE_BYTES)?
                }
                n if n.ends_with(".jsonl") && kind.is_file() => {
                    let at = entry.metadata().and_then(|m| m.modified()).ok();
                    transcripts.push((at, path, name));
                }
                _ => self.unread.push(format!(
                    "{shown}/{name}: not read: neither sessions.json nor a transcript"
                )),
            }
        }
        transcripts.sort_by_key(|t| std::cmp::Reverse(t.0));
        let older = transcripts.len().saturating_sub(MAX_TRANSCRIPTS);
        if older > 0 {
            self.unread.push(format!(
                "{shown}/: {older} older transcripts not read (the newest {MAX_TRANSCRIPTS} are)"
            ));
        }
        for (_, path, name) in transcripts.into_iter().take(MAX_TRANSCRIPTS) {
            let shown = format!("{shown}/{name}");
            match tail(&path, TRANSCRIPT_TAIL) {
                Ok(bytes) => self.add(shown, bytes)?,
                Err(e) => self.unread.push(format!("{shown}: not read ({e})")),
            }
        }
        Ok(())
    }

    /// Every file below `dir`, as `<prefix>/<path>`; links are listed, not followed.
    fn walk(&mut self, dir: &Path, prefix: &str) -> Result<()> {
        let mut stack = vec![(dir.to_path_buf(), prefix.to_owned())];
        while let Some((at, shown_at)) = stack.pop() {
            for (entry, name, kind) in self.entries(&at, &shown_at) {
                let shown = format!("{shown_at}/{name}");
                if kind.is_dir() {
                    match SKIPPED_DIRS.contains(&name.as_str()) {
                        true => self.unread.push(format!("{shown}/: not read")),
                        false => stack.push((entry.path(), shown)),
                    }
                } else if kind.is_file() {
                    self.file(&entry.path(), shown, MAX_FILE_BYTES)?;
                } else {
                    self.unread.push(format!("{shown}: not a file, not read"));
                }
            }
        }
        Ok(())
    }

    /// The entries of `dir` in name order, each with its UTF-8 name and kind; a name that is
    /// not UTF-8, a link or an entry that cannot be read is listed instead.
    fn entries(
        &mut self,
        dir: &Path,
        shown: &str,
    ) -> Vec<(std::fs::DirEntry, String, std::fs::FileType)> {
        let at = |name: &str| match shown {
            "" => name.to_owned(),
            _ => format!("{shown}/{name}"),
        };
        let listing = match std::fs::read_dir(dir) {
            Ok(listing) => listing,
            Err(e) => {
                self.unread.push(format!("{}: not read ({e})", at("")));
                return Vec::new();
            }
        };
        let mut entries: Vec<_> = listing.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        let mut out = Vec::new();
        for entry in entries {
            let os = entry.file_name();
            let Some(name) = os.to_str().map(str::to_owned) else {
                let lossy = os.to_string_lossy();
                self.unread.push(format!(
                    "{}: a name that is not UTF-8, not read",
                    at(&lossy)
                ));
                continue;
            };
            match entry.file_type() {
                Ok(kind) if kind.is_symlink() => self
                    .unread
                    .push(format!("{}: a link, not followed", at(&name))),
                Ok(kind) => out.push((entry, name, kind)),
                Err(e) => self.unread.push(format!("{}: not read ({e})", at(&name))),
            }
        }
        out
    }

    /// Reads the file at `path` as `shown`, when it is at most `cap` bytes.
    fn file(&mut self, path: &Path, shown: String, cap: u64) -> Result<()> {
        let size = match std::fs::metadata(path) {
            Ok(m) => m.len(),
            Err(e) => {
                self.unread.push(format!("{shown}: not read ({e})"));
                return Ok(());
            }
        };
        if size > cap {
            self.unread
                .push(format!("{shown}: {size} bytes, over {cap}, not read"));
            return Ok(());
        }
        match std::fs::read(path) {
            Ok(bytes) => self.add(shown, bytes),
            Err(e) => {
                self.unread.push(format!("{shown}: not read ({e})"));
                Ok(())
            }
        }
    }

    fn add(&mut self, shown: String, bytes: Vec<u8>) -> Result<()> {
        self.total += bytes.len() as u64;
        if self.files.len() >= MAX_FILES || self.total > MAX_BYTES {
            bail!("the folder holds more than {MAX_FILES} files or {MAX_BYTES} bytes to read: not OpenClaw's?");
        }
        self.files.insert(shown, bytes);
        Ok(())
    }
}

/// The last `cap` bytes of the file at `path`, from the first whole line among them.
fn tail(path: &PathBuf, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::new();
    if size > cap {
        file.seek(SeekFrom::Start(size - cap))?;
        file.take(cap).read_to_end(&mut bytes)?;
        let first = bytes
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..first);
    } else {
        file.take(cap).read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}
