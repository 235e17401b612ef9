//! The YAML that SKILL.md frontmatter is written in, read without a YAML library (the
//! Worker's wasm has none, and a skill added at run time is read there too): block mappings
//! and sequences by indentation, plain, quoted and block (`|`, `>`) scalars, and flow
//! collections (`{…}`, `[…]`, so JSON too) on one line or over several, as OpenClaw writes its
//! `metadata`. Anchors, aliases, tags and several documents are not read as YAML means them:
//! such a value is plain text or refused with its line, never a panic. Where YAML would refuse
//! a plain value holding `: ` this keeps the text, so a skill written loosely still loads.

mod flow;

use serde_json::{Map, Number, Value};

use flow::Flow;

/// Deepest nesting of collections, block or flow.
const MAX_DEPTH: usize = 32;

#[derive(Clone, Copy)]
struct Line<'a> {
    /// Where the line starts in the source.
    start: usize,
    /// Spaces before `text`.
    indent: usize,
    /// The line after its indentation.
    text: &'a str,
    /// Where `text` starts in the source (moves when a list item's mapping is read).
    text_at: usize,
}

impl Line<'_> {
    fn blank(&self) -> bool {
        let t = self.text.trim();
        t.is_empty() || t.starts_with('#')
    }
}

/// Parses `src` (the frontmatter between its `---` lines, which start at `first_line` of the
/// file) into JSON values. Errors are sentences naming the line.
pub fn parse(src: &str, first_line: usize) -> Result<Value, String> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (n, raw) in src.split('\n').enumerate() {
        let body = raw.trim_end_matches(['\r', ' ', '\t']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        let text = &body[indent..];
        if text.starts_with('\t') {
            return Err(format!(
                "line {}: a tab in the indentation (YAML indents with spaces)",
                first_line + n
            ));
        }
        lines.push(Line {
            start,
            indent,
            text,
            text_at: start + indent,
        });
        start += raw.len() + 1;
    }
    let mut p = Block {
        src,
        lines,
        pos: 0,
        first_line,
    };
    p.skip_blank();
    let Some(first) = p.lines.get(p.pos).copied() else {
        return Ok(Value::Object(Map::new()));
    };
    let value = p.node(first.indent, 0)?;
    p.skip_blank();
    if p.pos < p.lines.len() {
        return Err(p.fail(p.pos, "is indented less than the lines before it"));
    }
    Ok(value)
}

/// The block parser: lines by indentation.
struct Block<'a> {
    src: &'a str,
    lines: Vec<Line<'a>>,
    pos: usize,
    first_line: usize,
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

impl<'a> Block<'a> {
    fn fail(&self, line: usize, what: &str) -> String {
        format!("line {}: {what}", self.first_line + line)
    }

    fn skip_blank(&mut self) {
        while self.lines.get(self.pos).is_some_and(Line::blank) {
            self.pos += 1;
        }
    }

