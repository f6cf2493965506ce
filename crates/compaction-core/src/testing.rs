//! In-memory fakes of every port and an event factory, for tests here and in consuming
//! crates (feature `test-support`). The fakes count their calls so tests can assert that a
//! fast exit made none.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::json;

use crate::event::{
    Actions, Content, Event, EventCompaction, FunctionCall, FunctionResponse, Part,
};
use crate::ports::{
    AdapterError, Clock, DecisionAnswer, DecisionModel, IdGenerator, ModelInfo, ProbeEnd,
    ProbeSpan, ProbeStart, SessionStore, StoreError, SummarizeEnd, SummarizeSpan, SummarizeStart,
    Summarizer, Summary, SummaryRequest, Telemetry, TokenUsage,
};
use crate::probe::ProbeRequest;
use crate::session::{Revision, Session, SessionKey};
use crate::time::Timestamp;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Builds ADK-shaped events with strictly increasing timestamps (one second apart).
#[derive(Debug)]
pub struct EventFactory {
    next_ts: f64,
    next_id: u64,
}

impl Default for EventFactory {
    fn default() -> Self {
        Self::new()
    }
}

impl EventFactory {
    /// Starts at 2023-11-14T22:13:20Z.
    pub fn new() -> Self {
        Self::starting_at(1_700_000_000.0)
    }

    /// Starts at `seconds` since the epoch (for stores that want events later than the wall
    /// clock, such as an ADK session created now).
    pub fn starting_at(seconds: f64) -> Self {
        EventFactory {
            next_ts: seconds,
            next_id: 0,
        }
    }

    /// The next timestamp, advancing the factory's clock.
    pub fn tick(&mut self) -> Timestamp {
        let ts = Timestamp::new(self.next_ts).unwrap_or(Timestamp::EPOCH);
        self.next_ts += 1.0;
        ts
    }

    fn base(&mut self, invocation: &str, author: &str) -> Event {
        self.next_id += 1;
        let ts = self.tick();
        Event::new(format!("e{}", self.next_id), invocation, author, ts)
    }

    /// A user text event.
    pub fn user(&mut self, invocation: &str, text: &str) -> Event {
        self.base(invocation, "user")
            .with_content(Content::user_text(text))
    }

    /// A coordinator text event.
    pub fn model(&mut self, invocation: &str, text: &str) -> Event {
        self.base(invocation, "coordinator")
            .with_content(Content::model_text(text))
    }

    /// A coordinator tool call.
    pub fn function_call(&mut self, invocation: &str, name: &str) -> Event {
        let part = Part {
            function_call: Some(FunctionCall {
                id: Some(format!("fc-{}", self.next_id + 1)),
                name: name.to_owned(),
                args: Some(json!({"query": "q"})),
            }),
            ..Part::default()
        };
        self.base(invocation, "coordinator").with_content(Content {
            role: Some("model".into()),
            parts: vec![part],
        })
    }

    /// A tool result.
    pub fn function_response(&mut self, invocation: &str, name: &str, result: &str) -> Event {
        let part = Part {
            function_response: Some(FunctionResponse {
                id: None,
                name: name.to_owned(),
                response: Some(json!({ "result": result })),
            }),
            ..Part::default()
        };
        self.base(invocation, "user").with_content(Content {
            role: Some("user".into()),
            parts: vec![part],
        })
    }

    /// A user query and the coordinator's answer.
    pub fn conversational_turn(
        &mut self,
        invocation: &str,
        query: &str,
        answer: &str,
    ) -> Vec<Event> {
        vec![self.user(invocation, query), self.model(invocation, answer)]
    }

    /// A research turn: query, tool call, a scoped sub-agent loop, the synthesis as a tool
    /// result, and the coordinator's answer.
    pub fn research_turn(&mut self, invocation: &str, query: &str, synthesis: &str) -> Vec<Event> {
        let scope = format!("search_pipeline:fc-{invocation}");
        vec![
            self.user(invocation, query),
            self.function_call(invocation, "search_library"),
            self.model(invocation, "ReAct: searching chunks")
                .with_scope(scope.clone()),
            self.function_response(invocation, "retrieve", "raw chunk payload")
                .with_scope(scope),
            self.function_response(invocation, "search_library", synthesis),
            self.model(invocation, &format!("Findings for: {query}")),
        ]
    }

    /// A rewind event undoing `target` and everything after it.
    pub fn rewind(&mut self, invocation: &str, target: &str) -> Event {
        let mut e = self.base(invocation, "user");
        e.actions.rewind_before_invocation_id = Some(target.to_owned());
        e
    }

    /// A compaction event covering `[start, end]`.
    pub fn compaction(
        &mut self,
        invocation: &str,
        start: Timestamp,
        end: Timestamp,
        summary: &str,
    ) -> Event {
        let mut e = self.base(invocation, "user");
        e.actions = Actions {
            compaction: Some(EventCompaction {
                start_timestamp: start,
                end_timestamp: end,
                compacted_content: Content::model_text(summary),
            }),
            ..Actions::default()
        };
        e
    }
}

