//! The workspace tools: `read_file`, `write_file`, `edit_file`, `list_dir` and
//! `delete_file`, over the Files port, so they behave the same on every shell.
//!
//! Each conversation has its own workspace, `workspace/<scope>/` (the scope is the memory's:
//! one person's files are never seen by another person or a group); [`path`] checks every
//! path the model gives and the model only ever sees paths relative to that root. The port
//! has no directories of its own: a directory is the prefix of the files under it, so an
//! empty directory does not exist. A file and a directory never share a name: the writing
//! tools check first, as not every adapter would refuse it.
//!
//! Limits: `read_file` shows at most [`MAX_READ_LINES`] lines and 64 KB per call (saying how
//! to read on); what `write_file` and `edit_file` leave is at most `max_file_bytes` (1 MB by
//! default; the Lambda's table holds 350 KB per file); `list_dir` shows [`MAX_LIST_ENTRIES`].

pub mod path;
mod workspace;

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{json, Value};

use self::path::{shown, workspace_dir, workspace_path};
pub use self::workspace::Workspace;
use super::{Level, Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;

/// Largest file `write_file` and `edit_file` leave, unless the tools are built with another.
pub const DEFAULT_MAX_FILE_BYTES: usize = 1024 * 1024;
/// Lines `read_file` shows when the call does not say.
pub const DEFAULT_READ_LINES: usize = 400;
/// Most lines `read_file` shows in one call.
pub const MAX_READ_LINES: usize = 2000;
/// Most bytes `read_file` answers, its notes included (the agent's cap on a tool result).
pub const MAX_READ_BYTES: usize = 64 * 1024;
/// Most entries `list_dir` shows.
pub const MAX_LIST_ENTRIES: usize = 500;
/// Room kept under [`MAX_READ_BYTES`] for the note after the lines.
const NOTE_ROOM: usize = 256;

/// `1 file`, `2 files`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn str_arg<'a>(input: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError(format!("`{name}` (a string) is required")))
}

/// An optional positive integer argument.
fn count_arg(input: &Value, name: &str) -> Result<Option<usize>, ToolError> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| ToolError(format!("`{name}` must be a whole number of at least 1"))),
    }
}

pub struct ReadFile(pub Workspace);

#[async_trait]
impl Tool for ReadFile {
    fn stays_inside(&self) -> bool {
        true
    }

    fn brings_untrusted(&self, input: &Value) -> Option<String> {
        Some(format!("the file {}", crate::tools::named(input, "path")))
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// A read.
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: format!("Read a text file of your workspace, with line numbers. Paths are relative to the workspace (notes/todo.md). Shows `limit` lines (default {DEFAULT_READ_LINES}, at most {MAX_READ_LINES}) from line `offset` (1-based) and says how to read on."),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ_LINES}
            }, "required": ["path"], "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let full = workspace_path(&ctx.scope, str_arg(&input, "path")?)?;
        let offset = count_arg(&input, "offset")?.unwrap_or(1);
        let limit = count_arg(&input, "limit")?
            .unwrap_or(DEFAULT_READ_LINES)
            .min(MAX_READ_LINES);
        let text = self.0.text(&ctx.scope, &full).await?;
        numbered(shown(&ctx.scope, &full), &text, offset, limit)
    }
}

/// Lines `offset..offset + limit` of `text`, numbered like `cat -n`, within
/// [`MAX_READ_BYTES`], with a note saying what is left and how to read it.
fn numbered(rel: &str, text: &str, offset: usize, limit: usize) -> Result<String, ToolError> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return Ok(format!("{rel} is empty."));
    }
    if offset > lines.len() {
        return Err(ToolError(format!(
            "offset {offset} is past the end: {rel} has {} lines",
            lines.len()
        )));
    }
    let budget = MAX_READ_BYTES - NOTE_ROOM;
    let mut out = String::new();
    let mut next = offset; // the first line not shown
    for (i, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
        let numbered = format!("{:>6}\t{line}\n", i + 1);
        if out.len() + numbered.len() > budget {
            if out.is_empty() {
                let mut end = budget;
                while !numbered.is_char_boundary(end) {
                    end -= 1;
                }
                out.push_str(&numbered[..end]);
                out.push_str(&format!(
                    "\n… line {} is {} bytes; only its start is shown\n",
                    i + 1,
                    line.len()
                ));
                next = i + 2;
            }
            break;
        }
        out.push_str(&numbered);
        next = i + 2;
    }
    let left = lines.len() + 1 - next;
    if left > 0 {
        let cut = if next - offset < limit {
            " (64 KB shown)"
        } else {
            ""
        };
        out.push_str(&format!(
            "… {left} more lines{cut}: call again with offset={next}"
        ));
    }
    Ok(out.trim_end_matches('\n').to_owned())
}

