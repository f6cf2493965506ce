//! The ports: what the engine needs from the outside world, as traits adapters implement.
//!
//! Every port is object-safe so that a service can swap adapters at run time
//! (`Arc<dyn DecisionModel>`). Adapters return their own error types boxed as
//! [`AdapterError`]; the engine turns every failure into a fail-open [`crate::Outcome`] and
//! never passes an error to the caller.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;

use crate::context::{AssembledContext, CompactionEntry, assemble_context, compaction_history};
use crate::event::Event;
use crate::failure::{Failure, FailureKind};
use crate::gate::{GateInput, gate_input};
use crate::plan::TurnDigest;
use crate::probe::{Probability, ProbeRequest, Verdict};
use crate::recall::scan::{self, ExpandError};
use crate::recall::{RecallHit, RecallQuery, RecalledEvent};
use crate::receipt::Receipt;
use crate::session::{Revision, Session, SessionKey};
use crate::time::Timestamp;

/// An adapter's error, boxed. Its `Display` must never contain a secret.
pub type AdapterError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Who answers: for spans and for the CLI's banner.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ModelInfo {
    /// The API family (`openrouter`, `openai`, `offline`, …), OpenInference's `*.system`.
    pub system: String,
    /// The host (`openrouter.ai`, `localhost:8000`, `local`), OpenInference's `*.provider`.
    pub provider: String,
    /// The configured model slug.
    pub model: String,
}

impl ModelInfo {
    /// Who answers: the API family, the host and the configured model slug.
    pub fn new(
        system: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        ModelInfo {
            system: system.into(),
            provider: provider.into(),
            model: model.into(),
        }
    }
}

/// Token counts a model reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TokenUsage {
    /// Input (prompt) tokens.
    pub input: Option<u64>,
    /// Output (completion) tokens.
    pub output: Option<u64>,
}

impl TokenUsage {
    /// Input and output token counts, each when reported.
    pub fn new(input: Option<u64>, output: Option<u64>) -> Self {
        TokenUsage { input, output }
    }
}

/// A decision model's raw answer. The engine validates `probability`.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct DecisionAnswer {
    /// P(compaction warranted), as the model returned it.
    pub probability: f64,
    /// The model the host says served the call, when it says.
    pub served_model: Option<String>,
    /// Usage, when reported.
    pub usage: Option<TokenUsage>,
}

impl DecisionAnswer {
    /// An answer of `probability` (validated by the engine, not here).
    pub fn new(probability: f64) -> Self {
        DecisionAnswer {
            probability,
            served_model: None,
            usage: None,
        }
    }

    /// The model the host says served the call.
    pub fn with_served_model(mut self, model: impl Into<String>) -> Self {
        self.served_model = Some(model.into());
        self
    }

    /// The usage the host reported.
    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// Answers the probe with a calibrated probability.
#[async_trait]
pub trait DecisionModel: Send + Sync {
    /// Who answers.
    fn info(&self) -> ModelInfo;
    /// Answers one probe. The engine bounds the call with its probe deadline (spec: 10 s)
    /// and fails open when it passes; an adapter may enforce a shorter timeout of its own.
    /// Return errors through [`crate::classified`] so the outcome can say what kind they are.
    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError>;
}

/// What a summarizer is asked to consolidate. Built by the engine; adapters read it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// The session's turn number (1-based) of `turns[0]`, when the store could count it
    /// ([`SessionStore::turns_before`]): `turns[i]` is turn `first_turn + i`, so a summary's
    /// sections can name the turns they came from ("turn 7"), which recall expands.
    pub first_turn: Option<usize>,
}

impl SummaryRequest {
    /// A request for `model` with the spec-shaped `prompt`, the previous summary and the new
    /// turns (as text and digested).
    pub fn new(
        model: impl Into<String>,
        prompt: impl Into<String>,
        previous_summary: Option<String>,
        new_turns_text: impl Into<String>,
        turns: Vec<TurnDigest>,
    ) -> Self {
        SummaryRequest {
            model: model.into(),
            prompt: prompt.into(),
            previous_summary,
            new_turns_text: new_turns_text.into(),
            turns,
            first_turn: None,
        }
    }

    /// The session's turn number of the first new turn (builder style).
    pub fn with_first_turn(mut self, first_turn: Option<usize>) -> Self {
        self.first_turn = first_turn;
        self
    }
}

/// A summarizer's answer.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Summary {
    /// The consolidated summary.
    pub text: String,
    /// The model the host says served the call.
    pub served_model: Option<String>,
    /// Usage, when reported.
    pub usage: Option<TokenUsage>,
    /// What the summarizer did to the folded turns' findings ([`crate::receipt`]), when it
    /// reports it; the engine stores it beside the summary.
    pub receipt: Option<Receipt>,
}

