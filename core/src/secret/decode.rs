//! What a call's arguments are read as when a secret is looked for: their strings joined,
//! in order and in the opposite order, so a secret split over arguments is whole again (the
//! keys apart); each as it is and decoded (percent-escapes, and `\u…`, `\x…` and `&#…;`
//! escapes written as text, again and again: a secret percent-encoded twice is found too);
//! and the skeleton of each, its ASCII letters and digits only, so spaces, dots or dashes
//! put between a secret's characters hide nothing.

use std::borrow::Cow;

use serde_json::Value;

/// How many times the text is decoded (each escape level costs one).
const ROUNDS: usize = 3;

/// The texts of `value` a secret is looked for in: its strings and numbers (at any depth)
/// joined in order with nothing between, the same in the opposite order when there are two
/// or more (a secret split over two arguments is whole again, whichever order their names
/// sort in), and its keys joined.
pub(super) fn joined(value: &Value) -> Vec<String> {
    let (mut parts, mut keys) = (Vec::new(), String::new());
    collect(value, &mut parts, &mut keys);
    let mut out = vec![parts.concat()];
    if parts.len() > 1 {
        parts.reverse();
        out.push(parts.concat());
    }
    if !keys.is_empty() {
        out.push(keys);
    }
    out
}

fn collect<'a>(value: &'a Value, parts: &mut Vec<Cow<'a, str>>, keys: &mut String) {
    match value {
        Value::String(s) => parts.push(Cow::Borrowed(s)),
        Value::Number(n) => parts.push(Cow::Owned(n.to_string())),
        Value::Array(items) => items.iter().for_each(|v| collect(v, parts, keys)),
        Value::Object(map) => {
            for (k, v) in map {
                keys.push_str(k);
                collect(v, parts, keys);
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// `text` with its escapes decoded, up to [`ROUNDS`] levels deep.
pub(super) fn decoded(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for _ in 0..ROUNDS {
        if !out.bytes().any(|b| matches!(b, b'%' | b'\\' | b'&')) {
            break;
        }
        let next = unescaped(&percent_decoded(&out));
        if next == *out {
            break;
        }
        out = Cow::Owned(next);
    }
    out
}

/// The ASCII letters and digits of `text`, in order.
pub(super) fn skeleton(text: &str) -> Vec<u8> {
    // Each byte written, the length moved past the kept ones: no branch to mispredict.
    let mut out = vec![0u8; text.len()];
    let mut len = 0;
    for &b in text.as_bytes() {
        out[len] = b;
        len += usize::from(b.is_ascii_alphanumeric());
    }
    out.truncate(len);
    out
}

/// `text` with every `%XX` turned back into its byte (however much of it was encoded).
pub(super) fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], hex_at(bytes, i + 1, 2)) {
            (b'%', Some(byte)) => {
                out.push(byte as u8);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with `\uXXXX`, `\u{X…}`, `\xXX`, `&#N…;` and `&#xX…;` written as text turned
/// into the characters they stand for (one that stands for none is left as it is).
fn unescaped(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match escape_at(bytes, i) {
            Some((c, len)) => {
                out.push(c);
                i += len;
            }
            None => {
                // Copy up to the next byte an escape may start at (`\` and `&` are ASCII, so
                // this stays on character boundaries).
                let next = bytes[i + 1..]
                    .iter()
                    .position(|b| matches!(b, b'\\' | b'&'))
                    .map_or(bytes.len(), |p| i + 1 + p);
                out.push_str(&text[i..next]);
                i = next;
            }
        }
    }
    out
}

/// The character an escape at `i` stands for, and the escape's length.
fn escape_at(bytes: &[u8], i: usize) -> Option<(char, usize)> {
    let rest = bytes.get(i..)?;
    let (code, len) = if rest.starts_with(b"\\u{") {
        let close = rest.iter().take(10).position(|&b| b == b'}')?;
        (hex_at(bytes, i + 3, close - 3)?, close + 1)
    } else if rest.starts_with(b"\\u") {
        (hex_at(bytes, i + 2, 4)?, 6)
    } else if rest.starts_with(b"\\x") {
        (hex_at(bytes, i + 2, 2)?, 4)
    } else if rest.starts_with(b"&#x") || rest.starts_with(b"&#X") {
        let semi = rest.iter().take(12).position(|&b| b == b';')?;
        (hex_at(bytes, i + 3, semi - 3)?, semi + 1)
    } else if rest.starts_with(b"&#") {
        let semi = rest.iter().take(12).position(|&b| b == b';')?;
        let digits = std::str::from_utf8(&rest[2..semi]).ok()?;
        (digits.parse().ok()?, semi + 1)
    } else {
        return None;
    };
    Some((char::from_u32(code)?, len))
}

/// The number written in the `len` (1 to 8) hex digits at `at`.
fn hex_at(bytes: &[u8], at: usize, len: usize) -> Option<u32> {
    if !(1..=8).contains(&len) {
        return None;
    }
    let digits = bytes.get(at..at + len)?;
    digits
        .iter()
        .try_fold(0u32, |n, &b| Some(n << 4 | (b as char).to_digit(16)?))
}
