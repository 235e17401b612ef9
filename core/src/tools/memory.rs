//! The memory tools: `memory_search` (hybrid search), `memory_get` (read a memory file or a
//! slice of it) and `memory_write` (append to today's note, or to / replace `MEMORY.md`).
//! Paths are relative to the conversation's memory root; nothing outside it is reachable.
//!
//! `memory_write` refuses a write past `memory.max_file_kb`, saying how to make room. Once the
//! file is written, indexing it gets a time budget shorter than the agent's tool timeout; past
//! it the result says the content is saved and becomes searchable at the next re-index (the
//! scheduled job re-indexes changed files): the model is never told a saved write failed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Clock, ErrorKind};
use futures::future::{select, Either};
use serde_json::{json, Value};

use super::{Level, Tool, ToolContext, ToolError};
use crate::ids::Scope;
use crate::llm::ToolSpec;
use crate::memory::notes::daily_note;
use crate::memory::store::{root, MemoryError, MemoryStore};

/// Largest slice `memory_get` returns.
const MAX_GET_LINES: usize = 400;

fn str_arg<'a>(input: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError(format!("`{name}` (a string) is required")))
}

/// `MEMORY.md` or `memory/YYYY-MM-DD.md`, relative to the scope root.
fn checked_path(rel: &str) -> Result<&str, ToolError> {
    let rel = rel.trim().trim_start_matches("./");
    let daily = rel
        .strip_prefix("memory/")
        .and_then(|f| f.strip_suffix(".md"))
        .is_some_and(|d| {
            d.len() == 10
                && d.chars().enumerate().all(|(i, c)| {
                    if i == 4 || i == 7 {
                        c == '-'
                    } else {
                        c.is_ascii_digit()
                    }
                })
        });
    if rel == "MEMORY.md" || daily {
        Ok(rel)
    } else {
        Err(ToolError(format!(
            "{rel:?} is not a memory file: use MEMORY.md or memory/YYYY-MM-DD.md"
        )))
    }
}

pub struct MemorySearch(pub Arc<MemoryStore>);

#[async_trait]
impl Tool for MemorySearch {
    fn stays_inside(&self) -> bool {
        true
    }