impl Summary {
    /// A summary of `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Summary {
            text: text.into(),
            served_model: None,
            usage: None,
            receipt: None,
        }
    }

    /// The receipt of the fold (builder style).
    pub fn with_receipt(mut self, receipt: Receipt) -> Self {
        self.receipt = Some(receipt);
        self
    }

    /// The model the host says served the call.
    pub fn with_served_model(mut self, model: impl Into<String>) -> Self {
        self.served_model = Some(model.into());
        self
    }

    /// The usage the host reported.
    pub fn with_usage(mut self, usage: TokenUsage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// Folds a previous summary and new turns into one consolidated summary.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// Who answers.
    fn info(&self) -> ModelInfo;
    /// Consolidates. The engine bounds the call with its summarize deadline and fails open
    /// when it passes. Return errors through [`crate::classified`].
    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError>;
}

/// The two gate figures plus the revision they were read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GateSnapshot {
    /// Gate figures.
    pub input: GateInput,
    /// Revision read.
    pub revision: Revision,
}

impl GateSnapshot {
    /// The gate figures read at `revision`.
    pub fn new(input: GateInput, revision: Revision) -> Self {
        GateSnapshot { input, revision }
    }
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
    /// A session with this key already exists.
    #[error("session {0} already exists")]
    AlreadyExists(SessionKey),
    /// The event's timestamp does not increase over the session's latest in-view event
    /// (see [`Clock`]): it is refused, since coverage by timestamp could hide it.
    #[error(
        "session {key}: event {event_id} has timestamp {offered}, not after the latest event's \
         {latest}; timestamps of a session's events must strictly increase"
    )]
    NonIncreasingTimestamp {
        /// The session.
        key: SessionKey,
        /// The refused event.
        event_id: String,
        /// The latest in-view event's timestamp.
        latest: Timestamp,
        /// The refused event's timestamp.
        offered: Timestamp,
    },
    /// An expansion named a compaction or turns the session does not have.
    #[error("session {key}: {error}")]
    Expand {
        /// The session.
        key: SessionKey,
        /// What was missing.
        #[source]
        error: ExpandError,
    },
    /// The backend failed. Classify it with [`crate::classified`] (locked, corrupt, …).
    #[error(transparent)]
    Backend(AdapterError),
}

impl StoreError {
    /// What kind of failure, for counting.
    pub fn kind(&self) -> FailureKind {
        match self {
            StoreError::Stale { .. } => FailureKind::Stale,
            StoreError::NotFound(_) => FailureKind::NotFound,
            StoreError::AlreadyExists(_) => FailureKind::AlreadyExists,
            StoreError::NonIncreasingTimestamp { .. } => FailureKind::NonIncreasingTimestamp,
            StoreError::Expand { .. } => FailureKind::NotFound,
            StoreError::Backend(e) => crate::failure::failure_kind(e.as_ref()),
        }
    }
}

/// The newest part of a live tail ([`SessionStore::load_live_tail_window`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TailWindow {
    /// The session with the window's events.
    pub session: Session,
    /// True when the window is the whole live tail.
    pub whole: bool,
}

impl TailWindow {
    /// A window of `session`'s events; `whole` when nothing older was left out.
    pub fn new(session: Session, whole: bool) -> Self {
        TailWindow { session, whole }
    }
}

/// One decision recorded in shadow mode: what was asked, what came back, and the gate's
/// figures at the time. Recorded p is replayed by tuning, never re-queried (remote decision
/// hosts are not deterministic across batches).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct DecisionRecord {
    /// When the engine recorded it (its clock).
    pub recorded_at: Timestamp,
    /// The session's revision the decision was made on.
    pub revision: Revision,
    /// Turns in the coordinator view at the time (turn N).
    pub turn: usize,
    /// The gate's completed turns since the live compaction.
    pub completed_turns_since_compaction: usize,
    /// The gate's coordinator prompt tokens.
    pub coordinator_prompt_tokens: Option<u64>,
    /// True when the hard backstop would have forced compaction.
    pub backstop: bool,
    /// τ at the time.
    pub threshold: f64,
    /// p, when the model answered with a valid probability.
    pub probability: Option<f64>,
    /// `COMPRESS` or `CONTINUE`, when p is known.
    pub verdict: Option<String>,
    /// The configured decision model (`ModelInfo::model`).
    pub model: String,
    /// The model the host says served the call, with its version, when it says.
    pub served_model: Option<String>,
    /// A hash of the decision state sent ([`crate::engine::state_hash`]).
    pub state_hash: String,
    /// Why the probe failed, when it did.
    #[serde(with = "failure_record", default)]
    pub failure: Option<Failure>,
}

