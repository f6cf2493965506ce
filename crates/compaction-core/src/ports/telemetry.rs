//! Spans, the clock and the id source: how the engine reports and what it is given instead of
//! reading the environment.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::*;
use crate::failure::Failure;
use crate::probe::{Probability, ProbeRequest, Verdict};
use crate::time::Timestamp;

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
