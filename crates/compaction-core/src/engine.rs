//! The engine: one post-turn evaluation, driven through the ports (spec section 2).
//!
//! `evaluate_and_compact` runs the envelope gate on the store's snapshot, probes the decision
//! model (or skips it at the hard backstop), plans the slice, runs the rolling consolidation
//! summarizer and appends the compaction event with the revision it read. It never returns
//! an error: every failure becomes an [`Outcome`] that says what happened (fail-open).
//! A failure text it traces passes through [`scrub`] first: an exporter that ships log
//! events (a standard tracing-opentelemetry layer does) never receives a key-shaped token.

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::{Map, Value, json};

use crate::context::live_compaction_index;
use crate::estimate::{CharsPerToken, TokenEstimator};
use crate::event::Event;
use crate::failure::{Failure, FailureKind};
use crate::gate::{FastExitReason, GateDecision, GateInput, envelope_gate, gate_input};
use crate::history::coordinator_view;
use crate::plan::{CompactionPlan, plan_compaction};
use crate::ports::DecisionRecord;
use crate::ports::TailWindow;
use crate::ports::{
    Clock, DecisionModel, IdGenerator, NoTelemetry, ProbeEnd, ProbeStart, SessionStore, StoreError,
    SummarizeEnd, SummarizeStart, Summarizer, SummaryRequest, Telemetry,
};
use crate::probe::{Probability, ProbeRequest, Verdict, verdict};
use crate::scrub::scrub;
use crate::session::{Revision, Session, SessionKey};
use crate::settings::{EffectiveSettings, Settings, SettingsError};
use crate::state::{
    DEFAULT_STATE_BUDGET_TOKENS, DecisionState, NeedMore, extract_decision_state_from_view,
    extract_decision_state_from_window,
};
use crate::time::Timestamp;

/// The probe's deadline when the host sets none: the spec's 10 s (section 5.1).
pub const DEFAULT_PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// The summarizer's deadline when the host sets none.
pub const DEFAULT_SUMMARIZE_DEADLINE: Duration = Duration::from_secs(120);

/// Why the engine kept the raw context after the gate opened.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ContinueReason {
    /// p < τ.
    BelowThreshold {
        /// p.
        probability: Probability,
        /// τ.
        threshold: f64,
    },
    /// The probe failed (timeout, error, invalid p): fail-open.
    ProbeFailed {
        /// What went wrong.
        failure: Failure,
    },
    /// The first retained turn does not start strictly after the slice's end: a compaction
    /// covering `[start, slice_end]` would hide it, so none is made (see [`crate::Clock`]).
    TimestampsNotIncreasing {
        /// The slice's last timestamp (t_{N-K}).
        slice_end: Timestamp,
        /// The first retained event's timestamp.
        retained_start: Timestamp,
        /// p, when the decision model was asked.
        probability: Option<Probability>,
    },
}

/// A compaction the engine appended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Compaction {
    /// The appended event.
    pub event: Event,
    /// The session's revision after the append.
    pub revision: Revision,
    /// Turns folded by this compaction (new turns only, completed or not).
    pub slice_turns: usize,
    /// p, when the decision model was asked.
    pub probability: Option<Probability>,
}

/// The result of one post-turn evaluation.
///
/// `Display` gives the words a person reads (`probe CONTINUE: p < τ = 0.75`); `Serialize`
/// gives the same facts for machines (`{"outcome": "continue", "gate": "probe", …}`).
#[derive(Debug, Clone, PartialEq)]
#[must_use]
#[non_exhaustive]
pub enum Outcome {
    /// The gate was not met: no call, no span.
    FastExit(FastExitReason),
    /// The probe said CONTINUE, or failed.
    Continue(ContinueReason),
    /// The probe said COMPRESS and the summary was appended.
    Compressed(Compaction),
    /// The hard backstop forced compaction and the summary was appended.
    Forced(Compaction),
    /// Another writer moved the session on: the compaction was dropped, nothing written.
    StaleDropped {
        /// What the store said.
        failure: Failure,
        /// p, when the decision model was asked.
        probability: Option<Probability>,
    },
    /// The summarizer failed: nothing written.
    SummarizerFailed {
        /// What went wrong.
        failure: Failure,
        /// True when the backstop forced the attempt.
        forced: bool,
        /// p, when the decision model was asked.
        probability: Option<Probability>,
    },
    /// The gate opened but there was no new completed turn outside the retained ones.
    NothingToCompact,
    /// The store could not be read or written: nothing written.
    StoreFailed {
        /// What went wrong.
        failure: Failure,
    },
    /// Shadow mode: the gate opened, the decision model was asked and its decision recorded;
    /// nothing was compacted.
    Shadowed {
        /// The decision as recorded.
        decision: Box<DecisionRecord>,
        /// Why the record could not be stored, when it could not (fail-open).
        not_recorded: Option<Failure>,
    },
}