    /// The collection starting at the current line, indented `indent`.
    fn node(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.fail(self.pos, &format!("nests deeper than {MAX_DEPTH} levels")));
        }
        if is_item(self.lines[self.pos].text) {
            self.sequence(indent, depth)
        } else {
            self.mapping(indent, depth)
        }
    }

    fn mapping(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let mut map = Map::new();
        loop {
            self.skip_blank();
            let Some(line) = self.lines.get(self.pos).copied() else {
                break;
            };
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return Err(self.fail(self.pos, "is indented more than the key before it"));
            }
            if is_item(line.text) {
                return Err(self.fail(self.pos, "is a list item where a key was expected"));
            }
            let (key, rest) = split_key(line.text).map_err(|why| self.fail(self.pos, &why))?;
            let value = self.value(indent, line.text_at + rest, true, depth)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            let Some(line) = self.lines.get(self.pos).copied() else {
                break;
            };
            if line.indent < indent || (line.indent == indent && !is_item(line.text)) {
                break;
            }
            if line.indent > indent {
                return Err(self.fail(self.pos, "is indented more than the list item before it"));
            }
            let after = &line.text[1..];
            let item = after.trim_start_matches(' ');
            let offset = line.text_at + 1 + (after.len() - item.len());
            let starts_scalar = item.starts_with(['{', '[', '|', '>', '#']);
            if !item.is_empty() && !starts_scalar && split_key(item).is_ok() {
                // `- key: value`: a mapping whose keys line up with `key`.
                let item_indent = offset - line.start;
                self.lines[self.pos] = Line {
                    indent: item_indent,
                    text: item,
                    text_at: offset,
                    ..line
                };
                items.push(self.mapping(item_indent, depth + 1)?);
            } else {
                items.push(self.value(indent, offset, false, depth)?);
            }
        }
        Ok(Value::Array(items))
    }

    /// The value that starts at `at` (after a key's `:` or a list item's `-`) on the current
    /// line, whose key or dash is indented `indent`; moves past it.
    fn value(
        &mut self,
        indent: usize,
        at: usize,
        in_mapping: bool,
        depth: usize,
    ) -> Result<Value, String> {
        let line = self.lines[self.pos];
        let end = line.text_at + line.text.len();
        let rest = self.src[at.min(end)..end].trim_start();
        let rest_at = end - rest.len();
        if rest.is_empty() || rest.starts_with('#') {
            self.pos += 1;
            self.skip_blank();
            let Some(next) = self.lines.get(self.pos).copied() else {
                return Ok(Value::Null);
            };
            let nested =
                next.indent > indent || (in_mapping && next.indent == indent && is_item(next.text));
            if !nested {
                return Ok(Value::Null);
            }
            let collection = is_item(next.text)
                || (!next.text.starts_with(['{', '[']) && split_key(next.text).is_ok());
            return if collection {
                self.node(next.indent, depth + 1)
            } else {
                // A value on the line below its key: `metadata:` then `  {…}`.
                self.value(indent, next.text_at, in_mapping, depth)
            };
        }
        if rest.starts_with(['|', '>']) {
            self.pos += 1;
            return self.block_scalar(indent, rest);
        }
        if rest.starts_with(['{', '[', '"', '\'']) {
            let mut flow = Flow {
                s: self.src,
                i: rest_at,
                depth,
            };
            let value = flow.value().map_err(|why| {
                // Cut off by the end: the value's first line says more than the last.
                let at = if flow.i >= self.src.len() {
                    rest_at
                } else {
                    flow.i
                };
                self.fail(self.line_of(at), &why)
            })?;
            let stop = self.line_of(flow.i);
            let line_end = self.lines[stop].text_at + self.lines[stop].text.len();
            let after = self.src[flow.i.min(line_end)..line_end].trim_start();
            if !after.is_empty() && !after.starts_with('#') {
                return Err(self.fail(stop, "has text after the value's end"));
            }
            self.pos = stop + 1;
            return Ok(value);
        }
        // A plain value, continued on more indented lines (joined with spaces).
        let mut text = strip_comment(rest).trim_end().to_owned();
        self.pos += 1;
        while let Some(next) = self.lines.get(self.pos) {
            if next.indent <= indent || next.blank() {
                break;
            }
            if split_key(next.text).is_ok() || is_item(next.text) {
                // A key (or item) indented under a value: mis-indented, not more text (read
                // as text, a requirement under it would silently be lost).
                return Err(self.fail(self.pos, "is indented more than the key before it"));
            }
            text.push(' ');
            text.push_str(strip_comment(next.text).trim_end());
            self.pos += 1;
        }
        Ok(scalar(&text))
    }

    /// `|` (lines kept) or `>` (lines folded) with optional chomping (`-`, `+`) and
    /// indentation digit; the text is every following line indented past `indent`.
    fn block_scalar(&mut self, indent: usize, header: &str) -> Result<Value, String> {
        let header_line = self.pos - 1;
        let literal = header.starts_with('|');
        let (mut chomp, mut explicit) = ('c', None);
        for c in strip_comment(&header[1..]).trim().chars() {
            match c {
                '-' | '+' => chomp = c,
                '1'..='9' => explicit = c.to_digit(10).map(|d| indent + d as usize),
                _ => {
                    return Err(self.fail(
                        header_line,
                        "has a block scalar header that is not |, >, with - + or a digit",
                    ))
                }
            }
        }
        let mut raw = Vec::new();
        while let Some(line) = self.lines.get(self.pos) {
            let empty = line.text.trim().is_empty();
            if !empty && line.indent <= indent {
                break;
            }
            raw.push((self.pos, *line));
            self.pos += 1;
        }
        let content = explicit.or_else(|| {
            raw.iter()
                .find(|(_, l)| !l.text.trim().is_empty())
                .map(|(_, l)| l.indent)
        });
        let mut lines = Vec::with_capacity(raw.len());
        for (n, line) in &raw {
            if line.text.trim().is_empty() {
                lines.push(String::new());
                continue;
            }
            let at = content.unwrap_or(line.indent);
            if line.indent < at {
                return Err(self.fail(*n, "is indented less than the block text above it"));
            }
            let full = &self.src[line.start..line.text_at + line.text.len()];
            lines.push(full[at..].to_owned());
        }
        let trailing = lines.iter().rev().take_while(|l| l.is_empty()).count();
        lines.truncate(lines.len() - trailing);
        let mut text = if literal {
            lines.join("\n")
        } else {
            fold(&lines)
        };
        match chomp {
            '-' => {}
            '+' => text.push_str(&"\n".repeat(trailing + 1)),
            _ if !text.is_empty() => text.push('\n'),
            _ => {}
        }
        Ok(Value::String(text))
    }

    /// The index of the line holding byte `at`.
    fn line_of(&self, at: usize) -> usize {
        self.lines
            .partition_point(|l| l.start <= at)
            .saturating_sub(1)
    }
}