pub struct WriteFile(pub Workspace);

#[async_trait]
impl Tool for WriteFile {
    fn stays_inside(&self) -> bool {
        true
    }

    /// A workspace skill's file: listed in later turns' instructions.
    fn acts_beyond(&self, input: &Value) -> bool {
        path::is_skill(input.get("path").and_then(Value::as_str).unwrap_or(""))
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// Writing the same content again leaves the same file.
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".into(),
            description: "Create a file in your workspace, or replace it whole. Paths are relative to the workspace (notes/todo.md); directories are created as needed. To change part of a file, use edit_file.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}
            }, "required": ["path", "content"], "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let full = workspace_path(&ctx.scope, str_arg(&input, "path")?)?;
        let content = str_arg(&input, "content")?;
        let rel = shown(&ctx.scope, &full);
        self.0.check_size(rel, content.len())?;
        self.0.check_writable(&ctx.scope, &full).await?;
        let before = self.0.bytes(&ctx.scope, &full).await?;
        self.0
            .files
            .write(&full, content.as_bytes())
            .await
            .map_err(|e| self.0.port_err(&ctx.scope, e))?;
        Ok(match before {
            None => format!("Created {rel} ({} bytes).", content.len()),
            Some(old) => format!(
                "Replaced {rel} ({} bytes; it was {} bytes).",
                content.len(),
                old.len()
            ),
        })
    }
}

pub struct EditFile(pub Workspace);

#[async_trait]
impl Tool for EditFile {
    fn stays_inside(&self) -> bool {
        true
    }

    /// A workspace skill's file: listed in later turns' instructions.
    fn acts_beyond(&self, input: &Value) -> bool {
        path::is_skill(input.get("path").and_then(Value::as_str).unwrap_or(""))
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// An edit made before finds its new text and says so (see `call`).
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file".into(),
            description: "Change a text file of your workspace: replace the one occurrence of `old` (exact text, whitespace included) with `new`. `old` must occur exactly once: include enough surrounding lines to make it unique. An empty `new` deletes `old`.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}
            }, "required": ["path", "old", "new"], "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let full = workspace_path(&ctx.scope, str_arg(&input, "path")?)?;
        let old = str_arg(&input, "old")?;
        let new = str_arg(&input, "new")?;
        if old.is_empty() {
            return Err(ToolError(
                "`old` is empty: give the exact text to replace".into(),
            ));
        }
        let rel = shown(&ctx.scope, &full);
        let text = self.0.text(&ctx.scope, &full).await?;
        let Some(at) = text.find(old) else {
            // The same edit made before (a call run again after a restart): done.
            if !new.is_empty() && occurrences(&text, new) == 1 {
                return Ok(format!(
                    "{rel} already holds the new text, once, and not the old: nothing to change."
                ));
            }
            return Err(not_found(rel, &text, old));
        };
        let count = occurrences(&text, old);
        if count > 1 {
            return Err(ToolError(format!(
                "`old` occurs {count} times in {rel}; include more of the lines around the one to change so it occurs once"
            )));
        }
        let edited = format!("{}{new}{}", &text[..at], &text[at + old.len()..]);
        self.0.check_size(rel, edited.len())?;
        self.0
            .files
            .write(&full, edited.as_bytes())
            .await
            .map_err(|e| self.0.port_err(&ctx.scope, e))?;
        let line = text[..at].matches('\n').count() + 1;
        Ok(format!(
            "Edited {rel}: replaced 1 occurrence at line {line} ({} bytes now).",
            edited.len()
        ))
    }
}

/// How many times `old` occurs in `text`, overlapping ones counted (`aa` twice in `aaa`:
/// which one to replace would be a guess).
fn occurrences(text: &str, old: &str) -> usize {
    let step = old.chars().next().map_or(1, char::len_utf8);
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = text[from..].find(old) {
        count += 1;
        from += i + step;
    }
    count
}

