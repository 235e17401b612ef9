//! The ids Vectorize stores: at most 64 bytes, the same for the same id, distinct for distinct
//! ids, and mapped back to the chunk id on the way out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashSet};

use super::{from_stored, stored_id, to_stored, MAX_ID_BYTES};

/// A memory chunk id as the core makes them: `<scope>#<path>#<key>`.
fn chunk_id(user: u64, day: usize, key: usize) -> String {
    let scope = format!("assistant/main/u{user}");
    format!("{scope}#memory/{scope}/memory/2026-10-{day:02}.md#{key:016x}")
}

fn metadata() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("scope".to_owned(), "assistant/main/u111111111".to_owned()),
        (
            "text".to_owned(),
            "Maya's birthday is on March 3.".to_owned(),
        ),
    ])
}

#[test]
fn long_ids_are_stored_under_short_distinct_ids_and_come_back() {
    let mut seen = HashSet::new();
    for user in [111_111_111u64, 111_111_112] {
        for day in 1..=28 {
            for key in 0..40 {
                let id = chunk_id(user, day, key);
                assert!(id.len() > MAX_ID_BYTES, "{id}");
                let stored = stored_id(&id);
                assert!(stored.len() <= MAX_ID_BYTES, "{stored}");
                assert_eq!(stored_id(&id), stored, "deterministic");
                assert!(seen.insert(stored), "no two ids share a stored id: {id}");
                let (stored, meta) = to_stored(&id, &metadata());
                let (back, back_meta) = from_stored(stored, meta);
                assert_eq!((back, back_meta), (id, metadata()), "round trip");
            }
        }
    }
    // Ids that differ only past byte 64, or only in their first byte.
    let long = "x".repeat(200);
    let variants = [
        format!("{long}a"),
        format!("{long}b"),
        format!("a{long}"),
        format!("b{long}"),
        format!("{long}ab"),
        format!("{long}ba"),
    ];
    let stored: HashSet<String> = variants.iter().map(|v| stored_id(v)).collect();
    assert_eq!(stored.len(), variants.len(), "{stored:?}");
}

#[test]
fn ids_within_the_limit_are_stored_as_they_are() {
    for id in [
        "a",
        &"y".repeat(MAX_ID_BYTES),
        "assistant/main/u1#MEMORY.md#0",
    ] {
        assert_eq!(stored_id(id), id);
        let (stored, meta) = to_stored(id, &metadata());
        assert_eq!(stored, id);
        assert_eq!(meta, metadata(), "no id copied into the metadata");
        assert_eq!(from_stored(stored, meta), (id.to_owned(), metadata()));
    }
    // A multi-byte id over 64 bytes though under 64 characters is hashed too.
    let accented = "é".repeat(40);
    assert!(stored_id(&accented).len() <= MAX_ID_BYTES);
    assert_ne!(stored_id(&accented), accented);
}
