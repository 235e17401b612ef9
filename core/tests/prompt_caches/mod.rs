//! Each provider's prompt cache as its documentation describes it, fed the request bodies the
//! core sent: how many input tokens each request reads from the cache, writes to it, and
//! pays in full. Tokens are estimated at 4 bytes of JSON each, per item (a tool, the system
//! prompt, a content block), as `session::estimate_tokens` counts history.
//!
//! - Anthropic: the prefix is tools → system → messages, cut in blocks; an entry is written
//!   only at a block marked `cache_control` whose prefix has at least 1,024 tokens; a mark
//!   reads the longest live entry at it or up to 20 blocks before it; an entry lives for its
//!   TTL (5 minutes, or an hour) after its last write or read.
//! - OpenAI: every request's prompt is kept for 5 minutes of disuse; a request of 1,024 tokens
//!   or more reads its longest prefix in common with a kept one, from 1,024 tokens on in steps
//!   of 128.
//! - Gemini (implicit caching): the same with a 1,024-token minimum and no steps; the order is
//!   system instruction, tools, contents.

#![allow(dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde_json::Value;

/// What one request did with the cache, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Call {
    pub read: u64,
    pub written: u64,
    pub uncached: u64,
}

impl Call {
    pub fn input(&self) -> u64 {
        self.read + self.written + self.uncached
    }
}

/// A provider's cache, asked once per request in the order they were sent.
pub trait Cache {
    fn take(&mut self, body: &Value, at_ms: u64) -> Call;
}

/// About how many tokens `item` is: 4 bytes of its JSON each, rounded up.
pub fn tokens(item: &Value) -> u64 {
    (item.to_string().len() as u64).div_ceil(4)
}

fn hash_of(prev: u64, item: &str) -> u64 {
    let mut h = DefaultHasher::new();
    prev.hash(&mut h);
    item.hash(&mut h);
    h.finish()
}

/// `item` without its `cache_control` (a mark is not content), and the TTL it marks.
fn unmarked(item: &Value) -> (Value, Option<u64>) {
    let mut item = item.clone();
    let mark = item.as_object_mut().and_then(|o| o.remove("cache_control"));
    let ttl = mark.map(|m| match m["ttl"].as_str() {
        Some("1h") => 3_600_000,
        _ => 300_000,
    });
    (item, ttl)
}

/// An Anthropic request as its cache sees it: each tool, the system prompt's blocks, then each
/// block of each message (with its place and role); `(item, tokens, mark's TTL)`.
pub fn anthropic_blocks(body: &Value) -> Vec<(String, u64, Option<u64>)> {
    let mut out = Vec::new();
    let mut put = |raw: &Value, wrap: &dyn Fn(Value) -> Value| {
        let (item, ttl) = unmarked(raw);
        let item = wrap(item);
        out.push((item.to_string(), tokens(&item), ttl));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        put(tool, &|v| v);
    }
    match &body["system"] {
        Value::Array(blocks) => blocks.iter().for_each(|b| put(b, &|v| v)),
        Value::String(s) if !s.is_empty() => {
            put(&serde_json::json!({"type": "text", "text": s}), &|v| v)
        }
        _ => {}
    }
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let role = m["role"].clone();
        for block in m["content"].as_array().into_iter().flatten() {
            put(
                block,
                &|v| serde_json::json!({"at": i, "role": role, "block": v}),
            );
        }
    }
    out
}

/// Anthropic's cache: entries at marked blocks, by the hash of the prefix through them.
pub struct Anthropic {
    /// Prefix hash → (expiry, TTL).
    entries: HashMap<u64, (u64, u64)>,
    pub min_tokens: u64,
    pub look_back: usize,
}

impl Default for Anthropic {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            min_tokens: 1024,
            look_back: 20,
        }
    }
}

