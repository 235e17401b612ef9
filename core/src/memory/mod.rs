//! Memory (first parts): chunking Markdown memory files and embedding text. The index, hybrid
//! search, tools and consolidation build on these.
//!
//! - [`chunk`]: heading-first chunking with windowed overlap.
//! - [`embed`]: `EmbeddingProvider`, the OpenAI-compatible adapter and the local embedder.

pub mod chunk;
pub mod embed;
