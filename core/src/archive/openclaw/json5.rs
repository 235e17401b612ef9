//! Enough JSON5 to read `openclaw.json`, which OpenClaw writes as JSON and people edit as
//! JSON5: comments (`//`, `/* */`), trailing commas, unquoted keys and single-quoted strings
//! become JSON, which `serde_json` then reads. Anything else JSON5 allows (hex numbers,
//! `Infinity`, a leading `+`) is left as it is, and the JSON reader refuses it: the caller
//! lists the file as not read, with why.

/// `text` as JSON (see the module); `None` for a comment or a string that never ends.
pub fn to_json(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                i = string(&chars, i, &mut out)?;
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                let end = (i + 2..chars.len().saturating_sub(1))
                    .find(|&j| chars[j] == '*' && chars[j + 1] == '/')?;
                i = end + 2;
                out.push(' ');
                continue;
            }
            ',' if next_significant(&chars, i + 1).is_some_and(|c| c == '}' || c == ']') => {}
            c if is_ident_start(c) && key_position(&out) => {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if next_significant(&chars, i) == Some(':') {
                    out.push('"');
                    out.push_str(&word);
                    out.push('"');
                } else {
                    out.push_str(&word);
                }
                continue;
            }
            c => out.push(c),
        }
        i += 1;
    }
    Some(out)
}

/// Copies the string starting at `at` (either quote) as a JSON string; the index after it.
fn string(chars: &[char], at: usize, out: &mut String) -> Option<usize> {
    let quote = chars[at];
    out.push('"');
    let mut i = at + 1;
    loop {
        let c = *chars.get(i)?;
        match c {
            '\\' => {
                let next = *chars.get(i + 1)?;
                match next {
                    // A line continuation: nothing.
                    '\n' => {}
                    '\'' => out.push('\''),
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
                i += 2;
                continue;
            }
            c if c == quote => {
                out.push('"');
                return Some(i + 1);
            }
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
        i += 1;
    }
}

/// Whether what was written so far ends where an object key may start (`{` or `,`).
fn key_position(out: &str) -> bool {
    matches!(out.trim_end().chars().last(), Some('{') | Some(','))
}

/// The next character that is not white space or inside a comment.
fn next_significant(chars: &[char], mut i: usize) -> Option<char> {
    while i < chars.len() {
        match chars[i] {
            c if c.is_whitespace() => i += 1,
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            c => return Some(c),
        }
    }
    None
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

#[cfg(test)]
mod tests {
    use super::to_json;

    fn read(text: &str) -> serde_json::Value {
        serde_json::from_str(&to_json(text).unwrap()).unwrap()
    }

    #[test]
    fn json5_as_people_write_it_reads_as_json() {
        let v = read(
            "// OpenClaw\n{\n  agents: { defaults: { userTimezone: 'Europe/Vienna', }, },\n  /* a note, with: colons */ \"x\": [1, 2,],\n  s: 'it\\'s \"quoted\"', t: true, n: null,\n}\n",
        );
        assert_eq!(v["agents"]["defaults"]["userTimezone"], "Europe/Vienna");
        assert_eq!(v["x"], serde_json::json!([1, 2]));
        assert_eq!(v["s"], "it's \"quoted\"");
        assert_eq!(
            (v["t"].clone(), v["n"].clone()),
            (true.into(), serde_json::Value::Null)
        );
        // Plain JSON is unchanged; a URL's `//` inside a string is not a comment.
        let v = read(r#"{"a": "http://x.test/y", "b": {"c": [true, false]}}"#);
        assert_eq!(v["a"], "http://x.test/y");
        assert_eq!(to_json("{\"a\": \"never ends}"), None);
        assert_eq!(to_json("{/* never ends"), None);
    }
}