impl Outcome {
    /// A short label: `fast-exit`, `continue`, `compressed`, `forced`, `stale-dropped`,
    /// `summarizer-failed`, `nothing-to-compact`, `store-failed`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::FastExit(_) => "fast-exit",
            Outcome::Continue(_) => "continue",
            Outcome::Compressed(_) => "compressed",
            Outcome::Forced(_) => "forced",
            Outcome::StaleDropped { .. } => "stale-dropped",
            Outcome::SummarizerFailed { .. } => "summarizer-failed",
            Outcome::NothingToCompact => "nothing-to-compact",
            Outcome::StoreFailed { .. } => "store-failed",
            Outcome::Shadowed { .. } => "shadowed",
        }
    }

    /// p, when the decision model answered.
    pub fn probability(&self) -> Option<Probability> {
        match self {
            Outcome::Continue(ContinueReason::BelowThreshold { probability, .. }) => {
                Some(*probability)
            }
            Outcome::Continue(ContinueReason::TimestampsNotIncreasing { probability, .. }) => {
                *probability
            }
            Outcome::Compressed(c) | Outcome::Forced(c) => c.probability,
            Outcome::StaleDropped { probability, .. }
            | Outcome::SummarizerFailed { probability, .. } => *probability,
            Outcome::Shadowed { decision, .. } => {
                decision.probability.and_then(|p| Probability::new(p).ok())
            }
            _ => None,
        }
    }

    /// The appended compaction, if any.
    pub fn compaction(&self) -> Option<&Compaction> {
        match self {
            Outcome::Compressed(c) | Outcome::Forced(c) => Some(c),
            _ => None,
        }
    }

    /// The failure, when the outcome is one (fail-open).
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Outcome::Continue(ContinueReason::ProbeFailed { failure })
            | Outcome::StaleDropped { failure, .. }
            | Outcome::SummarizerFailed { failure, .. }
            | Outcome::StoreFailed { failure } => Some(failure),
            Outcome::Shadowed {
                decision,
                not_recorded,
            } => decision.failure.as_ref().or(not_recorded.as_ref()),
            _ => None,
        }
    }

    /// Which way the gate went: `exit`, `probe`, `backstop`, or `-` when the store failed
    /// before it could answer.
    pub fn gate_label(&self) -> &'static str {
        match self {
            Outcome::FastExit(_) => "exit",
            Outcome::Forced(_) | Outcome::SummarizerFailed { forced: true, .. } => "backstop",
            Outcome::Shadowed { decision, .. } if decision.backstop => "backstop",
            Outcome::StoreFailed { .. } => "-",
            _ => "probe",
        }
    }

    /// The verdict: `COMPRESS`, `CONTINUE`, or `-` on a fast exit or a store failure.
    pub fn verdict_label(&self) -> &'static str {
        match self {
            Outcome::FastExit(_) | Outcome::StoreFailed { .. } => "-",
            Outcome::Continue(_) => "CONTINUE",
            Outcome::Shadowed { decision, .. } => match decision.verdict.as_deref() {
                Some("COMPRESS") => "COMPRESS",
                Some(_) => "CONTINUE",
                None => "-",
            },
            _ => "COMPRESS",
        }
    }

    /// Why, in a person's words: the fast-exit reason, the failure, or what was folded.
    pub fn detail(&self) -> String {
        match self {
            Outcome::FastExit(reason) => reason.to_string(),
            Outcome::Continue(ContinueReason::BelowThreshold { threshold, .. }) => {
                format!("p < τ = {threshold}")
            }
            Outcome::Continue(ContinueReason::ProbeFailed { failure }) => {
                format!("fail-open: {failure}")
            }
            Outcome::Continue(ContinueReason::TimestampsNotIncreasing {
                slice_end,
                retained_start,
                ..
            }) => format!(
                "no compaction: the first retained turn starts at {retained_start}, not after \
                 the slice's end {slice_end} (timestamps must strictly increase)"
            ),
            Outcome::Compressed(c) | Outcome::Forced(c) => {
                format!("folded {} turns into the rolling summary", c.slice_turns)
            }
            Outcome::StaleDropped { failure, .. } => format!("dropped: {failure}"),
            Outcome::SummarizerFailed { failure, .. } => format!("nothing written: {failure}"),
            Outcome::NothingToCompact => "nothing new to fold".to_owned(),
            Outcome::StoreFailed { failure } => format!("store failed: {failure}"),
            Outcome::Shadowed {
                decision,
                not_recorded,
            } => {
                let what = match (&decision.probability, &decision.failure) {
                    (Some(p), _) => format!("shadow: p = {p:.2}, τ = {}", decision.threshold),
                    (None, Some(f)) => format!("shadow: the probe failed: {f}"),
                    (None, None) => "shadow: no probability".to_owned(),
                };
                match not_recorded {
                    None => format!("{what}; recorded, nothing compacted"),
                    Some(f) => format!("{what}; NOT recorded ({f}), nothing compacted"),
                }
            }
        }
    }
}

