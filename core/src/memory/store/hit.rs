//! What a hit is read from besides the indexes' scores: its path from its id, its text from its
//! keyword document.

use std::collections::BTreeMap;

use crate::ids::Scope;

/// The metadata key of a chunk's file in hits of chunks indexed by earlier versions; newer
/// ones leave it out, as their id holds it ([`path_of`]).
pub(super) const PATH: &str = "path";

/// The path of the chunk `id` of `scope`: ids are `<scope>#<path>#<key>`
/// ([`chunk_id`](crate::memory::index::chunk_id)) and a key holds no `#`, so the path is what
/// lies between the scope's `#` and the last `#`, whatever `#` the path holds.
pub(super) fn path_of<'a>(scope: &Scope, id: &'a str) -> &'a str {
    id.strip_prefix(scope.as_str())
        .and_then(|rest| rest.strip_prefix('#'))
        .and_then(|rest| rest.rsplit_once('#'))
        .map_or("", |(path, _)| path)
}

/// The metadata key of the byte offset in a chunk's keyword document where the chunk's own
/// text starts (after the heading put before it); absent when it starts at 0.
pub(super) const TEXT_FROM: &str = "text_from";

/// The chunk's own text in its keyword document `doc`, past the heading put before it
/// ([`TEXT_FROM`] in `metadata`); the whole document when the offset is missing or is not
/// a character boundary of it.
pub(super) fn chunk_text(doc: String, metadata: &BTreeMap<String, String>) -> String {
    let from = metadata
        .get(TEXT_FROM)
        .and_then(|f| f.parse::<usize>().ok())
        .unwrap_or(0);
    match doc.get(from..) {
        Some(text) if from > 0 => text.to_owned(),
        _ => doc,
    }
}
