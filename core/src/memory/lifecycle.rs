//! Memory's lifecycle around conversations: recall before a reply, the summary when a session
//! ends, the daily consolidation of notes into `MEMORY.md`, finding every owner's scope for the
//! scheduled re-index, and the one-time move of the memory that was shared by a whole
//! connector before memory became per person (see [`super::scope`]).

use std::collections::BTreeSet;
use std::time::Duration;

use clawless_platform::{Clock, Kv};

use super::digest;
use super::notes::note_of_day;
use super::scope::{is_legacy_file, legacy_scope, scope, MemoryOwner};
use super::store::{root, MemoryError, MemoryStore};
use crate::ids::{ConnectorId, Scope, SessionKey};
use crate::keys;
use crate::llm::ModelChain;
use crate::session::Session;

const DAY_MS: u64 = 86_400_000;
const WEEK: Duration = Duration::from_secs(7 * 86_400);

/// What the lifecycle works with: the store and the Kv and Clock ports.
pub struct Lifecycle<'a> {
    pub memory: &'a MemoryStore,
    pub kv: &'a dyn Kv,
    pub clock: &'a dyn Clock,
}

impl Lifecycle<'_> {
    /// Memories relevant to `text` in `scope`, formatted for the system prompt; empty when
    /// there are none or memory search failed (logged: a turn never fails for lack of recall).
    pub async fn recall(&self, scope: &Scope, text: &str) -> String {
        match self.memory.search(scope, text).await {
            Ok(hits) => {
                let prefix = format!("{}/", root(scope));
                hits.iter()
                    .map(|h| {
                        format!(
                            "[{}:{}-{}] {}",
                            h.path.trim_start_matches(&prefix),
                            h.start_line,
                            h.end_line,
                            h.text
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            Err(e) => {
                tracing::warn!(%scope, error = %e, "memory recall failed");
                String::new()
            }
        }
    }

    /// A session ended (`/new`, or idle past `idle_minutes`): unless the model saved something
    /// during it, a short summary goes to today's daily note of the conversation's own scope.
    /// Once per session, even when the job around it is retried; failures are logged, never
    /// in the user's way.
    pub async fn end_session(
        &self,
        chain: &ModelChain,
        scope: &Scope,
        key: &SessionKey,
        s: &Session,
    ) {
        if s.messages.is_empty() || digest::wrote_memory(&s.messages) {
            return;
        }
        let marker = keys::summarized(key, s.last_update_id);
        match self.kv.put_if_absent(&marker, b"1", Some(WEEK)).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "session summary skipped");
                return;
            }
        }
        let summary = match digest::ask(
            chain,
            digest::SUMMARY_PROMPT,
            digest::transcript(&s.messages),
        )
        .await
        {
            Ok(summary) => summary,
            Err(e) => {
                tracing::warn!(error = %e, "session summary by the model failed; writing the topics");
                digest::fallback_summary(&s.messages)
            }
        };
        let Some(summary) = summary else {
            return;
        };
        let note = note_of_day((self.clock.now_ms() / DAY_MS) as i64);
        let text = format!("## Session summary\n{summary}");
        if let Err(e) = self.memory.append(scope, &note, &text).await {
            tracing::warn!(%scope, error = %e, "could not write the session summary");
        }
    }

    /// Every owner's scope of `agent` on `connector` that has memory files or index entries.
    pub async fn scopes(
        &self,
        agent: &str,
        connector: &ConnectorId,
    ) -> Result<Vec<Scope>, MemoryError> {
        let base = legacy_scope(agent, connector);
        let mut owners = BTreeSet::new();
        let files_root = format!("{}/", root(&base));
        for path in self.memory.files.list(&root(&base)).await? {
            owners.extend(first_segment(&path, &files_root));
        }
        let index_root = keys::memory_manifests(&base);
        for key in self.kv.list(&index_root, 100_000).await? {
            owners.extend(first_segment(&key, &index_root));
        }
        Ok(owners
            .into_iter()
            .filter_map(|seg| MemoryOwner::parse(&seg))
            .map(|owner| scope(agent, connector, owner))
            .collect())
    }

    /// Once a day per scope: the durable points of the daily notes of the past week that were
    /// not consolidated yet are appended to `MEMORY.md` (the agent's model picks them). Two
    /// schedulers never do the same note: each is claimed with a put-if-absent.
    pub async fn consolidate(&self, chain: &ModelChain, scope: &Scope) {
        let today = (self.clock.now_ms() / DAY_MS) as i64;
        let ran = keys::consolidation_ran(scope);
        if self.kv.get(&ran).await.ok().flatten().as_deref() == Some(today.to_string().as_bytes()) {
            return;
        }
        let mut complete = true;
        for day in (today - 7..today).rev() {
            if let Err(e) = self.consolidate_note(chain, scope, day).await {
                complete = false;
                tracing::warn!(%scope, day, error = %e, "consolidation failed; retried later");
            }
        }
        if complete {
            if let Err(e) = self
                .kv
                .put(&ran, today.to_string().as_bytes(), Some(WEEK))
                .await
            {
                tracing::warn!(%scope, error = %e, "could not record the consolidation");
            }
        }
    }

    async fn consolidate_note(
        &self,
        chain: &ModelChain,
        scope: &Scope,
        day: i64,
    ) -> Result<(), String> {
        let rel = note_of_day(day);
        let done = keys::consolidation_done(scope, &rel);
        if self
            .kv
            .get(&done)
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Ok(());
        }
        let Some(note) = self
            .memory
            .read(scope, &rel)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        let claim = keys::consolidation_claim(scope, &rel);
        if !self
            .kv
            .put_if_absent(&claim, b"1", Some(Duration::from_secs(1800)))
            .await
            .map_err(|e| e.to_string())?
        {
            return Ok(());
        }
        let current = self
            .memory
            .read(scope, "MEMORY.md")
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let input = format!(
            "# MEMORY.md\n{}\n\n# Daily note {rel}\n{}",
            digest::tail(&current, digest::MAX_INPUT_CHARS / 2),
            digest::tail(&note, digest::MAX_INPUT_CHARS / 2)
        );
        let points = digest::ask(chain, digest::CONSOLIDATE_PROMPT, input)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(points) = points {
            let date = rel.trim_start_matches("memory/").trim_end_matches(".md");
            self.memory
                .append(
                    scope,
                    "MEMORY.md",
                    &format!("\n## From the notes of {date}\n{points}"),
                )
                .await
                .map_err(|e| e.to_string())?;
        }
        self.kv
            .put(&done, b"1", Some(2 * WEEK))
            .await
            .map_err(|e| e.to_string())
    }

    /// Moves the memory files every conversation of a connector used to share (directly
    /// under `memory/<agent>/<connector>/`) to `owner`'s scope, once: to the first allowed
    /// user's memory, or to the shared memory when the connector is set to share. Their old
    /// index entries are dropped and the moved files indexed in their new scope. Without an
    /// owner to give them to, the files stay where they are (unread) and a warning says so.
    pub async fn migrate_legacy(
        &self,
        agent: &str,
        connector: &ConnectorId,
        owner: Option<MemoryOwner>,
    ) -> Result<usize, MemoryError> {
        let base = legacy_scope(agent, connector);
        let marker = keys::memory_scopes_moved(&base);
        if self.kv.get(&marker).await?.is_some() {
            return Ok(0);
        }
        let prefix = format!("{}/", root(&base));
        let legacy: Vec<String> = self
            .memory
            .files
            .list(&root(&base))
            .await?
            .into_iter()
            .filter(|p| p.strip_prefix(&prefix).is_some_and(is_legacy_file))
            .collect();
        if !legacy.is_empty() {
            let Some(owner) = owner else {
                tracing::warn!(
                    %connector,
                    files = legacy.len(),
                    "memory written before it was per person has nobody to go to (no allowed users); left unread until an allowed user is set"
                );
                return Ok(0);
            };
            let target = scope(agent, connector, owner);
            for old in &legacy {
                let rel = &old[prefix.len()..];
                let new = format!("{}/{rel}", root(&target));
                let bytes = self.memory.files.read(old).await?;
                match self.memory.read(&target, rel).await? {
                    // A run that died after writing and before deleting: just finish it.
                    Some(existing) if existing.as_bytes() == bytes.as_slice() => {}
                    Some(_) => self.memory.files.append(&new, &bytes).await?,
                    None => self.memory.files.write(&new, &bytes).await?,
                }
                self.memory.files.delete(old).await?;
                self.memory.index_file(&base, old).await?;
                self.memory.index_file(&target, &new).await?;
            }
            tracing::info!(
                %connector,
                files = legacy.len(),
                scope = %target,
                "moved the connector's shared memory to its owner's memory"
            );
        }
        self.kv.put(&marker, b"1", None).await?;
        Ok(legacy.len())
    }
}

/// The first `/` segment of `path` after `prefix`, when there is a further segment.
fn first_segment(path: &str, prefix: &str) -> Option<String> {
    let rest = path.strip_prefix(prefix)?;
    let (seg, _) = rest.split_once('/')?;
    Some(seg.to_owned())
}
