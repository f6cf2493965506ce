//! The ports: what the engine needs from the outside world, as traits adapters implement.
//!
//! Every port is object-safe so that a service can swap adapters at run time
//! (`Arc<dyn DecisionModel>`). Adapters return their own error types boxed as
//! [`AdapterError`]; the engine turns every failure into a fail-open [`crate::Outcome`] and
//! never passes an error to the caller.

use async_trait::async_trait;

use crate::event::Event;
use crate::gate::{GateInput, gate_input};
use crate::plan::TurnDigest;
use crate::probe::{Probability, ProbeRequest, Verdict};
use crate::session::{Revision, Session, SessionKey};
use crate::time::Timestamp;

/// An adapter's error, boxed. Its `Display` must never contain a secret.
pub type AdapterError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Who answers: for spans and for the CLI's banner.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelInfo {
    /// The API family (`openrouter`, `openai`, `offline`, …), OpenInference's `*.system`.
    pub system: String,
    /// The host (`openrouter.ai`, `localhost:8000`, `local`), OpenInference's `*.provider`.
    pub provider: String,
    /// The configured model slug.
    pub model: String,
}

/// Token counts a model reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// Input (prompt) tokens.
    pub input: Option<u64>,
    /// Output (completion) tokens.
    pub output: Option<u64>,
}

/// A decision model's raw answer. The engine validates `probability`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecisionAnswer {
    /// P(compaction warranted), as the model returned it.
    pub probability: f64,
    /// The model the host says served the call, when it says.
    pub served_model: Option<String>,
    /// Usage, when reported.
    pub usage: Option<TokenUsage>,
}

/// Answers the probe with a calibrated probability.
#[async_trait]
pub trait DecisionModel: Send + Sync {
    /// Who answers.
    fn info(&self) -> ModelInfo;
    /// Answers one probe. Adapters enforce their own timeout.
    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError>;
}

/// What a summarizer is asked to consolidate.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// The summarizer model slug from settings.
    pub model: String,
    /// The spec-shaped prompt (`Existing Conversation Summary:` / `New Completed Turns to
    /// Integrate:`).
    pub prompt: String,
    /// The previous summary, for rolling consolidation.
    pub previous_summary: Option<String>,
    /// The new turns as serial Markdown (the prompt's second section).
    pub new_turns_text: String,
    /// The new turns, digested.
    pub turns: Vec<TurnDigest>,
}

/// A summarizer's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// The consolidated summary.
    pub text: String,
    /// The model the host says served the call.
    pub served_model: Option<String>,
    /// Usage, when reported.
    pub usage: Option<TokenUsage>,
}

/// Folds a previous summary and new turns into one consolidated summary.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// Who answers.
    fn info(&self) -> ModelInfo;
    /// Consolidates. Adapters enforce their own timeout.
    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError>;
}

/// The two gate figures plus the revision they were read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GateSnapshot {
    /// Gate figures.
    pub input: GateInput,
    /// Revision read.
    pub revision: Revision,
}

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer moved the session on since it was read.
    #[error("session {key} is stale: expected revision {expected}, found {actual}")]
    Stale {
        /// The session.
        key: SessionKey,
        /// The revision the writer read.
        expected: Revision,
        /// The revision now stored.
        actual: Revision,
    },
    /// No such session.
    #[error("session {0} not found")]
    NotFound(SessionKey),
    /// The backend failed.
    #[error(transparent)]
    Backend(AdapterError),
}

/// Durable sessions with optimistic concurrency.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Loads a session with its whole history.
    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError>;

    /// The gate's figures. The default loads the whole session; stores should answer from a
    /// header kept current on append.
    async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
        let session = self.load(key).await?;
        Ok(GateSnapshot {
            input: gate_input(&session.events),
            revision: session.revision,
        })
    }

    /// The part of the session a post-turn evaluation needs once the gate has opened: the
    /// session's state and revision, and its events from the live compaction on. The default
    /// loads the whole session; a store with indexes should answer without reading the rest
    /// of the history.
    ///
    /// Contract: `events` keeps append order and holds at least what
    /// [`crate::live_tail`] returns for the whole history — with rewinds applied, the live
    /// compaction event and every unscoped non-compaction event whose timestamp is after the
    /// live compaction's end (every event when there is no compaction). It may hold more
    /// (the default holds everything). The engine gates on [`SessionStore::gate_snapshot`],
    /// never on these events, and the plan and the probe's decision state read nothing
    /// inside the live summary's range, so they come out the same either way.
    async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
        self.load(key).await
    }

    /// Appends `event` if the session is still at `expected`; returns the new revision, or
    /// [`StoreError::Stale`] when another writer moved it on. Atomic: all or nothing.
    async fn append(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: Event,
    ) -> Result<Revision, StoreError>;
}