/// A decision model that answers from a script (or a constant) and records every request.
#[derive(Debug, Default)]
pub struct ScriptedDecisionModel {
    script: Mutex<VecDeque<Result<f64, String>>>,
    fallback: Option<f64>,
    requests: Mutex<Vec<ProbeRequest>>,
    calls: AtomicUsize,
}

impl ScriptedDecisionModel {
    /// Always answers `p`.
    pub fn constant(p: f64) -> Self {
        ScriptedDecisionModel {
            fallback: Some(p),
            ..Self::default()
        }
    }

    /// Answers from `script` in order, then fails.
    pub fn scripted(script: impl IntoIterator<Item = Result<f64, String>>) -> Self {
        ScriptedDecisionModel {
            script: Mutex::new(script.into_iter().collect()),
            ..Self::default()
        }
    }

    /// Always fails with `message`.
    pub fn failing(message: &str) -> Self {
        Self::scripted(std::iter::repeat_n(Err(message.to_owned()), 1024))
    }

    /// How many times `decide` was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every request received.
    pub fn requests(&self) -> Vec<ProbeRequest> {
        lock(&self.requests).clone()
    }
}

#[async_trait]
impl DecisionModel for ScriptedDecisionModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            system: "scripted".into(),
            provider: "in-memory".into(),
            model: "scripted-decision".into(),
        }
    }

    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        lock(&self.requests).push(request.clone());
        let next = lock(&self.script).pop_front();
        match next.or(self.fallback.map(Ok)) {
            Some(Ok(p)) => Ok(DecisionAnswer {
                probability: p,
                served_model: Some("scripted-decision".into()),
                usage: Some(TokenUsage {
                    input: Some(100),
                    output: Some(0),
                }),
            }),
            Some(Err(message)) => Err(message.into()),
            None => Err("script exhausted".into()),
        }
    }
}

/// A summarizer that writes a deterministic summary naming what it consolidated, or fails.
#[derive(Debug, Default)]
pub struct RecordingSummarizer {
    failure: Option<String>,
    requests: Mutex<Vec<SummaryRequest>>,
    calls: AtomicUsize,
}

impl RecordingSummarizer {
    /// Succeeds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Always fails with `message`.
    pub fn failing(message: &str) -> Self {
        RecordingSummarizer {
            failure: Some(message.to_owned()),
            ..Self::default()
        }
    }

    /// How many times `summarize` was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every request received.
    pub fn requests(&self) -> Vec<SummaryRequest> {
        lock(&self.requests).clone()
    }
}

#[async_trait]
impl Summarizer for RecordingSummarizer {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            system: "recording".into(),
            provider: "in-memory".into(),
            model: "recording-summarizer".into(),
        }
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        lock(&self.requests).push(request.clone());
        if let Some(message) = &self.failure {
            return Err(message.clone().into());
        }
        let mut text = String::new();
        if let Some(previous) = &request.previous_summary {
            text.push_str(previous);
            text.push('\n');
        }
        for turn in &request.turns {
            text.push_str(&format!("- {}\n", turn.user));
        }
        Ok(Summary {
            text: text.trim_end().to_owned(),
            served_model: Some("recording-summarizer".into()),
            usage: Some(TokenUsage {
                input: Some(request.prompt.len() as u64 / 4),
                output: Some(text.len() as u64 / 4),
            }),
            receipt: None,
        })
    }
}