impl fmt::Display for Outcome {
    /// `gate VERDICT: detail`, for example `probe CONTINUE: p < τ = 0.75`; without a verdict
    /// (a fast exit, a store failure) `gate: detail`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.verdict_label() {
            "-" => write!(f, "{}: {}", self.gate_label(), self.detail()),
            verdict => write!(f, "{} {verdict}: {}", self.gate_label(), self.detail()),
        }
    }
}

impl Serialize for Outcome {
    /// `outcome` (the [`Outcome::label`]), `gate`, `verdict`, `probability` (or null),
    /// `failure` (kind, status, message; or null), `compaction_event_id` and `slice_turns`
    /// (or null) and `detail`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Outcome", 8)?;
        s.serialize_field("outcome", self.label())?;
        s.serialize_field("gate", self.gate_label())?;
        s.serialize_field("verdict", self.verdict_label())?;
        s.serialize_field("probability", &self.probability().map(Probability::value))?;
        s.serialize_field("failure", &self.failure())?;
        s.serialize_field(
            "compaction_event_id",
            &self.compaction().map(|c| c.event.id.as_str()),
        )?;
        s.serialize_field("slice_turns", &self.compaction().map(|c| c.slice_turns))?;
        s.serialize_field("detail", &self.detail())?;
        s.end()
    }
}

/// The engine and the adapters it drives.
pub struct Engine {
    settings: EffectiveSettings,
    decision: Arc<dyn DecisionModel>,
    summarizer: Arc<dyn Summarizer>,
    store: Arc<dyn SessionStore>,
    telemetry: Arc<dyn Telemetry>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    estimator: Arc<dyn TokenEstimator>,
    state_budget_tokens: usize,
    probe_deadline: Duration,
    summarize_deadline: Duration,
    shadow: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("settings", &self.settings)
            .field("decision", &self.decision.info())
            .field("summarizer", &self.summarizer.info())
            .finish_non_exhaustive()
    }
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    settings: Settings,
    decision: Arc<dyn DecisionModel>,
    summarizer: Arc<dyn Summarizer>,
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    telemetry: Arc<dyn Telemetry>,
    estimator: Arc<dyn TokenEstimator>,
    state_budget_tokens: usize,
    probe_deadline: Duration,
    summarize_deadline: Duration,
    shadow: bool,
}

impl EngineBuilder {
    /// Shadow mode (`adaptive_compaction_shadow`): whenever the gate opens, probe and record
    /// the decision through [`SessionStore::record_decision`], but never compact
    /// ([`Outcome::Shadowed`]). For calibrating τ on real traffic before trusting it.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// Sets the probe's deadline (default [`DEFAULT_PROBE_DEADLINE`], the spec's 10 s): a
    /// probe that has not answered by then fails open ([`FailureKind::Timeout`]).
    pub fn probe_deadline(mut self, deadline: Duration) -> Self {
        self.probe_deadline = deadline;
        self
    }

