//! Decision-model adapters for compaction-core's [`DecisionModel`] port: the probe of spec
//! section 5 answered by a Decisions API host, by any OpenAI-compatible chat model through
//! first-token logprobs, or offline by an embedded lexical model.
//!
//! - [`decisions::DecisionsApi`]: the "System One" Decisions API (OpenRouter's
//!   `/api/alpha/decisions` by default; Inception, LiteLLM and SGLang serve the same format).
//! - [`openai_decisions::OpenAiDecisions`]: the OpenAI Decisions wire shape (`POST
//!   /v1/decisions`, a `predicate` question, answers as an array, a `refusal` is a failed probe).
//! - [`chat::ChatLogprobsJudge`]: the rubric as a yes/no question, p = P(yes) / (P(yes) + P(no)).
//! - `embedding::EmbeddingModel` (feature `embedding`): a local sentence-embedding model
//!   (all-MiniLM-L6-v2 on candle, CPU, offline) with features of meaning; the default when no
//!   key is configured and its files are installed (`cargo xtask fetch-model`).
//! - [`OfflineLexical`]: deterministic, microseconds, no network; the default when
//!   neither a key nor the embedding model's files are there. Its features, fitted weights and
//!   calibration are documented in `offline` (feature `eval`) and its quality in
//!   `docs/DECISION-QUALITY.md`.
//! - [`factory::build_decision_model`]: picks one from the settings, the keys of [`config`]
//!   and the environment, and says why.
//! - `eval`, `sessions`, `tuning` (feature `eval`): the metrics `cargo xtask eval-decision`
//!   prints, the labelled research sessions and the decision states the engine sends after
//!   each of their turns, and `compaction tune`'s threshold choice.
//! - [`http`]: the HTTP plumbing every remote adapter in the workspace shares (the summarizer
//!   crate uses it too): one JSON POST, a bearer key, one timeout, typed status errors.
//!
//! # Features
//! - `http` (default): the three remote adapters and `http::JsonClient`, on reqwest and
//!   rustls. Without it the crate is the offline model, the config, the factory (a remote
//!   choice is then a [`FactoryError::NotBuilt`] naming the feature), the reply parsers, the
//!   evaluation and the pure half of [`http`] (keys, errors, URLs, redaction): no reqwest,
//!   no TLS, no tokio (`cargo xtask verify` checks it).
//! - `eval` (**unstable, outside semver**): the evaluation (`eval`, `sessions`, `tuning`) and
//!   the fitted internals of both local models (`offline`'s features, cue lists and
//!   constants; `embedding::features` and `embedding::head`), for xtask, the fit examples and
//!   `compaction tune`. Without it a refit changes no public item.
//! - `embedding`: the local sentence-embedding model, on candle and tokenizers (pure Rust,
//!   no C++, no downloads). Without it `local` and `auto` fall back to the lexical model and
//!   `embedding` is a [`FactoryError::NotBuilt`].
//!
//! # What this crate must never do
//! It never retries inside the probe's time budget (one call, one timeout: 10 s by default,
//! spec 5.1), never fails open itself (the engine turns every [`DecisionError`] into CONTINUE),
//! never reads an API key from anywhere but the environment, and never lets a key reach a
//! log line, a span, an error message or `Debug` output. It never prints.
//!
//! # Configuration
//! The model slug is the spec's `adaptive_compaction_decision_model`; where and how to ask it
//! are extra keys of the same JSON file, read by [`DecisionConfig::from_map`] (table in
//! [`config`]): `decision_adapter` (`auto` | `decisions` | `openai-decisions` | `chat-logprobs` |
//! `local` | `embedding` | `offline`), `decision_embedding_model_dir`,
//! `decision_api_base_url`, `decision_api_path`, `decision_api_key_env`,
//! `decision_timeout_secs`, `decision_chat_base_url`, `decision_chat_path`,
//! `decision_chat_model`, `decision_chat_api_key_env`, `decision_chat_top_logprobs`.
//!
//! # Example
//! ```
//! use compaction_core::{DecisionModel, DecisionState, ProbeRequest, Settings};
//! use decision_client::{DecisionConfig, build_decision_model};
//!
//! let settings = Settings::default().effective().unwrap();
//! let config = DecisionConfig::from_map(&serde_json::Map::new()).unwrap();
//! // No key and no model files in this (empty) environment: `auto` falls back to the
//! // offline lexical model.
//! let selected = build_decision_model(&settings, &config, |_| None).unwrap();
//! assert!(selected.reason.starts_with("offline lexical model: OPENROUTER_API_KEY is not set"));
//!
//! let state = DecisionState {
//!     earlier_discussion: "**User**: What causes capacity fade in graphite anodes?\n**Assistant**: Lithium plating.".into(),
//!     latest_turn: "**User**: Switching topics: what does vanadium flow storage cost?\n**Assistant**: $0.20-0.35/kWh.".into(),
//!     turns: Vec::new(),
//!     older: Vec::new(),
//! };
//! let request = ProbeRequest::new(&settings.decision_model, state);
//! let answer = tokio::runtime::Builder::new_current_thread()
//!     .build()
//!     .unwrap()
//!     .block_on(selected.model.decide(&request))
//!     .unwrap();
//! assert!((0.0..=1.0).contains(&answer.probability));
//! ```
#![warn(missing_docs)]

/// Exposed for this crate's own tests and this workspace's adapters; outside semver (the
/// adapter it holds is re-exported at the crate root).
#[doc(hidden)]
pub mod chat;
mod config;
/// Exposed for this crate's own tests and this workspace's adapters; outside semver (the
/// adapter it holds is re-exported at the crate root).
#[doc(hidden)]
pub mod decisions;
pub mod embedding;
pub mod error;
#[cfg(feature = "eval")]
pub mod eval;
#[cfg(not(feature = "eval"))]
#[allow(dead_code, unreachable_pub)]
mod eval;
#[cfg(feature = "http")]
mod exchange;
pub mod factory;
/// The HTTP plumbing every remote adapter shares, this workspace's summarizer included; outside
/// semver.
#[doc(hidden)]
pub mod http;
#[cfg(feature = "eval")]
pub mod offline;
#[cfg(not(feature = "eval"))]
#[allow(dead_code, unreachable_pub)]
mod offline;
/// Exposed for this crate's own tests and this workspace's adapters; outside semver (the
/// adapter it holds is re-exported at the crate root).
#[doc(hidden)]
pub mod openai_decisions;
#[cfg(feature = "eval")]
pub mod sessions;
#[cfg(not(feature = "eval"))]
#[allow(dead_code, unreachable_pub)]
mod sessions;
#[cfg(feature = "eval")]
pub mod tuning;
#[cfg(not(feature = "eval"))]
#[allow(dead_code, unreachable_pub)]
mod tuning;

#[cfg(feature = "http")]
pub use chat::ChatLogprobsJudge;
pub use compaction_core::DecisionModel;
pub use config::{DecisionAdapter, DecisionConfig, DecisionConfigError, KEY_ADAPTER, KEYS};
#[cfg(feature = "http")]
pub use decisions::DecisionsApi;
#[cfg(feature = "embedding")]
pub use embedding::EmbeddingModel;
pub use error::DecisionError;
pub use factory::{FactoryError, Selected, build_decision_model, process_env};
pub use offline::OfflineLexical;
#[cfg(feature = "http")]
pub use openai_decisions::OpenAiDecisions;