/// An in-memory store with revision counters. `race_next_append` makes another writer move
/// the session on just before the next append, to exercise the stale path.
///
/// `load_live_tail` answers with [`crate::live_tail`] (as an indexed store would);
/// [`InMemoryStore::serving_whole_histories`] makes it answer with the whole history instead
/// (the port's default), so that tests can check both give the same evaluations.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    sessions: Mutex<HashMap<SessionKey, Session>>,
    whole_histories: bool,
    window_cap: Option<usize>,
    race: Mutex<Option<Event>>,
    decisions: Mutex<HashMap<SessionKey, Vec<crate::ports::DecisionRecord>>>,
    loads: AtomicUsize,
    snapshots: AtomicUsize,
    appends: AtomicUsize,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose `load_live_tail` returns the whole history.
    pub fn serving_whole_histories() -> Self {
        Self {
            whole_histories: true,
            ..Self::default()
        }
    }

    /// An empty store whose live-tail windows are scaled down: a request for 256 events gets
    /// `cap`, for 1,024 gets `4 × cap`, and so on: for tests of the engine's windowed probe.
    pub fn with_window_cap(cap: usize) -> Self {
        Self {
            window_cap: Some(cap),
            ..Self::default()
        }
    }

    /// Stores `session` as is (revision included).
    pub fn insert(&self, session: Session) {
        lock(&self.sessions).insert(session.key.clone(), session);
    }

    /// The stored session.
    pub fn get(&self, key: &SessionKey) -> Option<Session> {
        lock(&self.sessions).get(key).cloned()
    }

    /// Before the next append, a concurrent writer appends `event` (bumping the revision).
    pub fn race_next_append(&self, event: Event) {
        *lock(&self.race) = Some(event);
    }

    /// Calls to `load`.
    pub fn loads(&self) -> usize {
        self.loads.load(Ordering::SeqCst)
    }

    /// Calls to `gate_snapshot`.
    pub fn snapshots(&self) -> usize {
        self.snapshots.load(Ordering::SeqCst)
    }

    /// Successful appends.
    pub fn appends(&self) -> usize {
        self.appends.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl SessionStore for InMemoryStore {
    async fn create_session(
        &self,
        key: &SessionKey,
        state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Session, StoreError> {
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(key) {
            return Err(StoreError::AlreadyExists(key.clone()));
        }
        let session = Session {
            key: key.clone(),
            state,
            events: Vec::new(),
            revision: Revision(0),
        };
        sessions.insert(key.clone(), session.clone());
        Ok(session)
    }

    async fn record_decision(
        &self,
        key: &SessionKey,
        record: crate::ports::DecisionRecord,
    ) -> Result<(), StoreError> {
        if !lock(&self.sessions).contains_key(key) {
            return Err(StoreError::NotFound(key.clone()));
        }
        lock(&self.decisions)
            .entry(key.clone())
            .or_default()
            .push(record);
        Ok(())
    }

    async fn decisions(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<crate::ports::DecisionRecord>, StoreError> {
        Ok(lock(&self.decisions).get(key).cloned().unwrap_or_default())
    }

    /// The oracle of the port's `open_turns`: the turn tracker over each session's view since
    /// its live compaction, and the newest event's timestamp for "nothing appended since".
    async fn open_turns(&self, before: Timestamp) -> Result<Option<Vec<SessionKey>>, StoreError> {
        let sessions = lock(&self.sessions);
        let mut open: Vec<SessionKey> = sessions
            .values()
            .filter(|session| {
                let view = crate::history::coordinator_view(&session.events);
                let tracker = crate::gate::tracker_since_live(&view);
                let quiet = session.events.last().is_some_and(|e| e.timestamp < before);
                tracker.open == crate::history::OpenTurn::Open && quiet
            })
            .map(|session| session.key.clone())
            .collect();
        open.sort_by_key(ToString::to_string);
        Ok(Some(open))
    }

    async fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<Option<usize>, StoreError> {
        let session = self
            .get(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        Ok(Some(crate::recall::scan::turns_before(&session.events, ts)))
    }

    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.get(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))
    }

    async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
        let mut session = self.load(key).await?;
        if !self.whole_histories {
            session.events = crate::context::live_tail(&session.events);
        }
        Ok(session)
    }

    async fn load_live_tail_window(
        &self,
        key: &SessionKey,
        max_events: usize,
    ) -> Result<crate::ports::TailWindow, StoreError> {
        let mut session = self.load_live_tail(key).await?;
        // The window counts the tail's events other than compactions; a capped store scales
        // the engine's request down (256 events become `cap`), keeping its growth factor.
        let others = session
            .events
            .iter()
            .filter(|e| e.compaction().is_none())
            .count();
        let limit = self.window_cap.map_or(max_events, |cap| {
            cap.saturating_mul((max_events / 256).max(1))
        });
        if others <= limit {
            return Ok(crate::ports::TailWindow::new(session, true));
        }
        let mut skip = others - limit;
        session.events.retain(|e| {
            if e.compaction().is_some() {
                return true;
            }
            if skip > 0 {
                skip -= 1;
                false
            } else {
                true
            }
        });
        Ok(crate::ports::TailWindow::new(session, false))
    }

    async fn gate_snapshot(
        &self,
        key: &SessionKey,
    ) -> Result<crate::ports::GateSnapshot, StoreError> {
        self.snapshots.fetch_add(1, Ordering::SeqCst);
        let session = self
            .get(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        Ok(crate::ports::GateSnapshot::new(
            crate::gate::gate_input(&session.events),
            session.revision,
        ))
    }

    async fn append(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: Event,
    ) -> Result<Revision, StoreError> {
        let mut sessions = lock(&self.sessions);
        let session = sessions
            .get_mut(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        if let Some(racer) = lock(&self.race).take() {
            session.events.push(racer);
            session.revision = Revision(session.revision.0 + 1);
        }
        if session.revision != expected {
            return Err(StoreError::Stale {
                key: key.clone(),
                expected,
                actual: session.revision,
            });
        }
        let latest = crate::history::latest_view_timestamp(&session.events);
        if !crate::history::timestamp_may_follow(latest, &event) {
            return Err(StoreError::NonIncreasingTimestamp {
                key: key.clone(),
                event_id: event.id.clone(),
                latest: latest.unwrap_or(Timestamp::EPOCH),
                offered: event.timestamp,
            });
        }
        session.events.push(event);
        session.revision = Revision(session.revision.0 + 1);
        self.appends.fetch_add(1, Ordering::SeqCst);
        Ok(session.revision)
    }
}

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
