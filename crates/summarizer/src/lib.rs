//! Rolling-consolidation summarizers for compaction-core's [`Summarizer`] port, and the
//! citation ledger that keeps every source they were given.
//!
//! - [`ChatSummarizer`]: any OpenAI-compatible chat-completions endpoint, OpenRouter by
//!   default, with a system instruction for academic research conversations.
//! - [`OfflineSummarizer`]: deterministic and network-free, the embedded default when no API
//!   key is set; built around findings (sentences and table rows that state a number, a
//!   citation or an identifier), corrections honoured claim by claim (a correction
//!   supersedes exactly the claims it targets, found from the structure of the exchange, and
//!   the [`CORRECTIONS_HEADING`] section states each once), within a token budget, with a
//!   bounded bibliography; each fold reports a receipt (what it kept, corrected and dropped).
//! - [`FactsLedger`]: the chat summarizer's figures ledger and its fail-closed checks (empty,
//!   longer than what it replaces, previous ledger dropped, a corrected claim restated).
//! - [`CitationLedger`] and [`WithCitationLedger`]: the citations of the slice and of the
//!   previous summary (`# Cited Sources` lines, DOIs, arXiv ids, author-year references);
//!   whatever a summary leaves out is appended under [`CARRIED_FORWARD_HEADING`],
//!   deduplicated, in a stable order.
//! - [`build_summarizer`] picks one from [`SummarizerConfig`] (the `summarizer_*` keys of the
//!   shared config file, [`KEYS`]) and the environment, and wraps it in the ledger.
//!
//! Every item is exported here, at one path; the modules are private.
//!
//! # Features
//! - `http` (default): `ChatSummarizer`, on decision-client's `http` feature
//!   (reqwest). Without it `auto` is the offline summarizer (the reason says why) and `chat`
//!   is [`SummarizerFactoryError::NotBuilt`]; nothing of reqwest is built.
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

mod bibliography;
#[cfg(feature = "http")]
mod chat;
mod citation;
mod config;
mod corrections;
mod error;
mod factory;
mod facts_ledger;
mod findings;
mod ledger;
mod offline;
mod supersede;
mod text;

#[cfg(feature = "http")]
pub use chat::ChatSummarizer;
pub use citation::{Citation, CitationKind};
pub use compaction_core::Summarizer;
pub use config::{KEY_ADAPTER, KEYS, SummarizerAdapter, SummarizerConfig, SummarizerConfigError};
pub use corrections::CORRECTIONS_HEADING;
pub use error::SummarizerError;
pub use factory::{
    SelectedSummarizer, SummarizerFactoryError, build_summarizer, build_summarizer_from_env,
};
pub use facts_ledger::{FactsLedger, Figure, KEY_FIGURES_HEADING};
pub use ledger::{CARRIED_FORWARD_HEADING, CitationLedger, WithCitationLedger};
pub use offline::OfflineSummarizer;