    /// Sets the summarizer's deadline (default [`DEFAULT_SUMMARIZE_DEADLINE`]); hosts usually
    /// pass the summarizer's own timeout plus a margin.
    pub fn summarize_deadline(mut self, deadline: Duration) -> Self {
        self.summarize_deadline = deadline;
        self
    }

    /// Sets the settings (default: the spec's defaults).
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Sets the telemetry (default: none).
    pub fn telemetry(mut self, telemetry: Arc<dyn Telemetry>) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// Sets the token estimator (default: [`CharsPerToken`]).
    pub fn estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// Sets the decision state's token budget (default 500).
    pub fn state_budget_tokens(mut self, tokens: usize) -> Self {
        self.state_budget_tokens = tokens;
        self
    }

    /// Validates the settings and builds the engine. When the min_turns clamp fires the
    /// warning is traced and kept in [`Engine::settings`]`.clamp_warning`.
    pub fn build(self) -> Result<Engine, SettingsError> {
        let settings = self.settings.effective()?;
        if let Some(warning) = settings.clamp_warning {
            tracing::warn!("{warning}");
        }
        Ok(Engine {
            settings,
            decision: self.decision,
            summarizer: self.summarizer,
            store: self.store,
            telemetry: self.telemetry,
            clock: self.clock,
            ids: self.ids,
            estimator: self.estimator,
            state_budget_tokens: self.state_budget_tokens,
            probe_deadline: self.probe_deadline,
            summarize_deadline: self.summarize_deadline,
            shadow: self.shadow,
        })
    }
}

impl Engine {
    /// Starts a builder with the four required ports plus the clock and id source.
    pub fn builder(
        decision: Arc<dyn DecisionModel>,
        summarizer: Arc<dyn Summarizer>,
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
    ) -> EngineBuilder {
        EngineBuilder {
            settings: Settings::default(),
            decision,
            summarizer,
            store,
            clock,
            ids,
            telemetry: Arc::new(NoTelemetry),
            estimator: Arc::new(CharsPerToken),
            state_budget_tokens: DEFAULT_STATE_BUDGET_TOKENS,
            probe_deadline: DEFAULT_PROBE_DEADLINE,
            summarize_deadline: DEFAULT_SUMMARIZE_DEADLINE,
            shadow: false,
        }
    }

    /// The effective settings.
    pub fn settings(&self) -> &EffectiveSettings {
        &self.settings
    }

    /// The same engine (the same adapters, store, telemetry, deadlines and shadow mode) on
    /// new `settings`, validated as [`EngineBuilder::build`] validates them: how a host that
    /// watches the settings file makes the next evaluation use the new values. `self` is
    /// untouched, so an evaluation running on it finishes on the settings it started with.
    pub fn with_settings(&self, settings: Settings) -> Result<Engine, SettingsError> {
        let settings = settings.effective()?;
        if let Some(warning) = settings.clamp_warning {
            tracing::warn!("{warning}");
        }
        Ok(Engine {
            settings,
            decision: self.decision.clone(),
            summarizer: self.summarizer.clone(),
            store: self.store.clone(),
            telemetry: self.telemetry.clone(),
            clock: self.clock.clone(),
            ids: self.ids.clone(),
            estimator: self.estimator.clone(),
            state_budget_tokens: self.state_budget_tokens,
            probe_deadline: self.probe_deadline,
            summarize_deadline: self.summarize_deadline,
            shadow: self.shadow,
        })
    }

    /// The gate's decision for `input` (pure; no I/O).
    pub fn gate(&self, input: GateInput) -> GateDecision {
        envelope_gate(&self.settings, input)
    }

