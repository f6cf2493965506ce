//! Rolling-consolidation summarizers for compaction-core's [`Summarizer`] port, and the
//! citation ledger that keeps every source they were given.
//!
//! - [`ChatSummarizer`] ([`chat`]): any OpenAI-compatible chat-completions endpoint,
//!   OpenRouter by default, with a system instruction for academic research conversations.
//! - [`OfflineSummarizer`] ([`offline`]): deterministic and network-free, the embedded
//!   default when no API key is set; built around findings ([`findings`]), corrections
//!   honoured claim by claim ([`corrections`]: a correction supersedes exactly the claims it
//!   targets, found from the structure of the exchange), within a token budget, with a bounded
//!   bibliography ([`bibliography`]); each fold reports a receipt (what it kept, corrected and
//!   dropped).
//! - [`FactsLedger`] ([`facts_ledger`]): the chat summarizer's figures ledger and its
//!   fail-closed checks (empty, longer than what it replaces, previous ledger dropped).
//! - [`CitationLedger`] and [`WithCitationLedger`] ([`ledger`], [`citation`]): the citations
//!   of the slice and of the previous summary (`# Cited Sources` lines, DOIs, arXiv ids,
//!   author-year references); whatever a summary leaves out is appended under
//!   `## Sources carried forward`, deduplicated, in a stable order.
//! - [`build_summarizer`] ([`factory`]) picks one from [`SummarizerConfig`] ([`config`], the
//!   `summarizer_*` keys of the shared config file) and the environment, and wraps it in the
//!   ledger.
//!
//! # Features
//! - `http` (default): [`chat`] and `ChatSummarizer`, on decision-client's `http` feature
//!   (reqwest). Without it `auto` is the offline summarizer (the reason says why) and `chat`
//!   is [`FactoryError::NotBuilt`]; nothing of reqwest is built.
//!
//! # What this crate must never do
//! Lose a citation, write a summary that is empty, truncated (`finish_reason: "length"`) or
//! a refusal (those are errors, so the engine writes nothing), retry inside the caller's time
//! budget, print, or let an API key reach a log, an error or a `Debug` output. HTTP plumbing
//! is `decision_client::http`, shared rather than written twice.
//!
//! # Example
//! ```
//! use compaction_core::{Settings, Summarizer, SummaryRequest, TurnDigest};
//! use summarizer::{SummarizerConfig, build_summarizer};
//!
//! let settings = Settings::default().effective().unwrap();
//! let selected = build_summarizer(&settings, &SummarizerConfig::default(), |_| None).unwrap();
//! assert_eq!(selected.reason, "offline extractive summarizer: OPENROUTER_API_KEY is not set");
//!
//! let request = SummaryRequest::new(
//!     settings.summarizer_model.clone(),
//!     String::new(),
//!     None,
//!     String::new(),
//!     vec![TurnDigest {
//!         invocation_id: "inv-1".into(),
//!         user: "How much do silicon anodes swell?".into(),
//!         assistant: "Silicon expands by about 300 % on lithiation (Obrovac & Chevrier, 2014).".into(),
//!         tool_outputs: vec!["# Cited Sources\n1. Obrovac, M. N.; Chevrier, V. L. Alloy Negative \
//!             Electrodes for Li-Ion Batteries. Chem. Rev. 2014. doi:10.1021/cr500207g".into()],
//!     }],
//! );
//! let summary = tokio::runtime::Runtime::new()
//!     .unwrap()
//!     .block_on(selected.summarizer.summarize(&request))
//!     .unwrap();
//! assert!(summary.text.contains("### Q: How much do silicon anodes swell?\n- Silicon expands by about 300 %"));
//! assert!(summary.text.contains("doi:10.1021/cr500207g"));
//! ```
#![warn(missing_docs, unreachable_pub)]

pub mod bibliography;
#[cfg(feature = "http")]
pub mod chat;
pub mod citation;
pub mod config;
pub mod corrections;
pub mod error;
pub mod factory;
pub mod facts_ledger;
pub mod findings;
pub mod ledger;
pub mod offline;
mod supersede;
mod text;

#[cfg(feature = "http")]
pub use chat::ChatSummarizer;
pub use citation::{Citation, CitationKind};
pub use compaction_core::Summarizer;
pub use config::{AdapterChoice, ConfigError, SummarizerConfig};
pub use corrections::CORRECTIONS_HEADING;
pub use error::SummarizerError;
pub use factory::{FactoryError, Selected, build_summarizer, build_summarizer_from_env};
pub use facts_ledger::{FactsLedger, KEY_FIGURES_HEADING};
pub use ledger::{CARRIED_FORWARD_HEADING, CitationLedger, WithCitationLedger};
pub use offline::OfflineSummarizer;
