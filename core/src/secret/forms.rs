//! The forms a secret is looked for in (see [`super::Secrets`]): as it is, reversed, in
//! ROT13, in hex (either case), in base32 (either case) and base64 (either alphabet) at any
//! alignment inside a longer encoded text, in base64 twice, and its long fragments. Each is
//! kept as its skeleton (its ASCII letters and digits, see [`super::decode::skeleton`]), so
//! separators put between its characters hide nothing; a form whose skeleton is too short
//! to be looked for safely that way is kept as it is.
//!
//! Built once per set of secrets: a call's check only searches.

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;

use super::decode::skeleton;

/// A form is looked for by its skeleton only once that has this many characters (a shorter
/// one, separators gone, could be ordinary text): shorter ones are looked for as they are.
/// A fragment is at least this long too.
pub(super) const MIN_SKELETON: usize = 12;

/// The forms of one secret.
#[derive(Default)]
pub(super) struct Forms {
    /// Skeletons, each at least [`MIN_SKELETON`] bytes.
    pub skeletons: Vec<Vec<u8>>,
    /// Forms whose skeleton is shorter, looked for as they are.
    pub exact: Vec<String>,
}

impl Forms {
    /// Adds the forms of `secret`.
    pub fn add(&mut self, secret: &str) {
        let bytes = secret.as_bytes();
        let mut whole = vec![
            secret.to_owned(),
            secret.chars().rev().collect(),
            rot13(secret),
            hex(bytes, b"0123456789abcdef"),
            hex(bytes, b"0123456789ABCDEF"),
        ];
        let once = base64_cores(bytes);
        for core in &once {
            whole.extend(base64_cores(core.as_bytes()));
        }
        whole.extend(once);
        for core in base32_cores(bytes) {
            whole.push(core.to_ascii_lowercase());
            whole.push(core);
        }
        for form in whole {
            let sk = skeleton(&form);
            if sk.len() >= MIN_SKELETON {
                self.skeletons.push(sk);
            } else if !form.is_empty() {
                self.exact.push(form);
            }
        }
        self.skeletons.extend(fragments(&skeleton(secret)));
        self.skeletons.sort();
        self.skeletons.dedup();
        self.exact.sort();
        self.exact.dedup();
    }
}

/// The pieces of a secret's skeleton `sk` a split leaves whole in one of its parts: split in
/// two (over two arguments, or two calls), one part holds at least half of it. Each window
/// of that length (at least [`MIN_SKELETON`]) that mixes letters and digits, as a random
/// key does and a word does not.
fn fragments(sk: &[u8]) -> Vec<Vec<u8>> {
    let len = sk.len().div_ceil(2).max(MIN_SKELETON);
    if len >= sk.len() {
        return Vec::new();
    }
    sk.windows(len)
        .filter(|w| w.iter().any(u8::is_ascii_digit) && w.iter().any(u8::is_ascii_alphabetic))
        .map(<[u8]>::to_vec)
        .collect()
}

fn rot13(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'a'..='m' | 'A'..='M' => (c as u8 + 13) as char,
            'n'..='z' | 'N'..='Z' => (c as u8 - 13) as char,
            _ => c,
        })
        .collect()
}

fn hex(bytes: &[u8], digits: &[u8; 16]) -> String {
    bytes
        .iter()
        .flat_map(|b| [digits[usize::from(b >> 4)], digits[usize::from(b & 15)]])
        .map(char::from)
        .collect()
}

/// The base64 texts that stand for `bytes` inside any base64 encoding, in either alphabet:
/// preceded by 0, 1 or 2 other bytes, its own characters start at 0, 2 or 3 and end before
/// the last one that shares bits with what follows.
fn base64_cores(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for lead in 0..3 {
        let mut input = vec![0u8; lead];
        input.extend_from_slice(bytes);
        let (start, end) = ((lead * 8).div_ceil(6), input.len() * 8 / 6);
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            if let Some(core) = engine.encode(&input).get(start..end) {
                out.push(core.to_owned());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// As [`base64_cores`], in base32 (RFC 4648, upper case): 0 to 4 bytes before.
fn base32_cores(bytes: &[u8]) -> Vec<String> {
    (0..5)
        .filter_map(|lead| {
            let mut input = vec![0u8; lead];
            input.extend_from_slice(bytes);
            let (start, end) = ((lead * 8).div_ceil(5), input.len() * 8 / 5);
            base32(&input).get(start..end).map(str::to_owned)
        })
        .collect()
}

/// RFC 4648 base32 without padding: a dozen lines rather than a crate in the Worker's wasm.
pub(super) fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(bytes.len() * 8 / 5 + 1);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((acc >> bits) & 31) as usize]));
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}