    /// One post-turn evaluation of a stored session: the gate on the store's snapshot (one
    /// small read), then, only if it opens, the live tail ([`SessionStore::load_live_tail`]),
    /// the probe, the summary and the append. The gate's figures are the snapshot's; the
    /// compaction is appended against the revision the tail was read at.
    pub async fn evaluate_and_compact(&self, key: &SessionKey) -> Outcome {
        if !self.settings.enabled {
            return Outcome::FastExit(FastExitReason::Disabled);
        }
        let snapshot = match self.store.gate_snapshot(key).await {
            Ok(s) => s,
            Err(e) => return store_failure(e),
        };
        let gate = self.gate(snapshot.input);
        let forced = match gate {
            GateDecision::FastExit(reason) => return Outcome::FastExit(reason),
            GateDecision::ForceCompress => true,
            GateDecision::Probe => false,
        };
        let input = snapshot.input;
        if forced && !self.shadow {
            let session = match self.store.load_live_tail(key).await {
                Ok(s) => s,
                Err(e) => return store_failure(e),
            };
            return self.plan_and_compact(&session, true, None).await;
        }
        // The probe reads only as much of the live tail as the decision state needs.
        let (window, state) = match self.windowed_state(key).await {
            Ok(read) => read,
            Err(e) => return store_failure(e),
        };
        if self.shadow {
            return self.shadow(&window.session, state, forced, input).await;
        }
        let probability = match self.probe(state, input).await {
            Ok(p) => p,
            Err(reason) => return Outcome::Continue(reason),
        };
        let session = if window.whole {
            window.session
        } else {
            match self.store.load_live_tail(key).await {
                Ok(s) => s,
                Err(e) => return store_failure(e),
            }
        };
        self.plan_and_compact(&session, false, Some(probability))
            .await
    }

    /// The live tail's newest events, as many as the decision state needs: a window of 256
    /// events, four times longer until the state is decided or the window is the whole tail.
    async fn windowed_state(
        &self,
        key: &SessionKey,
    ) -> Result<(TailWindow, Option<DecisionState>), StoreError> {
        let mut max_events = 256;
        loop {
            let window = self.store.load_live_tail_window(key, max_events).await?;
            let view = coordinator_view(&window.session.events);
            let summarized_until = live_compaction_index(&view)
                .and_then(|i| view[i].compaction())
                .map(|c| c.end_timestamp);
            match extract_decision_state_from_window(
                &view,
                window.whole,
                summarized_until,
                &window.session.state,
                self.estimator.as_ref(),
                self.state_budget_tokens,
            ) {
                Ok(state) => return Ok((window, state)),
                Err(NeedMore) => max_events = max_events.saturating_mul(4),
            }
        }
    }

    /// One post-turn evaluation of a session the caller already loaded (its whole history);
    /// appends through the store with `session.revision` as the expected revision.
    pub async fn evaluate_session(&self, session: &Session) -> Outcome {
        let input = gate_input(&session.events);
        let forced = match self.gate(input) {
            GateDecision::FastExit(reason) => return Outcome::FastExit(reason),
            GateDecision::ForceCompress => true,
            GateDecision::Probe => false,
        };
        if forced && !self.shadow {
            return self.plan_and_compact(session, true, None).await;
        }
        let state = self.state_of(session);
        if self.shadow {
            return self.shadow(session, state, forced, input).await;
        }
        match self.probe(state, input).await {
            Ok(p) => self.plan_and_compact(session, false, Some(p)).await,
            Err(reason) => Outcome::Continue(reason),
        }
    }

    /// The decision state of a whole live tail (or history).
    fn state_of(&self, session: &Session) -> Option<DecisionState> {
        // Turns the live summary already covers are folded: the probe reads the rest.
        let view = coordinator_view(&session.events);
        let summarized_until = live_compaction_index(&view)
            .and_then(|i| view[i].compaction())
            .map(|c| c.end_timestamp);
        extract_decision_state_from_view(
            &view,
            summarized_until,
            &session.state,
            self.estimator.as_ref(),
            self.state_budget_tokens,
        )
    }