    fn level(&self) -> Level {
        Level::Safe
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_search".into(),
            description: "Search your long-term memory (MEMORY.md and daily notes) for facts about the user and past conversations.".into(),
            input_schema: json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"], "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let query = str_arg(&input, "query")?;
        let hits = self
            .0
            .search(&ctx.scope, query)
            .await
            .map_err(|e| ToolError(e.to_string()))?;
        if hits.is_empty() {
            return Ok("No matching memories.".into());
        }
        let prefix = format!("{}/", root(&ctx.scope));
        Ok(hits
            .iter()
            .map(|h| {
                format!(
                    "[{}:{}-{}] (score {:.2})\n{}",
                    h.path.trim_start_matches(&prefix),
                    h.start_line,
                    h.end_line,
                    h.score,
                    h.text
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n"))
    }
}

pub struct MemoryGet(pub Arc<MemoryStore>);

#[async_trait]
impl Tool for MemoryGet {
    fn stays_inside(&self) -> bool {
        true
    }

    fn level(&self) -> Level {
        Level::Safe
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_get".into(),
            description: "Read a memory file (MEMORY.md or memory/YYYY-MM-DD.md), or `lines` lines of it from line `from` (1-based).".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "from": {"type": "integer", "minimum": 1}, "lines": {"type": "integer", "minimum": 1}
            }, "required": ["path"], "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let rel = checked_path(str_arg(&input, "path")?)?;
        let path = format!("{}/{rel}", root(&ctx.scope));
        let bytes = match self.0.files.read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind == ErrorKind::NotFound => {
                return Ok(format!("{rel} does not exist yet."))
            }
            Err(e) => return Err(ToolError(e.to_string())),
        };
        let text = String::from_utf8_lossy(&bytes);
        let from = input
            .get("from")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1) as usize;
        let count = input
            .get("lines")
            .and_then(Value::as_u64)
            .map_or(MAX_GET_LINES, |n| (n as usize).min(MAX_GET_LINES));
        let slice: Vec<&str> = text.lines().skip(from - 1).take(count).collect();
        Ok(if slice.is_empty() {
            format!("{rel} has no line {from}.")
        } else {
            slice.join("\n")
        })
    }
}

pub struct MemoryWrite {
    pub memory: Arc<MemoryStore>,
    pub clock: Arc<dyn Clock>,
    /// How long indexing may take before the tool answers without waiting for it.
    pub index_budget: Duration,
}

/// The indexing budget of `memory_write` under an agent's tool timeout: half of it, leaving
/// the other half for reading and writing the file.
pub fn index_budget(tool_timeout: Duration) -> Duration {
    tool_timeout / 2
}

/// KB (1024 bytes), rounded up.
fn kb(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

/// What the model is told when a write would take the file past the cap.
fn too_large(rel: &str, replace: bool, size: usize, after: usize, limit: usize) -> ToolError {
    let cap = format!("the limit of {} KB (memory.max_file_kb)", kb(limit));
    ToolError(if replace {
        format!(
            "Not saved: the new {rel} would be {} KB, over {cap}. Write a shorter version: keep the durable facts, merge duplicates, drop what is outdated.",
            kb(after)
        )
    } else if rel == "MEMORY.md" {
        format!(
            "Not saved: {rel} is {} KB and this would make it {} KB, over {cap}. Consolidate it first: read it with memory_get, then rewrite it shorter with memory_write target \"long_term\", mode \"replace\" (merge duplicates, drop what is outdated), including this new fact.",
            kb(size),
            kb(after)
        )
    } else {
        format!(
            "Not saved: today's note {rel} is {} KB and this would make it {} KB, over {cap}. Save it with target \"long_term\" instead (if MEMORY.md is full too, consolidate it with mode \"replace\").",
            kb(size),
            kb(after)
        )
    })
}

#[async_trait]
impl Tool for MemoryWrite {
    fn stays_inside(&self) -> bool {
        true
    }

    /// What it writes is recalled into later turns as the assistant's own memory, long
    /// after the text that ordered it is gone.
    fn acts_beyond(&self, _input: &Value) -> bool {
        true
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// An append finds a note that already ends with it and stops (see `call`); a replace
    /// writes the same content again.
    fn rerunnable(&self, _input: &Value) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_write".into(),
            description: "Remember something. target \"daily\" appends a note to today's file; \"long_term\" appends to MEMORY.md, or replaces it whole with mode \"replace\" (read it first). Write durable facts and decisions, not chit-chat.".into(),
            input_schema: json!({"type": "object", "properties": {
                "content": {"type": "string"},
                "target": {"type": "string", "enum": ["daily", "long_term"]},
                "mode": {"type": "string", "enum": ["append", "replace"]}
            }, "required": ["content"], "additionalProperties": false}),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let content = str_arg(&input, "content")?.trim();
        if content.is_empty() {
            return Err(ToolError("`content` is empty".into()));
        }
        let target = input
            .get("target")
            .and_then(Value::as_str)
            .unwrap_or("daily");
        let mode = input
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or("append");
        let rel = match target {
            "daily" => daily_note(&*self.clock),
            "long_term" => "MEMORY.md".to_owned(),
            other => {
                return Err(ToolError(format!(
                    "target {other:?} is not daily or long_term"
                )))
            }
        };
        let path = format!("{}/{rel}", root(&ctx.scope));
        let (bytes, replace) = match (target, mode) {
            ("long_term", "replace") => (format!("{content}\n"), true),
            (_, "append") if content.starts_with('#') || content.starts_with("- ") => {
                (format!("{content}\n"), false)
            }
            (_, "append") => (format!("- {content}\n"), false),
            (_, other) => {
                return Err(ToolError(format!(
                    "mode {other:?} is not allowed for {target}"
                )))
            }
        };
        if !replace {
            // The same note appended just before (a call run again after a restart): kept once.
            if let Ok(held) = self.memory.files.read(&path).await {
                if held.ends_with(bytes.as_bytes()) {
                    return Ok(format!(
                        "{rel} already ends with this note; not added again."
                    ));
                }
            }
        }
        match self.memory.check_room(&path, bytes.len(), replace).await {
            Ok(_) => {}
            Err(MemoryError::TooLarge {
                size, after, limit, ..
            }) => return Err(too_large(&rel, replace, size, after, limit)),
            Err(e) => return Err(ToolError(e.to_string())),
        }
        let files = &self.memory.files;
        let written = if replace {
            files.write(&path, bytes.as_bytes()).await
        } else {
            files.append(&path, bytes.as_bytes()).await
        };
        written.map_err(|e| ToolError(e.to_string()))?;
        Ok(self.index_within_budget(&ctx.scope, &path, &rel).await)
    }
}

impl MemoryWrite {
    /// Indexes the file just written, waiting at most `index_budget`; the tool's answer either
    /// way, since the content is saved whatever happens to its indexing.
    async fn index_within_budget(&self, scope: &Scope, path: &str, rel: &str) -> String {
        let index = std::pin::pin!(self.memory.index_file(scope, path));
        let budget = self.clock.sleep(self.index_budget);
        match select(index, budget).await {
            Either::Left((Ok(_), _)) => format!("Saved to {rel}."),
            Either::Left((Err(e), _)) => {
                tracing::warn!(%scope, path, error = %e, "memory file saved, indexing failed");
                format!("Saved to {rel}. Indexing it failed ({e}), so it becomes searchable after the next re-index; nothing is lost.")
            }
            Either::Right(_) => {
                tracing::info!(
                    %scope,
                    path,
                    "memory file saved, indexing left to the scheduled re-index"
                );
                format!(
                    "Saved to {rel}. Indexing it is taking longer than {}s, so it becomes searchable after the next scheduled re-index (within minutes); nothing is lost.",
                    self.index_budget.as_secs()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests;