/// A recorded failure as `{kind, status?, message}`; read back as [`FailureKind::Other`] unless
/// its kind label is known.
mod failure_record {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::failure::{Failure, FailureKind};

    pub(super) fn serialize<S: Serializer>(f: &Option<Failure>, s: S) -> Result<S::Ok, S::Error> {
        f.serialize(s)
    }

    #[derive(Deserialize)]
    struct Stored {
        kind: String,
        status: Option<u16>,
        message: String,
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Failure>, D::Error> {
        let stored: Option<Stored> = Option::deserialize(d)?;
        Ok(stored.map(|s| {
            let kind = match (s.kind.as_str(), s.status) {
                ("http_status", Some(status)) => FailureKind::HttpStatus(status),
                (label, _) => FailureKind::from_label(label).unwrap_or(FailureKind::Other),
            };
            Failure::new(kind, s.message)
        }))
    }
}

/// Durable sessions with optimistic concurrency: everything a service needs, async.
///
/// A store refuses an in-view (unscoped) event whose timestamp does not strictly increase
/// over the session's latest in-view event ([`StoreError::NonIncreasingTimestamp`]), so that
/// no host clock can make a retained turn fall inside a compaction's range.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates an empty session with `state` at its first revision;
    /// [`StoreError::AlreadyExists`] when the key is taken.
    async fn create_session(
        &self,
        key: &SessionKey,
        state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Session, StoreError>;

    /// Loads a session with its whole history.
    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError>;

    /// The next prompt's context: [`assemble_context`] of the whole history. The default
    /// loads the whole session; a store with indexes answers from the live summary's
    /// neighbourhood.
    async fn load_context(&self, key: &SessionKey) -> Result<AssembledContext, StoreError> {
        Ok(assemble_context(&self.load(key).await?.events))
    }

    /// Every compaction of the coordinator view, subsumed ones marked:
    /// [`compaction_history`] of the whole history.
    async fn compaction_history(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<CompactionEntry>, StoreError> {
        Ok(compaction_history(&self.load(key).await?.events))
    }

    /// The gate's figures. The default loads the whole session; stores should answer from a
    /// header kept current on append.
    async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
        let session = self.load(key).await?;
        Ok(GateSnapshot::new(
            gate_input(&session.events),
            session.revision,
        ))
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

    /// The newest part of [`SessionStore::load_live_tail`]: the session's state and revision,
    /// the live compaction event, and the newest `max_events` (at least) of the live tail's
    /// other events in append order, with `whole` saying whether that is all of them. The
    /// engine's probe reads this (a longer window when the decision state needs more), so a
    /// long uncompacted tail costs the probe no more than a short one. The default is the
    /// whole live tail.
    async fn load_live_tail_window(
        &self,
        key: &SessionKey,
        max_events: usize,
    ) -> Result<TailWindow, StoreError> {
        let _ = max_events;
        Ok(TailWindow::new(self.load_live_tail(key).await?, true))
    }

    /// Records a shadow-mode decision beside the session (never in its event history). The
    /// default says the store cannot.
    async fn record_decision(
        &self,
        key: &SessionKey,
        record: DecisionRecord,
    ) -> Result<(), StoreError> {
        let _ = (key, record);
        Err(StoreError::Backend(crate::failure::classified(
            FailureKind::Other,
            "this store does not record shadow decisions",
        )))
    }

    /// The shadow-mode decisions recorded for the session, oldest first.
    async fn decisions(&self, key: &SessionKey) -> Result<Vec<DecisionRecord>, StoreError> {
        let _ = key;
        Ok(Vec::new())
    }

    /// Lossless recall: the session's raw events `query` matches (see [`crate::recall`] for
    /// what is searched), best first, at most `limit`. The default scans the whole history
    /// ([`scan::search_history`]); a store with a text index answers from it.
    async fn search(
        &self,
        key: &SessionKey,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<RecallHit>, StoreError> {
        let session = self.load(key).await?;
        Ok(scan::search_history(&session.events, query, limit))
    }

    /// The events the compaction event `compaction_id` covers, verbatim and in order
    /// ([`scan::expand_compaction`]); [`StoreError::Expand`] when the view has no such
    /// compaction.
    async fn expand(
        &self,
        key: &SessionKey,
        compaction_id: &str,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        let session = self.load(key).await?;
        scan::expand_compaction(&session.events, compaction_id).map_err(|error| {
            StoreError::Expand {
                key: key.clone(),
                error,
            }
        })
    }

    /// The coordinator view's events of turns `first..=last` (1-based), verbatim and in
    /// order ([`scan::expand_turns`]); [`StoreError::Expand`] when the range is empty or
    /// reaches past the session's turns.
    async fn expand_turns(
        &self,
        key: &SessionKey,
        first: usize,
        last: usize,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        let session = self.load(key).await?;
        scan::expand_turns(&session.events, first, last).map_err(|error| StoreError::Expand {
            key: key.clone(),
            error,
        })
    }

    /// How many turns of the coordinator view start before `ts` (see [`crate::recall`] for
    /// turn numbers), so that a summary can name its turns; `None` when the store cannot
    /// count them cheaply (the default). The engine asks once per compaction.
    async fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<Option<usize>, StoreError> {
        let _ = (key, ts);
        Ok(None)
    }

    /// Sessions whose newest turn is open (a query whose reply has not completed it, the gate
    /// header's [`crate::OpenTurn::Open`]) and to which nothing was appended before `before`:
    /// what a crash may have left open, for a service to close at start. The answer may hold
    /// more than that (an errored turn is open too): the caller checks each session's context.
    /// `None` when the store cannot list its sessions (the default).
    async fn open_turns(&self, before: Timestamp) -> Result<Option<Vec<SessionKey>>, StoreError> {
        let _ = before;
        Ok(None)
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
#[non_exhaustive]
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
#[non_exhaustive]
pub struct ProbeEnd<'a> {
    /// The validated probability, when the probe succeeded.
    pub probability: Option<Probability>,
    /// The verdict (CONTINUE when the probe failed: fail-open).
    pub verdict: Verdict,
    /// The model's answer, when one arrived.
    pub answer: Option<&'a DecisionAnswer>,
    /// Why the probe failed, when it did.
    pub failure: Option<&'a Failure>,
}

/// What a summarize span knows when it starts.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct SummarizeEnd<'a> {
    /// The summary, when it succeeded.
    pub summary: Option<&'a Summary>,
    /// Why it failed (summarizer or store), when it did.
    pub failure: Option<&'a Failure>,
}

impl<'a> ProbeStart<'a> {
    /// What a probe span knows when it starts.
    pub fn new(
        model: &'a ModelInfo,
        request: &'a ProbeRequest,
        threshold: f64,
        completed_turns: usize,
        prompt_tokens: u64,
    ) -> Self {
        ProbeStart {
            model,
            request,
            threshold,
            completed_turns,
            prompt_tokens,
        }
    }
}

impl<'a> ProbeEnd<'a> {
    /// What a probe span records when it ends.
    pub fn new(
        probability: Option<Probability>,
        verdict: Verdict,
        answer: Option<&'a DecisionAnswer>,
        failure: Option<&'a Failure>,
    ) -> Self {
        ProbeEnd {
            probability,
            verdict,
            answer,
            failure,
        }
    }
}

impl<'a> SummarizeStart<'a> {
    /// What a summarize span knows when it starts.
    pub fn new(
        model: &'a ModelInfo,
        request: &'a SummaryRequest,
        range: (Timestamp, Timestamp),
        slice_turns: usize,
        retained_turns: usize,
        forced: bool,
    ) -> Self {
        SummarizeStart {
            model,
            request,
            range,
            slice_turns,
            retained_turns,
            forced,
        }
    }
}

impl<'a> SummarizeEnd<'a> {
    /// What a summarize span records when it ends.
    pub fn new(summary: Option<&'a Summary>, failure: Option<&'a Failure>) -> Self {
        SummarizeEnd { summary, failure }
    }
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

/// A future a [`Clock`] completes after a duration.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The time source and timer: the core never reads a clock or starts a timer itself.
///
/// # Contract
/// `now` must **strictly increase** from call to call (and over the timestamps of the events
/// the host appends to the same session): coverage of a compaction is by timestamp, so a
/// retained turn stamped no later than the slice's end would fall inside the summary's range.
/// A coarse clock (whole seconds) breaks this; stores refuse such events
/// ([`StoreError::NonIncreasingTimestamp`]) and the engine refuses such a compaction
/// ([`crate::ContinueReason::TimestampsNotIncreasing`]). Hosts on tokio can use the service
/// crate's system clock, which never repeats a value.
///
/// `sleep` completes after `duration`; the engine races every adapter call against it to
/// enforce its deadlines, so a hung adapter can never wedge a session.
pub trait Clock: Send + Sync {
    /// Now, in epoch seconds: strictly increasing.
    fn now(&self) -> Timestamp;
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> Sleep;
}

/// The source of fresh event and invocation ids.
pub trait IdGenerator: Send + Sync {
    /// A fresh, unique id.
    fn next_id(&self) -> String;
}
