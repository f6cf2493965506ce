//! Recording telemetry, a stepping clock and sequential ids.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ports::{
    Clock, IdGenerator, ProbeEnd, ProbeSpan, ProbeStart, SummarizeEnd, SummarizeSpan,
    SummarizeStart, Telemetry,
};
use crate::time::Timestamp;

use super::lock;

/// A finished probe span, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRecord {
    /// Model slug.
    pub model: String,
    /// Completed turns.
    pub completed_turns: usize,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// p, when valid.
    pub probability: Option<f64>,
    /// Verdict.
    pub verdict: String,
    /// Failure, when any.
    pub failure: Option<String>,
}

/// A finished summarize span, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct SummarizeRecord {
    /// Range.
    pub range: (Timestamp, Timestamp),
    /// Slice turns.
    pub slice_turns: usize,
    /// Forced flag.
    pub forced: bool,
    /// Failure, when any.
    pub failure: Option<String>,
}

/// Records spans in memory.
#[derive(Debug, Default)]
pub struct RecordingTelemetry {
    probes: std::sync::Arc<Mutex<Vec<ProbeRecord>>>,
    summaries: std::sync::Arc<Mutex<Vec<SummarizeRecord>>>,
}

impl RecordingTelemetry {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }
    /// Finished probe spans.
    pub fn probes(&self) -> Vec<ProbeRecord> {
        lock(&self.probes).clone()
    }
    /// Finished summarize spans.
    pub fn summaries(&self) -> Vec<SummarizeRecord> {
        lock(&self.summaries).clone()
    }
}

struct OpenProbe {
    record: ProbeRecord,
    sink: std::sync::Arc<Mutex<Vec<ProbeRecord>>>,
}

impl ProbeSpan for OpenProbe {
    fn finish(self: Box<Self>, end: &ProbeEnd<'_>) {
        let mut record = self.record;
        record.probability = end.probability.map(|p| p.value());
        record.verdict = end.verdict.as_str().to_owned();
        record.failure = end.failure.map(|f| f.message().to_owned());
        lock(&self.sink).push(record);
    }
}

struct OpenSummarize {
    record: SummarizeRecord,
    sink: std::sync::Arc<Mutex<Vec<SummarizeRecord>>>,
}

impl SummarizeSpan for OpenSummarize {
    fn finish(self: Box<Self>, end: &SummarizeEnd<'_>) {
        let mut record = self.record;
        record.failure = end.failure.map(|f| f.message().to_owned());
        lock(&self.sink).push(record);
    }
}

impl Telemetry for RecordingTelemetry {
    fn start_probe(&self, start: &ProbeStart<'_>) -> Box<dyn ProbeSpan> {
        Box::new(OpenProbe {
            record: ProbeRecord {
                model: start.request.model.clone(),
                completed_turns: start.completed_turns,
                prompt_tokens: start.prompt_tokens,
                probability: None,
                verdict: String::new(),
                failure: None,
            },
            sink: self.probes.clone(),
        })
    }

    fn start_summarize(&self, start: &SummarizeStart<'_>) -> Box<dyn SummarizeSpan> {
        Box::new(OpenSummarize {
            record: SummarizeRecord {
                range: start.range,
                slice_turns: start.slice_turns,
                forced: start.forced,
                failure: None,
            },
            sink: self.summaries.clone(),
        })
    }
}

/// A clock that advances one second per reading, from a fixed start. Its deadlines never
/// pass unless [`SteppingClock::expiring_deadlines`] says they pass at once.
#[derive(Debug)]
pub struct SteppingClock {
    seconds: AtomicU64,
    deadlines_pass: bool,
}

impl SteppingClock {
    /// Starts at `start` epoch seconds (whole seconds).
    pub fn starting_at(start: u64) -> Self {
        SteppingClock {
            seconds: AtomicU64::new(start),
            deadlines_pass: false,
        }
    }

    /// Every `sleep` completes at once, so any adapter call that is not ready when first
    /// polled misses its deadline: for tests of adapters that never answer.
    pub fn expiring_deadlines(mut self) -> Self {
        self.deadlines_pass = true;
        self
    }
}

impl Clock for SteppingClock {
    fn now(&self) -> Timestamp {
        let s = self.seconds.fetch_add(1, Ordering::SeqCst);
        Timestamp::new(s as f64).unwrap_or(Timestamp::EPOCH)
    }

    fn sleep(&self, _duration: std::time::Duration) -> crate::ports::Sleep {
        if self.deadlines_pass {
            Box::pin(std::future::ready(()))
        } else {
            Box::pin(std::future::pending())
        }
    }
}

/// Ids `id-1`, `id-2`, ….
#[derive(Debug, Default)]
pub struct SequentialIds(AtomicU64);

impl IdGenerator for SequentialIds {
    fn next_id(&self) -> String {
        format!("id-{}", self.0.fetch_add(1, Ordering::SeqCst) + 1)
    }
}
