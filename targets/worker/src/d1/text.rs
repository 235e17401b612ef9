//! TextIndex over D1's FTS5 in the layout shared with native ([`fts5_sql`]).

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use clawless_platform::text::{fts5_query, fts5_sql, rank_text};
use clawless_platform::vectors::matches;
use clawless_platform::{Result, TextDoc, TextHit, TextIndex};

use super::{metadata_of, Arg, Cell, D1};

/// TextIndex over D1's FTS5 in the layout shared with native ([`fts5_sql`]), ranked by its
/// `bm25()`. Each call is one batch, so one transaction.
pub struct D1Text(pub D1);

impl D1Text {
    /// Runs each of `statements` with each of `params` (one `?1` each), in one batch.
    async fn run_grouped(&self, statements: &[&str], params: &[String]) -> Result<()> {
        let batch = params
            .iter()
            .flat_map(|p| statements.iter().map(move |sql| (*sql, vec![Arg::Text(p)])))
            .collect();
        self.0.batch(batch).await
    }
}

#[async_trait]
impl TextIndex for D1Text {
    async fn upsert(&self, docs: Vec<TextDoc>) -> Result<()> {
        let params = fts5_sql::upsert_params(&docs)?;
        self.run_grouped(&fts5_sql::UPSERT, &params).await
    }

    async fn search(
        &self,
        query: &str,
        top_k: usize,
        filter: &BTreeMap<String, String>,
    ) -> Result<Vec<TextHit>> {
        let Some(q) = fts5_query(query) else {
            return Ok(Vec::new());
        };
        let rows = self.0.rows(fts5_sql::SEARCH, &[Arg::Text(&q)]).await?;
        let mut hits = Vec::new();
        for row in &rows {
            let metadata = metadata_of(row.get(1));
            if !matches(&metadata, filter) {
                continue;
            }
            // bm25() is lower-is-better and negative; the port's score is positive.
            let score = -(row.get(2).and_then(Cell::float).unwrap_or(0.0) as f32);
            hits.push(TextHit {
                id: row.first().and_then(Cell::text).unwrap_or_default(),
                score: score.max(f32::MIN_POSITIVE),
                metadata,
            });
        }
        Ok(rank_text(hits, top_k))
    }

    async fn delete(&self, ids: &[String]) -> Result<()> {
        let params = fts5_sql::ids_params(ids);
        self.run_grouped(&fts5_sql::DELETE, &params).await
    }

    async fn texts(&self, ids: &[String]) -> Result<HashMap<String, String>> {
        let mut out = HashMap::new();
        for p in fts5_sql::ids_params(ids) {
            for row in self.0.rows(fts5_sql::TEXTS, &[Arg::Text(&p)]).await? {
                if let (Some(id), Some(body)) = (
                    row.first().and_then(Cell::text),
                    row.get(1).and_then(Cell::text),
                ) {
                    out.insert(id, body);
                }
            }
        }
        Ok(out)
    }
}