    /// The plan, its retained-boundary check, the summary and the append.
    async fn plan_and_compact(
        &self,
        session: &Session,
        forced: bool,
        probability: Option<Probability>,
    ) -> Outcome {
        let Some(plan) = plan_compaction(&session.events, self.settings.retention_turns) else {
            return Outcome::NothingToCompact;
        };
        if let Some(retained_start) = plan
            .first_retained_timestamp
            .filter(|&t| t <= plan.end_timestamp)
        {
            tracing::warn!(
                slice_end = %plan.end_timestamp,
                %retained_start,
                "no compaction: timestamps do not increase across the retained boundary"
            );
            return Outcome::Continue(ContinueReason::TimestampsNotIncreasing {
                slice_end: plan.end_timestamp,
                retained_start,
                probability,
            });
        }
        self.compact(session, &plan, forced, probability).await
    }

    /// Runs the probe; `Ok(p)` means COMPRESS.
    async fn probe(
        &self,
        state: Option<DecisionState>,
        input: GateInput,
    ) -> Result<Probability, ContinueReason> {
        let asked = self.ask(state, input).await;
        match asked.result {
            Ok(p) if verdict(p, self.settings.threshold) == Verdict::Compress => Ok(p),
            Ok(p) => Err(ContinueReason::BelowThreshold {
                probability: p,
                threshold: self.settings.threshold,
            }),
            Err(failure) => {
                if failure.kind() != FailureKind::NothingToShow {
                    tracing::warn!(
                        kind = failure.kind().label(),
                        failure = %scrub(failure.message()),
                        "compaction probe failed; continuing (fail-open)"
                    );
                }
                Err(ContinueReason::ProbeFailed { failure })
            }
        }
    }

    /// Asks the decision model once (with its span and deadline) and validates p.
    async fn ask(&self, state: Option<DecisionState>, input: GateInput) -> Asked {
        // The gate counted completed turns, but the session read after it shows none (it
        // changed in between): there is nothing to ask about, so no call is made.
        let Some(state) = state else {
            return Asked {
                request: None,
                answer: None,
                result: Err(Failure::new(
                    FailureKind::NothingToShow,
                    "no completed turn to show the decision model: the session changed \
                     between the gate and the read; no call made",
                )),
            };
        };
        let request = ProbeRequest::new(self.settings.decision_model.clone(), state);
        let info = self.decision.info();
        let span = self.telemetry.start_probe(&ProbeStart {
            model: &info,
            request: &request,
            threshold: self.settings.threshold,
            completed_turns: input.completed_turns_since_compaction,
            prompt_tokens: input.coordinator_prompt_tokens.unwrap_or(0),
        });
        let answer = match within(
            self.clock.sleep(self.probe_deadline),
            self.decision.decide(&request),
        )
        .await
        {
            Some(Ok(answer)) => Ok(answer),
            Some(Err(e)) => Err(Failure::from_adapter("decision model failed", e)),
            None => Err(deadline_passed("decision model", self.probe_deadline)),
        };
        let result = match &answer {
            Ok(a) => Probability::new(a.probability)
                .map_err(|e| Failure::new(FailureKind::InvalidProbability, e.to_string())),
            Err(f) => Err(f.clone()),
        };
        let probability = result.as_ref().ok().copied();
        span.finish(&ProbeEnd {
            probability,
            verdict: probability.map_or(Verdict::Continue, |p| verdict(p, self.settings.threshold)),
            answer: answer.as_ref().ok(),
            failure: result.as_ref().err(),
        });
        Asked {
            request: Some(request),
            answer: answer.ok(),
            result,
        }
    }

    /// Shadow mode: probes as a real evaluation would (also at the backstop), records the
    /// decision through the store and compacts nothing.
    async fn shadow(
        &self,
        session: &Session,
        state: Option<DecisionState>,
        forced: bool,
        input: GateInput,
    ) -> Outcome {
        let asked = self.ask(state, input).await;
        let probability = asked.result.as_ref().ok().copied();
        let record = DecisionRecord {
            recorded_at: self.clock.now(),
            revision: session.revision,
            // Shadow mode never compacts, so the completed turns since the live compaction
            // are turn N (since the session's start, unless it was compacted before).
            turn: input.completed_turns_since_compaction,
            completed_turns_since_compaction: input.completed_turns_since_compaction,
            coordinator_prompt_tokens: input.coordinator_prompt_tokens,
            backstop: forced,
            threshold: self.settings.threshold,
            probability: probability.map(Probability::value),
            verdict: probability.map(|p| match verdict(p, self.settings.threshold) {
                Verdict::Compress => "COMPRESS".to_owned(),
                Verdict::Continue => "CONTINUE".to_owned(),
            }),
            model: self.decision.info().model,
            served_model: asked.answer.and_then(|a| a.served_model),
            state_hash: asked
                .request
                .as_ref()
                .map(|r| state_hash(&r.state))
                .unwrap_or_default(),
            failure: asked.result.as_ref().err().cloned(),
        };
        let stored = match self
            .store
            .record_decision(&session.key, record.clone())
            .await
        {
            Ok(()) => None,
            Err(e) => {
                let failure = Failure::from_store(e);
                tracing::warn!(
                    kind = failure.kind().label(),
                    failure = %scrub(failure.message()),
                    "shadow decision not recorded (fail-open)"
                );
                Some(failure)
            }
        };
        Outcome::Shadowed {
            decision: Box::new(record),
            not_recorded: stored,
        }
    }