impl Cache for Anthropic {
    fn take(&mut self, body: &Value, at_ms: u64) -> Call {
        let blocks = anthropic_blocks(body);
        let (mut prefix, mut hash, mut total) = (Vec::new(), 0u64, 0u64);
        for (item, n, _) in &blocks {
            hash = hash_of(hash, item);
            total += n;
            prefix.push((hash, total));
        }
        let live =
            |e: &HashMap<u64, (u64, u64)>, h: u64| e.get(&h).is_some_and(|(x, _)| *x > at_ms);
        let marks: Vec<(usize, u64)> = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.2.map(|ttl| (i, ttl)))
            .collect();
        // The longest live entry any mark reaches, at it or within the look-back before it.
        let mut hit: Option<usize> = None;
        for &(m, _) in &marks {
            let from = m.saturating_sub(self.look_back);
            if let Some(j) = (from..=m).rev().find(|&j| live(&self.entries, prefix[j].0)) {
                hit = hit.max(Some(j));
            }
        }
        let read = hit.map_or(0, |j| prefix[j].1);
        // A use refreshes an entry: the one read, and any other a mark lands on.
        let used = hit.into_iter().chain(marks.iter().map(|&(m, _)| m));
        for j in used {
            if live(&self.entries, prefix[j].0) {
                if let Some((expiry, ttl)) = self.entries.get_mut(&prefix[j].0) {
                    *expiry = at_ms + *ttl;
                }
            }
        }
        // Each mark past what was read, long enough, becomes an entry.
        let mut cached_to = read;
        for &(m, ttl) in &marks {
            let (h, through) = prefix[m];
            if through < self.min_tokens || through <= read {
                continue;
            }
            self.entries.insert(h, (at_ms + ttl, ttl));
            cached_to = cached_to.max(through);
        }
        Call {
            read,
            written: cached_to - read,
            uncached: total - cached_to,
        }
    }
}

/// A prompt as one text, in the order the provider reads it.
pub fn openai_prompt(body: &Value) -> Vec<String> {
    let mut items: Vec<String> = Vec::new();
    items.extend(
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t.to_string()),
    );
    items.extend(
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m.to_string()),
    );
    items
}

pub fn gemini_prompt(body: &Value) -> Vec<String> {
    let mut items = vec![
        body["systemInstruction"].to_string(),
        body["tools"].to_string(),
    ];
    items.extend(
        body["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c.to_string()),
    );
    items
}

/// An automatic prefix cache (OpenAI, Gemini's implicit one): the prompts it has seen and
/// until when, by the hash of each of their prefixes at a step boundary.
pub struct Automatic {
    seen: HashMap<u64, u64>,
    /// Bytes in one step of the hit (128 tokens for OpenAI; 4 bytes = any token for Gemini).
    step_bytes: usize,
    min_tokens: u64,
    keep_ms: u64,
    prompt: fn(&Value) -> Vec<String>,
}

impl Automatic {
    pub fn openai() -> Self {
        Self {
            seen: HashMap::new(),
            step_bytes: 128 * 4,
            min_tokens: 1024,
            keep_ms: 300_000,
            prompt: openai_prompt,
        }
    }

    pub fn gemini() -> Self {
        Self {
            seen: HashMap::new(),
            step_bytes: 4,
            min_tokens: 1024,
            keep_ms: 300_000,
            prompt: gemini_prompt,
        }
    }

    /// The hash of each prefix of `text` that ends at a step boundary, in order.
    fn steps(&self, text: &[u8]) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        let mut h = DefaultHasher::new();
        for (i, chunk) in text.chunks(self.step_bytes).enumerate() {
            chunk.hash(&mut h);
            if chunk.len() == self.step_bytes {
                out.push(((i + 1) * self.step_bytes, h.finish()));
            }
        }
        out
    }
}

impl Cache for Automatic {
    fn take(&mut self, body: &Value, at_ms: u64) -> Call {
        let text = (self.prompt)(body).concat().into_bytes();
        let total = (text.len() as u64).div_ceil(4);
        let steps = self.steps(&text);
        let min_bytes = (self.min_tokens * 4) as usize;
        let mut read_bytes = 0;
        if total >= self.min_tokens {
            for &(end, h) in &steps {
                if self.seen.get(&h).is_some_and(|x| *x > at_ms) {
                    read_bytes = end;
                } else {
                    break;
                }
            }
        }
        if read_bytes < min_bytes {
            read_bytes = 0;
        }
        for &(_, h) in &steps {
            self.seen.insert(h, at_ms + self.keep_ms);
        }
        let read = (read_bytes as u64 / 4).min(total);
        Call {
            read,
            written: 0,
            uncached: total - read,
        }
    }
}
