//! Memory: Markdown files are the memory, the index only a search layer over them. The agent
//! tools, recall before replies and consolidation build on [`store`].
//!
//! - [`chunk`]: heading-first chunking with windowed overlap.
//! - [`compact`]: a long session's older turns folded into a summary, their facts saved first.
//! - [`digest`]: session-end summaries and the daily consolidation into `MEMORY.md`.
//! - [`embed`]: `EmbeddingProvider`, the OpenAI-compatible adapter and the local embedder.
//! - `index`: per-file manifests and the plan of an incremental re-index (which chunks to
//!   embed, which to delete).
//! - [`lifecycle`]: recall, session-end summaries, consolidation, the move to per-person memory.
//! - [`notes`]: the names of the memory files (`MEMORY.md`, the daily notes).
//! - [`scope`]: whose memory a conversation uses (per person, per group, or shared).
//! - [`store`]: `MemoryStore`: incremental indexing and hybrid (vector + BM25) search.

pub mod chunk;
pub mod compact;
pub mod digest;
pub mod embed;
pub(crate) mod index;
pub mod lifecycle;
pub mod notes;
pub mod scope;
pub mod store;