    /// The session's turn number of the plan's first turn, when the store can count the
    /// turns before it; a store failure only costs the summary its turn pointers.
    async fn first_turn(&self, session: &Session, plan: &CompactionPlan) -> Option<usize> {
        let first = plan.slice.first()?;
        match self.store.turns_before(&session.key, first.timestamp).await {
            Ok(count) => count.map(|n| n + 1),
            Err(e) => {
                tracing::debug!(failure = %scrub(&e.to_string()), "turn numbers unknown");
                None
            }
        }
    }

    async fn compact(
        &self,
        session: &Session,
        plan: &CompactionPlan,
        forced: bool,
        probability: Option<Probability>,
    ) -> Outcome {
        let request = SummaryRequest::new(
            self.settings.summarizer_model.clone(),
            plan.summarizer_prompt(),
            plan.previous.as_ref().map(|p| p.summary.clone()),
            plan.new_turns_text(),
            plan.turns.clone(),
        )
        .with_first_turn(self.first_turn(session, plan).await);
        let info = self.summarizer.info();
        let span = self.telemetry.start_summarize(&SummarizeStart {
            model: &info,
            request: &request,
            range: (plan.start_timestamp, plan.end_timestamp),
            slice_turns: plan.slice_turn_count(),
            retained_turns: plan.retained_turns,
            forced,
        });
        let answer = within(
            self.clock.sleep(self.summarize_deadline),
            self.summarizer.summarize(&request),
        )
        .await;
        let summary = match answer {
            Some(Ok(s)) if !s.text.trim().is_empty() => s,
            Some(Ok(_)) => {
                let failure = Failure::new(
                    FailureKind::RejectedSummary,
                    "summarizer returned an empty summary",
                );
                return summarizer_failed(span, failure, forced, probability);
            }
            Some(Err(e)) => {
                let failure = Failure::from_adapter("summarizer failed", e);
                return summarizer_failed(span, failure, forced, probability);
            }
            None => {
                let failure = deadline_passed("summarizer", self.summarize_deadline);
                return summarizer_failed(span, failure, forced, probability);
            }
        };
        let mut metadata = Map::new();
        metadata.insert("forced".into(), Value::Bool(forced));
        metadata.insert("slice_turns".into(), json!(plan.slice_turn_count()));
        metadata.insert("retained_turns".into(), json!(plan.retained_turns));
        if let Some(p) = probability {
            metadata.insert("probability".into(), json!(p.value()));
        }
        if let Some(previous) = &plan.previous {
            metadata.insert("consolidates".into(), json!(previous.event_id));
        }
        if let Some(receipt) = &summary.receipt {
            metadata.insert(crate::receipt::RECEIPT_KEY.into(), receipt.to_value());
        }
        let event = plan.compaction_event(
            &summary.text,
            self.ids.next_id(),
            self.ids.next_id(),
            self.clock.now(),
            metadata,
        );
        match self
            .store
            .append(&session.key, session.revision, event.clone())
            .await
        {
            Ok(revision) => {
                span.finish(&SummarizeEnd {
                    summary: Some(&summary),
                    failure: None,
                });
                let compaction = Compaction {
                    event,
                    revision,
                    slice_turns: plan.slice_turn_count(),
                    probability,
                };
                if forced {
                    Outcome::Forced(compaction)
                } else {
                    Outcome::Compressed(compaction)
                }
            }
            Err(e) => {
                let stale = matches!(e, StoreError::Stale { .. });
                let failure = Failure::from_store(e);
                span.finish(&SummarizeEnd {
                    summary: Some(&summary),
                    failure: Some(&failure),
                });
                if stale {
                    tracing::info!(
                        failure = %scrub(failure.message()),
                        "compaction dropped: session moved on"
                    );
                    Outcome::StaleDropped {
                        failure,
                        probability,
                    }
                } else {
                    store_failed(failure)
                }
            }
        }
    }
}

