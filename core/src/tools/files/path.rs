//! Where the workspace tools may reach: a path the model gives, relative to the
//! conversation's workspace `workspace/<scope>/`, checked and turned into a Files port path.
//!
//! The rules, each refusal with its reason (the model corrects its call from it):
//! - relative only: no leading `/` (nor `//server`), no drive (`C:`), no `~` at the start;
//!   no `:` anywhere (the Files port refuses it too);
//! - `/` is the only separator: a backslash is refused (`..\x`, `\\server`, `C:\x`);
//! - no `..` segment anywhere (`a/../b` too) and no segment of dots only (`...`); `.`
//!   segments and repeated `/` are dropped (`./notes//a.md` is `notes/a.md`);
//! - no control character (NUL, newline, DEL, C1) and no text-direction override
//!   (a name that displays as something else);
//! - `%` is literal, except an escape that decodes to `.`, `/`, `\`, `:`, `%`, a control
//!   character or an overlong UTF-8 start (`%2e%2e`, `%2f`, `%5c`, `%252e`, `%c0%ae`):
//!   refused, in case anything decodes it later;
//! - at most [`MAX_PATH_BYTES`] bytes, [`MAX_SEGMENTS`] segments of at most
//!   [`MAX_SEGMENT_BYTES`] bytes each;
//! - a file path is not empty and does not end in `/`; a directory path may be empty (the
//!   workspace itself).
//!
//! Unicode names are allowed as given, Windows reserved names (`con`, `nul`) too: no adapter
//! is a Windows file system. The port checks the result again ([`clawless_platform::files::normalize`]).

use super::ToolError;
use crate::ids::Scope;

/// Longest path the model may give, in bytes.
pub const MAX_PATH_BYTES: usize = 256;
/// Longest file or directory name, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 128;
/// Deepest path, in segments.
pub const MAX_SEGMENTS: usize = 16;

/// The workspace of a conversation on the Files port: `workspace/<scope>`.
pub fn root(scope: &Scope) -> String {
    format!("workspace/{scope}")
}

/// The port path of a file in the conversation's workspace.
pub fn workspace_path(scope: &Scope, path: &str) -> Result<String, ToolError> {
    let rel = relative(path).map_err(|why| refused(path, why))?;
    if rel.is_empty() {
        return Err(refused(path, "a file path is required".into()));
    }
    if path.ends_with('/') {
        return Err(refused(path, "names a directory (ends with /)".into()));
    }
    Ok(format!("{}/{rel}", root(scope)))
}

/// Whether `path` names something under the workspace's `skills/` (its own skills, listed in
/// the instructions of later turns; see [`crate::tools::skill::workspace_skills`]), in any
/// case (a file system may not tell `Skills` from `skills`). A path refused anyway is not.
pub fn is_skill(path: &str) -> bool {
    relative(path).is_ok_and(|rel| {
        rel.split('/')
            .next()
            .is_some_and(|first| first.eq_ignore_ascii_case("skills"))
    })
}

/// The port path of a directory in the conversation's workspace; `""` is the workspace.
pub fn workspace_dir(scope: &Scope, path: &str) -> Result<String, ToolError> {
    let rel = relative(path).map_err(|why| refused(path, why))?;
    Ok(if rel.is_empty() {
        root(scope)
    } else {
        format!("{}/{rel}", root(scope))
    })
}

/// The model's view of a port path: relative to the workspace (`""` for the workspace).
pub fn shown<'a>(scope: &Scope, full: &'a str) -> &'a str {
    let root = root(scope);
    full.strip_prefix(&root)
        .map(|rest| rest.trim_start_matches('/'))
        .unwrap_or(full)
}

fn refused(path: &str, why: String) -> ToolError {
    ToolError(format!(
        "path {path:?} refused: {why}. Paths are relative to your workspace, like notes/todo.md."
    ))
}

/// The checked, normalised relative path (`""` for the workspace itself), or why not.
fn relative(path: &str) -> Result<String, String> {
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("longer than {MAX_PATH_BYTES} bytes"));
    }
    if let Some(c) = path.chars().find(|c| c.is_control() || is_bidi_control(*c)) {
        return Err(format!("holds the control character {c:?}"));
    }
    if path.starts_with('/') {
        return Err("absolute (starts with /)".into());
    }
    if path.contains('\\') {
        return Err("holds a backslash; the separator is /".into());
    }
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err("absolute (starts with a drive)".into());
    }
    if path.contains(':') {
        return Err("holds a ':'".into());
    }
    if path.starts_with('~') {
        return Err("starts with ~ (there is no home directory here)".into());
    }
    if let Some(escape) = encoded_separator(path) {
        return Err(format!(
            "holds {escape}, an encoded dot, separator or control"
        ));
    }
    segments(path)
}

/// Splits into segments: `.` and empty ones dropped, `..` and dots-only refused, lengths
/// checked.
fn segments(path: &str) -> Result<String, String> {
    let mut kept = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err("`..` would leave the workspace".into()),
            s if s.bytes().all(|b| b == b'.') => {
                return Err(format!("{s:?} is a name of dots only"))
            }
            s if s.len() > MAX_SEGMENT_BYTES => {
                return Err(format!("a name is longer than {MAX_SEGMENT_BYTES} bytes"))
            }
            s => kept.push(s),
        }
    }
    if kept.len() > MAX_SEGMENTS {
        return Err(format!("deeper than {MAX_SEGMENTS} levels"));
    }
    Ok(kept.join("/"))
}

/// Characters that reorder displayed text (U+202A–U+202E, U+2066–U+2069), which make a name
/// look like another.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The first `%XX` escape that decodes to something a decoder would turn into a way out:
/// `.`, `/`, `\`, `:`, `%` (a double encoding), a control character, or the start of an
/// overlong UTF-8 sequence.
fn encoded_separator(path: &str) -> Option<&str> {
    let bytes = path.as_bytes();
    (0..bytes.len().saturating_sub(2)).find_map(|i| {
        if bytes[i] != b'%' {
            return None;
        }
        let hex = path.get(i + 1..i + 3)?;
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let byte = u8::from_str_radix(hex, 16).ok()?;
        // 0xC0 and 0xC1 only start overlong encodings (`%c0%ae` is a dot to a lax decoder).
        let risky = matches!(byte, b'.' | b'/' | b'\\' | b':' | b'%' | 0xc0 | 0xc1)
            || byte < 0x20
            || byte == 0x7f;
        risky.then(|| &path[i..i + 3])
    })
}
