#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::collections::BTreeMap;

use clawless_platform::{TextDoc, TextIndex};

use crate::store::{in_transaction, SqlText};

fn doc(i: usize) -> TextDoc {
    TextDoc {
        id: format!("scope#path#{i:05}"),
        text: format!("note {i} about the harbour and boat number {i}"),
        metadata: BTreeMap::from([("scope".to_owned(), "s".to_owned())]),
    }
}

/// The `EXPLAIN QUERY PLAN` lines of `sql` (one `?1`).
async fn plan(db: &Db, sql: &'static str) -> Vec<String> {
    db.call(move |c| {
        block_on(async {
            let mut rows = c
                .query(&format!("EXPLAIN QUERY PLAN {sql}"), params!["[]"])
                .await
                .map_err(db_err)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().await.map_err(db_err)? {
                out.push(row.get::<String>(3).map_err(db_err)?);
            }
            Ok(out)
        })
    })
    .await
    .unwrap()
}

/// Whether a plan reads a whole table: a `SCAN` of anything but the JSON list of ids, or of
/// an FTS5 table with no constraint (its index string after the colon is empty).
fn scans(plan: &[String]) -> bool {
    plan.iter().any(|line| {
        line.starts_with("SCAN ") && !line.starts_with("SCAN json_each") && {
            !line.contains("VIRTUAL TABLE") || line.ends_with(':')
        }
    })
}

#[tokio::test]
async fn text_deletes_and_replaces_find_rows_through_an_index() {
    let db = open_db(":memory:").unwrap();
    db.call(|c| {
        block_on(c.execute(
            "CREATE VIRTUAL TABLE text_fts USING fts5(id UNINDEXED, body, metadata UNINDEXED)",
            (),
        ))
        .map(drop)
        .map_err(db_err)
    })
    .await
    .unwrap();
    // The first layout's delete read every row per id: the check below sees it.
    let legacy = plan(&db, "DELETE FROM text_fts WHERE id = ?1").await;
    assert!(scans(&legacy), "{legacy:?}");
    for sql in fts5_sql::DELETE.iter().chain(&fts5_sql::UPSERT[..2]) {
        let p = plan(&db, sql).await;
        assert!(!scans(&p), "{sql}: {p:?}");
    }
}

#[tokio::test]
async fn a_big_text_index_deletes_most_of_itself_in_one_call() {
    let db = open_db(":memory:").unwrap();
    let text = SqlText::new(db.clone());
    text.upsert((0..5_000).map(doc).collect()).await.unwrap();
    let gone: Vec<String> = (0..5_000)
        .filter(|i| i % 500 != 0)
        .map(|i| doc(i).id)
        .collect();
    text.delete(&gone).await.unwrap();
    let none = BTreeMap::new();
    let hits = text.search("harbour", 100, &none).await.unwrap();
    let mut ids: Vec<_> = hits.into_iter().map(|h| h.id).collect();
    ids.sort();
    assert_eq!(
        ids,
        (0..5_000)
            .step_by(500)
            .map(|i| doc(i).id)
            .collect::<Vec<_>>()
    );
    let counts: (i64, i64) = db
        .call(|c| {
            block_on(async {
                let mut rows = c
                    .query(
                        "SELECT (SELECT count(*) FROM text_docs), (SELECT count(*) FROM text_body)",
                        (),
                    )
                    .await
                    .map_err(db_err)?;
                let row = rows.next().await.map_err(db_err)?.unwrap();
                Ok((row.get(0).map_err(db_err)?, row.get(1).map_err(db_err)?))
            })
        })
        .await
        .unwrap();
    assert_eq!(counts, (10, 10), "no row left behind in either table");
    // A replace of a kept document and a repeated id in one call: the last one wins.
    let mut again = doc(500);
    again.text = "moved to the lighthouse".into();
    text.upsert(vec![doc(500), again]).await.unwrap();
    assert_eq!(
        text.search("lighthouse", 5, &none).await.unwrap()[0].id,
        doc(500).id
    );
    assert_eq!(text.search("harbour", 100, &none).await.unwrap().len(), 9);
}

#[tokio::test]
async fn documents_of_the_first_layout_move_to_the_indexed_one() {
    // The Worker's D1 runs this migration on databases from before this layout.
    let db = open_db(":memory:").unwrap();
    db.call(|c| {
        block_on(async {
            c.execute(
                "CREATE VIRTUAL TABLE text_fts USING fts5(id UNINDEXED, body, metadata UNINDEXED, tokenize = 'unicode61')",
                (),
            )
            .await
            .map_err(db_err)?;
            c.execute(
                "INSERT INTO text_fts (id, body, metadata) VALUES ('old', 'the old cat Miso', '{\"scope\":\"a\"}'), ('both', 'stale text', '{}')",
                (),
            )
            .await
            .map_err(db_err)?;
            Ok(())
        })
    })
    .await
    .unwrap();
    let text = SqlText::new(db.clone());
    let mut both = doc(1);
    both.id = "both".into();
    both.text = "fresh text".into();
    text.upsert(vec![both]).await.unwrap();
    db.call(|c| {
        in_transaction(c, || {
            block_on(async {
                for sql in fts5_sql::MIGRATE_LEGACY {
                    c.execute(sql, ()).await.map_err(db_err)?;
                }
                Ok(())
            })
        })
    })
    .await
    .unwrap();
    let none = BTreeMap::new();
    let hits = text.search("miso", 5, &none).await.unwrap();
    assert_eq!(hits[0].id, "old");
    assert_eq!(hits[0].metadata.get("scope").map(String::as_str), Some("a"));
    assert!(
        text.search("stale", 5, &none).await.unwrap().is_empty(),
        "newer rows win"
    );
    text.delete(&["old".into()]).await.unwrap();
    assert!(text.search("miso", 5, &none).await.unwrap().is_empty());
}