/// One probe's request, answer and validated p.
struct Asked {
    request: Option<ProbeRequest>,
    answer: Option<crate::ports::DecisionAnswer>,
    result: Result<Probability, Failure>,
}

/// A stable hash of the decision state as sent (FNV-1a 64 over its JSON), in hex: shadow
/// records name the exact state without storing it.
pub fn state_hash(state: &crate::state::DecisionState) -> String {
    let json = serde_json::to_string(state).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in json.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn summarizer_failed(
    span: Box<dyn crate::ports::SummarizeSpan>,
    failure: Failure,
    forced: bool,
    probability: Option<Probability>,
) -> Outcome {
    tracing::warn!(
        kind = failure.kind().label(),
        failure = %scrub(failure.message()),
        "compaction summarizer failed; nothing written (fail-open)"
    );
    span.finish(&SummarizeEnd {
        summary: None,
        failure: Some(&failure),
    });
    Outcome::SummarizerFailed {
        failure,
        forced,
        probability,
    }
}

fn store_failure(error: StoreError) -> Outcome {
    store_failed(Failure::from_store(error))
}

fn store_failed(failure: Failure) -> Outcome {
    tracing::warn!(
        kind = failure.kind().label(),
        failure = %scrub(failure.message()),
        "compaction store failed; nothing written (fail-open)"
    );
    Outcome::StoreFailed { failure }
}

fn deadline_passed(what: &str, deadline: Duration) -> Failure {
    Failure::new(
        FailureKind::Timeout,
        format!(
            "{what} did not answer within the engine's deadline of {} ms",
            deadline.as_millis()
        ),
    )
}

/// Runs `call` until it completes or `deadline` does, whichever is first; `None` when the
/// deadline came first (the call is then dropped, so a hung adapter is cancelled).
async fn within<T>(deadline: crate::ports::Sleep, call: impl Future<Output = T>) -> Option<T> {
    let mut call = pin!(call);
    let mut deadline = deadline;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(value) = call.as_mut().poll(cx) {
            return Poll::Ready(Some(value));
        }
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::KEY_THRESHOLD;
    use crate::testing::{
        InMemoryStore, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
    };

    #[test]
    fn with_settings_is_the_same_engine_on_new_settings_and_leaves_the_old_one_alone() {
        let engine = Engine::builder(
            Arc::new(ScriptedDecisionModel::constant(0.5)),
            Arc::new(RecordingSummarizer::new()),
            Arc::new(InMemoryStore::new()),
            Arc::new(SteppingClock::starting_at(1_800_000_000)),
            Arc::new(SequentialIds::default()),
        )
        .shadow(true)
        .probe_deadline(Duration::from_secs(3))
        .build()
        .expect("defaults");
        let next = engine
            .with_settings(Settings {
                adaptive_compaction_threshold: 0.2,
                adaptive_compaction_min_turns: 1,
                ..Settings::default()
            })
            .expect("valid");
        assert_eq!(next.settings().threshold, 0.2);
        assert!(
            next.settings().clamp_warning.is_some(),
            "validated and clamped"
        );
        assert_eq!(engine.settings().threshold, 0.75);
        assert!(Arc::ptr_eq(&next.decision, &engine.decision));
        assert!(Arc::ptr_eq(&next.store, &engine.store));
        assert!(next.shadow && next.probe_deadline == Duration::from_secs(3));
        let err = engine
            .with_settings(Settings {
                adaptive_compaction_threshold: 1.5,
                ..Settings::default()
            })
            .expect_err("out of range");
        assert_eq!(err.key(), KEY_THRESHOLD);
    }
}