/// "old text not found", with the line that looks like its start when there is one.
fn not_found(rel: &str, text: &str, old: &str) -> ToolError {
    let mut message = format!("old text not found in {rel}");
    let probe = old.lines().map(str::trim).find(|l| !l.is_empty());
    let near = probe.and_then(|probe| {
        text.lines()
            .enumerate()
            .find(|(_, line)| line.contains(probe))
    });
    if let Some((i, line)) = near {
        let line: String = line.chars().take(200).collect();
        message.push_str(&format!(
            "; line {} holds its first line: {line:?}. Check the whitespace and the lines after it",
            i + 1
        ));
    }
    message.push_str("; read_file shows the exact text");
    ToolError(message)
}

pub struct ListDir(pub Workspace);

#[async_trait]
impl Tool for ListDir {
    fn stays_inside(&self) -> bool {
        true
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// A read.
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory of your workspace: its files and sub-directories (with how many files each holds). `path` is relative to the workspace; leave it out for the workspace itself.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"}
            }, "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let path = match input.get("path") {
            None | Some(Value::Null) => "",
            Some(_) => str_arg(&input, "path")?,
        };
        let full = workspace_dir(&ctx.scope, path)?;
        let rel = shown(&ctx.scope, &full);
        let files = self
            .0
            .files
            .list(&full)
            .await
            .map_err(|e| self.0.port_err(&ctx.scope, e))?;
        if files.is_empty() {
            return if rel.is_empty() {
                Ok("Your workspace is empty.".into())
            } else if self.0.bytes(&ctx.scope, &full).await?.is_some() {
                Err(ToolError(format!(
                    "{rel} is a file; read it with read_file"
                )))
            } else {
                Ok(format!("{rel} does not exist (no files under it)."))
            };
        }
        Ok(listing(rel, &entries(&full, &files)))
    }
}

/// The direct entries of `dir` from the recursive listing: a file (`None`) or a directory
/// with how many files it holds.
fn entries(dir: &str, files: &[String]) -> BTreeMap<String, Option<usize>> {
    let prefix = format!("{dir}/");
    let mut out: BTreeMap<String, Option<usize>> = BTreeMap::new();
    for f in files {
        let Some(rest) = f.strip_prefix(&prefix) else {
            continue;
        };
        match rest.split_once('/') {
            Some((sub, _)) => *out.entry(format!("{sub}/")).or_default().get_or_insert(0) += 1,
            None => {
                out.insert(rest.to_owned(), None);
            }
        }
    }
    out
}

/// The listing the model reads: a summary line, then one entry a line, cut at
/// [`MAX_LIST_ENTRIES`].
fn listing(rel: &str, entries: &BTreeMap<String, Option<usize>>) -> String {
    let dirs = entries.values().filter(|e| e.is_some()).count();
    let files = entries.len() - dirs;
    let name = if rel.is_empty() { "workspace" } else { rel };
    let mut out = format!(
        "{name}: {}, {}",
        plural(files, "file", "files"),
        plural(dirs, "directory", "directories")
    );
    for (entry, count) in entries.iter().take(MAX_LIST_ENTRIES) {
        match count {
            Some(n) => out.push_str(&format!("\n{entry} ({})", plural(*n, "file", "files"))),
            None => out.push_str(&format!("\n{entry}")),
        }
    }
    if entries.len() > MAX_LIST_ENTRIES {
        out.push_str(&format!(
            "\n… {} more entries not shown: list a sub-directory",
            entries.len() - MAX_LIST_ENTRIES
        ));
    }
    out
}

pub struct DeleteFile(pub Workspace);

#[async_trait]
impl Tool for DeleteFile {
    fn stays_inside(&self) -> bool {
        true
    }

    /// A deleted file cannot be had back.
    fn acts_beyond(&self, _input: &Value) -> bool {
        true
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// A file deleted twice is deleted (the second call says it is not there).
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "delete_file".into(),
            description: "Delete one file of your workspace (path relative to the workspace). Directories go away with their last file.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"}
            }, "required": ["path"], "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let full = workspace_path(&ctx.scope, str_arg(&input, "path")?)?;
        let Some(bytes) = self.0.bytes(&ctx.scope, &full).await? else {
            return Err(self.0.missing(&ctx.scope, &full).await);
        };
        self.0
            .files
            .delete(&full)
            .await
            .map_err(|e| self.0.port_err(&ctx.scope, e))?;
        Ok(format!(
            "Deleted {} ({} bytes).",
            shown(&ctx.scope, &full),
            bytes.len()
        ))
    }
}

#[cfg(test)]
mod tests;