/// What a probe span knows when it starts.
#[derive(Debug, Clone, Copy)]
pub struct ProbeStart<'a> {
    /// The decision model.
    pub model: &'a ModelInfo,
    /// The request sent.
    pub request: &'a ProbeRequest,
    /// τ.
    pub threshold: f64,
    /// Completed turns since the last compaction.
    pub completed_turns: usize,
    /// Coordinator prompt tokens.
    pub prompt_tokens: u64,
}

/// What a probe span records when it ends.
#[derive(Debug, Clone, Copy)]
pub struct ProbeEnd<'a> {
    /// The validated probability, when the probe succeeded.
    pub probability: Option<Probability>,
    /// The verdict (CONTINUE when the probe failed: fail-open).
    pub verdict: Verdict,
    /// The model's answer, when one arrived.
    pub answer: Option<&'a DecisionAnswer>,
    /// Why the probe failed, when it did.
    pub failure: Option<&'a str>,
}

/// What a summarize span knows when it starts.
#[derive(Debug, Clone, Copy)]
pub struct SummarizeStart<'a> {
    /// The summarizer.
    pub model: &'a ModelInfo,
    /// The request sent.
    pub request: &'a SummaryRequest,
    /// [t_1, t_{N-K}].
    pub range: (Timestamp, Timestamp),
    /// Turns in the slice.
    pub slice_turns: usize,
    /// K: completed turns kept verbatim after the range (the compaction event's
    /// `retained_turns`).
    pub retained_turns: usize,
    /// True when the hard backstop forced this compaction.
    pub forced: bool,
}

/// What a summarize span records when it ends.
#[derive(Debug, Clone, Copy)]
pub struct SummarizeEnd<'a> {
    /// The summary, when it succeeded.
    pub summary: Option<&'a Summary>,
    /// Why it failed (summarizer or store), when it did.
    pub failure: Option<&'a str>,
}

/// An open probe span.
pub trait ProbeSpan: Send {
    /// Ends the span.
    fn finish(self: Box<Self>, end: &ProbeEnd<'_>);
}

/// An open summarize span.
pub trait SummarizeSpan: Send {
    /// Ends the span.
    fn finish(self: Box<Self>, end: &SummarizeEnd<'_>);
}

/// Spans for probes and summarizations. Never called on a fast exit.
pub trait Telemetry: Send + Sync {
    /// Opens `compaction_decision_probe`.
    fn start_probe(&self, start: &ProbeStart<'_>) -> Box<dyn ProbeSpan>;
    /// Opens `compact_session_history`.
    fn start_summarize(&self, start: &SummarizeStart<'_>) -> Box<dyn SummarizeSpan>;
}

/// Telemetry that records nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTelemetry;

struct NoSpan;

impl ProbeSpan for NoSpan {
    fn finish(self: Box<Self>, _: &ProbeEnd<'_>) {}
}

impl SummarizeSpan for NoSpan {
    fn finish(self: Box<Self>, _: &SummarizeEnd<'_>) {}
}

impl Telemetry for NoTelemetry {
    fn start_probe(&self, _: &ProbeStart<'_>) -> Box<dyn ProbeSpan> {
        Box::new(NoSpan)
    }
    fn start_summarize(&self, _: &SummarizeStart<'_>) -> Box<dyn SummarizeSpan> {
        Box::new(NoSpan)
    }
}

/// The time source: the core never reads a clock itself.
pub trait Clock: Send + Sync {
    /// Now, in epoch seconds.
    fn now(&self) -> Timestamp;
}

/// The source of fresh event and invocation ids.
pub trait IdGenerator: Send + Sync {
    /// A fresh, unique id.
    fn next_id(&self) -> String;
}
