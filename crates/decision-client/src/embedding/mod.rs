//! The local sentence-embedding decision model (feature `embedding`): all-MiniLM-L6-v2 run
//! in process on the CPU with candle, features of meaning ([`features`]) and a logistic
//! head with Platt calibration ([`head`]). Offline: it reads its files from a directory
//! ([`files`]) and never downloads anything.
//!
//! # Cost
//! The encoder is loaded on the first probe, never when the model is built: the post-turn
//! fast exit never probes, so it never loads the model. Each text is embedded once: the
//! vectors are cached in memory by text (a `serve` process keeps every session's turns;
//! the cache is bounded by [`CACHE_ENTRIES`]), so a probe embeds only the latest turn; the
//! factory also keeps them in the user cache directory (`…/adaptive-compaction/vectors/`),
//! so a one-shot `compaction evaluate` process embeds only the turns no earlier one did. The
//! texts a probe has not embedded yet are embedded concurrently, one pass each, on up to one
//! thread per core. The query is embedded whole (up to 256 tokens), a reply's first
//! [`REPLY_TOKENS`] tokens, and each of a reply's first eight sentences
//! (`features::MAX_SENTENCES`) on its own (read at the next probe, where the reply is the
//! previous one; embedded with its turn, once).
//!
//! Without the feature only [`files`] (where the files are; `cargo xtask fetch-model`
//! installs them there) and [`features`] (pure arithmetic) are built.
//!
//! # What it must never do
//! Download, read the network, or fail open itself: a file that cannot be loaded is an
//! [`AdapterError`] and the engine fails open and says so.

#[cfg(feature = "embedding")]
pub(crate) mod disk;
#[cfg(feature = "embedding")]
pub mod encoder;
#[cfg(feature = "eval")]
pub mod features;
#[cfg(not(feature = "eval"))]
#[allow(dead_code, unreachable_pub)]
mod features;
pub mod files;
#[cfg(feature = "eval")]
pub mod head;
#[cfg(not(feature = "eval"))]
#[allow(dead_code, unreachable_pub)]
mod head;
#[cfg(feature = "embedding")]
mod model;

#[cfg(feature = "embedding")]
pub use encoder::Encoder;
pub use features::{StateVectors, TurnVectors, cosine};
pub use files::{ModelDir, ModelFileError};
#[cfg(feature = "embedding")]
pub use model::{EmbeddingModel, VectorCache, state_vectors, state_vectors_with};

/// The served-model name the embedding model reports.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2+head-v8";
/// How many of a reply's tokens are embedded.
pub const REPLY_TOKENS: usize = 128;
/// How many of a query's tokens are embedded (the model's whole window).
pub const QUERY_TOKENS: usize = 256;
/// The most vectors the in-memory cache holds before it starts over.
pub const CACHE_ENTRIES: usize = 8192;

/// p for a state with these vectors, with the embedded head.
pub fn probability(vectors: &StateVectors, state: &compaction_core::DecisionState) -> f64 {
    let lexical = crate::offline::Features::of(state);
    let x = features::features(vectors, &lexical);
    head::probability(&x, lexical.research_context)
}