/// `>` folding: lines joined with spaces, an empty line a newline, more indented lines kept.
fn fold(lines: &[String]) -> String {
    let mut out = String::new();
    let mut prev: Option<&str> = None;
    for line in lines {
        if line.is_empty() {
            out.push('\n');
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let kept = p.starts_with(' ') || line.starts_with(' ');
            out.push(if kept { '\n' } else { ' ' });
        }
        out.push_str(line);
        prev = Some(line);
    }
    out
}

/// A mapping line's key and where its value starts (after the `:`).
fn split_key(text: &str) -> Result<(String, usize), String> {
    if text.starts_with(['"', '\'']) {
        let mut flow = Flow {
            s: text,
            i: 0,
            depth: 0,
        };
        let key = flow.value()?;
        let rest = &text[flow.i..];
        let after = rest.trim_start();
        return match after.strip_prefix(':') {
            Some(value) if value.is_empty() || value.starts_with([' ', '\t']) => {
                Ok((key_text(key), text.len() - value.len()))
            }
            _ => Err("expected `key: value`".into()),
        };
    }
    let body = strip_comment(text);
    let colon = body
        .match_indices(':')
        .map(|(i, _)| i)
        .find(|&i| body[i + 1..].is_empty() || body[i + 1..].starts_with([' ', '\t']));
    match colon {
        Some(i) if !body[..i].trim().is_empty() => Ok((body[..i].trim_end().to_owned(), i + 1)),
        _ => Err("expected `key: value`".into()),
    }
}

/// Text up to a comment: `#` at the start or after a space.
fn strip_comment(text: &str) -> &str {
    if text.starts_with('#') {
        return "";
    }
    match text.find(" #").or_else(|| text.find("\t#")) {
        Some(i) => &text[..i],
        None => text,
    }
}

/// A plain scalar as JSON: null, booleans and numbers typed, anything else a string.
fn scalar(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let numeric = text
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
        && text.chars().any(|c| c.is_ascii_digit());
    if numeric {
        if let Ok(n) = text.parse::<i64>() {
            return Value::Number(n.into());
        }
        if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(text.to_owned())
}

/// A key as text: strings as they are, other scalars as written.
fn key_text(key: Value) -> String {
    match key {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
