//! Flow collections (`{…}`, `[…]`, JSON included) and quoted scalars, over any number of
//! lines: what the block parser hands a value that starts with `{`, `[`, `"` or `'`.

use serde_json::{Map, Value};

use super::{key_text, scalar, MAX_DEPTH};

/// The flow parser over `s`, from byte `i`.
pub(super) struct Flow<'a> {
    pub(super) s: &'a str,
    /// Where reading has got to in `s`.
    pub(super) i: usize,
    /// Collections open around this one (the block's nesting included).
    pub(super) depth: usize,
}

impl Flow<'_> {
    fn peek(&self) -> Option<char> {
        self.s[self.i..].chars().next()
    }

    /// Whether the text before `i` ends in a space or a line break (so a `#` there starts a
    /// comment), or nothing.
    fn after_space(&self) -> bool {
        self.i == 0 || self.s[..self.i].ends_with([' ', '\t', '\n'])
    }

    /// Skips spaces, line breaks and comments.
    fn space(&mut self) {
        while let Some(c) = self.peek() {
            if c == '#' && self.after_space() {
                self.i = self.s[self.i..]
                    .find('\n')
                    .map_or(self.s.len(), |n| self.i + n);
            } else if c.is_whitespace() {
                self.i += c.len_utf8();
            } else {
                break;
            }
        }
    }

    /// One value: a collection, a quoted scalar or a plain one.
    pub(super) fn value(&mut self) -> Result<Value, String> {
        self.space();
        match self.peek() {
            None => Err("a value is missing".into()),
            Some('{') => self.collection('}'),
            Some('[') => self.collection(']'),
            Some('"') => self.double().map(Value::String),
            Some('\'') => self.single().map(Value::String),
            Some(_) => self.plain(false).map(|t| scalar(&t)),
        }
    }

    /// `{k: v, …}` or `[v, …]`, a trailing comma allowed.
    fn collection(&mut self, close: char) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        self.i += 1;
        let mut map = Map::new();
        let mut items = Vec::new();
        loop {
            self.space();
            if self.peek() == Some(close) {
                self.i += 1;
                break;
            }
            if close == '}' {
                let key = match self.peek() {
                    Some('"' | '\'') => self.value()?,
                    _ => scalar(&self.plain(true)?),
                };
                self.space();
                let value = if self.peek() == Some(':') {
                    self.i += 1;
                    self.value()?
                } else {
                    Value::Null
                };
                map.insert(key_text(key), value);
            } else {
                items.push(self.value()?);
            }
            self.space();
            match self.peek() {
                Some(',') => self.i += 1,
                Some(c) if c == close => {}
                Some(c) => return Err(format!("expected `,` or `{close}`, found `{c}`")),
                None => return Err(format!("`{close}` is missing")),
            }
        }
        self.depth -= 1;
        Ok(if close == '}' {
            Value::Object(map)
        } else {
            Value::Array(items)
        })
    }

    /// A plain scalar inside a flow collection; a key stops at `: ` too.
    fn plain(&mut self, key: bool) -> Result<String, String> {
        let start = self.i;
        while let Some(c) = self.peek() {
            let next = self.s[self.i + c.len_utf8()..].chars().next();
            let ends_key =
                key && c == ':' && next.is_none_or(|n| n.is_whitespace() || ",[]{}".contains(n));
            if ",[]{}".contains(c) || ends_key || (c == '#' && self.after_space()) {
                break;
            }
            self.i += c.len_utf8();
        }
        let text = fold_breaks(self.s[start..self.i].trim());
        if text.is_empty() {
            return Err(match self.peek() {
                Some(c) => format!("a value is missing before `{c}`"),
                None => "a value is missing".into(),
            });
        }
        Ok(text)
    }

    /// `'…'`, where `''` is one quote.
    fn single(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err("a quoted value is not closed (')".into());
            };
            self.i += c.len_utf8();
            match c {
                '\'' if self.peek() == Some('\'') => {
                    self.i += 1;
                    out.push('\'');
                }
                '\'' => return Ok(out),
                '\n' => self.line_break(&mut out),
                _ => out.push(c),
            }
        }
    }

    /// `"…"` with YAML's (and JSON's) escapes.
    fn double(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err("a quoted value is not closed (\")".into());
            };
            self.i += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\n' => self.line_break(&mut out),
                '\\' => self.escape(&mut out)?,
                _ => out.push(c),
            }
        }
    }

    /// The escape after a `\` in a double-quoted value.
    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        let Some(e) = self.peek() else {
            return Err("a quoted value ends in \\".into());
        };
        self.i += e.len_utf8();
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            '0' => out.push('\0'),
            ' ' | '"' | '\\' | '/' => out.push(e),
            'x' => out.push(self.hex(2)?),
            'u' => out.push(self.unicode()?),
            'U' => out.push(self.hex(8)?),
            // An escaped line break joins the lines without a space.
            '\n' => {
                let rest = &self.s[self.i..];
                self.i += rest.len() - rest.trim_start().len();
            }
            other => return Err(format!("unknown escape \\{other}")),
        }
        Ok(())
    }

    /// A line break inside a quoted value: one space, or a newline per empty line after it;
    /// the spaces around it dropped.
    fn line_break(&mut self, out: &mut String) {
        out.truncate(out.trim_end_matches([' ', '\t']).len());
        let rest = &self.s[self.i..];
        let skipped = &rest[..rest.len() - rest.trim_start().len()];
        let empty = skipped.matches('\n').count();
        self.i += skipped.len();
        if empty == 0 {
            out.push(' ');
        } else {
            out.push_str(&"\n".repeat(empty));
        }
    }

    /// `n` hex digits as one character.
    fn hex(&mut self, n: usize) -> Result<char, String> {
        let code = self.hex_at(self.i, n).ok_or("an escape needs hex digits")?;
        self.i += n;
        char::from_u32(code).ok_or_else(|| format!("\\u{code:x} is not a character"))
    }

    /// `\uXXXX`, a surrogate pair (`\uD83D\uDE00`, as JSON writes it) included.
    fn unicode(&mut self) -> Result<char, String> {
        let hi = self.hex_at(self.i, 4).ok_or("an escape needs hex digits")?;
        self.i += 4;
        if !(0xD800..0xDC00).contains(&hi) {
            return char::from_u32(hi).ok_or_else(|| format!("\\u{hi:04x} is not a character"));
        }
        let lo = Some(self.i)
            .filter(|&at| self.s[at..].starts_with("\\u"))
            .and_then(|at| self.hex_at(at + 2, 4))
            .filter(|lo| (0xDC00..0xE000).contains(lo))
            .ok_or_else(|| format!("\\u{hi:04x} is half a surrogate pair"))?;
        self.i += 6;
        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
            .ok_or_else(|| "a surrogate pair that is not a character".into())
    }

    /// The `n` hex digits at byte `at`, if they are.
    fn hex_at(&self, at: usize, n: usize) -> Option<u32> {
        let digits = self.s.get(at..at + n)?;
        if !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    }
}

/// A plain scalar over several lines: each line break, with the spaces around it, is one space.
fn fold_breaks(text: &str) -> String {
    if !text.contains('\n') {
        return text.to_owned();
    }
    text.split('\n')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}
