//! Where a chunk's text is kept: once, as its keyword document.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::store;
use super::*;
use crate::memory::embed::LocalEmbedder;
use futures::executor::block_on;

#[test]
fn a_chunks_text_is_kept_once_as_its_keyword_document() {
    block_on(async {
        let (m, p) = store();
        let scope = &Scope::new("assistant/main/u7");
        let path = format!("{}/MEMORY.md", root(scope));
        // One long section: its later chunks get the heading put before their text.
        let mut file = String::from("# Garden\n");
        for i in 0..200 {
            file.push_str(&format!(
                "Line {i} about the tomato plants and their watering.\n"
            ));
        }
        file.push_str("The shed key is under the blue pot.\n");
        p.files.write(&path, file.as_bytes()).await.unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());

        let filter = BTreeMap::from([("scope".to_owned(), scope.to_string())]);
        let probe = LocalEmbedder::default().embed_one("shed key");
        let vector_hits = p.vectors.query(&probe, 1_000, &filter).await.unwrap();
        let text_hits = p.text.search("tomato", 1_000, &filter).await.unwrap();
        assert!(vector_hits.len() > 1, "the section is cut into chunks");
        assert_eq!(text_hits.len(), vector_hits.len());
        for meta in vector_hits
            .iter()
            .map(|h| &h.metadata)
            .chain(text_hits.iter().map(|h| &h.metadata))
        {
            assert!(
                !meta.contains_key("text") && !meta.contains_key("path"),
                "no metadata repeats the text or the path the id holds: {meta:?}"
            );
        }
        let ids: Vec<String> = vector_hits.iter().map(|h| h.id.clone()).collect();
        let docs = p.text.texts(&ids).await.unwrap();
        assert_eq!(
            docs.len(),
            ids.len(),
            "each chunk's text is its keyword document"
        );
        assert!(
            docs.values()
                .all(|d| d.starts_with("# Garden\n") || d.starts_with("Garden\n")),
            "each document starts with the section's heading, its own or put before it"
        );
        assert!(docs.values().any(|d| d.starts_with("Garden\n")));

        let hits = m.search(scope, "where is the shed key").await.unwrap();
        let hit = &hits[0];
        assert!(hit.text.contains("shed key"), "{hits:?}");
        assert!(!hit.text.starts_with("Garden"), "{hit:?}");
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(
            hit.text.trim_end(),
            lines[hit.start_line - 1..hit.end_line].join("\n"),
            "the hit's text is the chunk's own lines, without the heading put before it"
        );
    });
}

#[test]
fn chunks_indexed_with_their_text_in_the_metadata_are_still_found_with_it() {
    block_on(async {
        let (m, p) = store();
        let scope = &Scope::new("assistant/main");
        let id = format!("{scope}#{}/MEMORY.md#1", root(scope));
        let meta = BTreeMap::from([
            ("scope".to_owned(), scope.to_string()),
            ("path".to_owned(), format!("{}/MEMORY.md", root(scope))),
            ("lines".to_owned(), "3-3".to_owned()),
            ("text".to_owned(), "Our cat is called Miso.".to_owned()),
        ]);
        p.vectors
            .upsert(vec![VectorRecord {
                id: id.clone(),
                vector: LocalEmbedder::default().embed_one("Our cat is called Miso."),
                metadata: meta.clone(),
            }])
            .await
            .unwrap();
        p.text
            .upsert(vec![TextDoc {
                id,
                text: "# Pets\nOur cat is called Miso.".into(),
                metadata: meta,
            }])
            .await
            .unwrap();
        let hits = m.search(scope, "what is my cat called").await.unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].text, "Our cat is called Miso.");
        assert_eq!((hits[0].start_line, hits[0].end_line), (3, 3));
    });
}

#[test]
fn a_vector_whose_text_was_never_written_is_left_out() {
    block_on(async {
        let (m, p) = store();
        let scope = &Scope::new("assistant/main");
        let path = format!("{}/MEMORY.md", root(scope));
        p.files
            .write(&path, b"Our cat is called Miso.\n")
            .await
            .unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());
        // A run cut short after the vector's write, before its keyword document's.
        p.vectors
            .upsert(vec![VectorRecord {
                id: format!("{scope}#{path}#half-written"),
                vector: LocalEmbedder::default().embed_one("what is my cat called"),
                metadata: BTreeMap::from([
                    ("scope".to_owned(), scope.to_string()),
                    ("path".to_owned(), path.clone()),
                    ("lines".to_owned(), "9-9".to_owned()),
                ]),
            }])
            .await
            .unwrap();
        let hits = m.search(scope, "what is my cat called").await.unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].text.trim_end(), "Our cat is called Miso.");
    });
}

#[test]
fn a_hits_path_is_read_from_its_id_whatever_hashes_the_path_holds() {
    block_on(async {
        let (m, p) = store();
        let scope = &Scope::new("assistant/main/u7");
        let path = format!("{}/notes #2 #draft.md", root(scope));
        p.files
            .write(&path, b"The shed key is under the blue pot.\n")
            .await
            .unwrap();
        assert!(m.index_file(scope, &path).await.unwrap());
        let hits = m.search(scope, "shed key").await.unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].path, path);
        assert_eq!(path_of(scope, "assistant/main/u7#a#b.md#00ff-2"), "a#b.md");
        assert_eq!(path_of(scope, "assistant/main/u8#a.md#00ff"), "");
    });
}
