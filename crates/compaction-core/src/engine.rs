//! The engine: one post-turn evaluation, driven through the ports (spec section 2).
//!
//! `evaluate_and_compact` runs the envelope gate on the store's snapshot, probes the decision
//! model (or skips it at the hard backstop), plans the slice, runs the rolling consolidation
//! summarizer and appends the compaction event with the revision it read. It never returns
//! an error: every failure becomes an [`Outcome`] that says what happened (fail-open).
//! A failure text it traces passes through [`scrub`] first: an exporter that ships log
//! events (a standard tracing-opentelemetry layer does) never receives a key-shaped token.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::context::live_compaction_index;
use crate::estimate::{CharsPerToken, TokenEstimator};
use crate::event::Event;
use crate::gate::{FastExitReason, GateDecision, GateInput, envelope_gate, gate_input};
use crate::history::{completed_turns, coordinator_view};
use crate::plan::{CompactionPlan, plan_compaction};
use crate::ports::{
    Clock, DecisionModel, IdGenerator, NoTelemetry, ProbeEnd, ProbeStart, SessionStore, StoreError,
    SummarizeEnd, SummarizeStart, Summarizer, SummaryRequest, Telemetry,
};
use crate::probe::{Probability, ProbeRequest, Verdict, verdict};
use crate::scrub::scrub;
use crate::session::{Revision, Session, SessionKey};
use crate::settings::{EffectiveSettings, Settings, SettingsError};
use crate::state::{DEFAULT_STATE_BUDGET_TOKENS, extract_decision_state};

/// Why the engine kept the raw context after probing.
#[derive(Debug, Clone, PartialEq)]
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
        failure: String,
    },
}

/// A compaction the engine appended.
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
#[must_use]
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
        failure: String,
        /// p, when the decision model was asked.
        probability: Option<Probability>,
    },
    /// The summarizer failed: nothing written.
    SummarizerFailed {
        /// What went wrong.
        failure: String,
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
        failure: String,
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
        }
    }

    /// p, when the decision model answered.
    pub fn probability(&self) -> Option<Probability> {
        match self {
            Outcome::Continue(ContinueReason::BelowThreshold { probability, .. }) => {
                Some(*probability)
            }
            Outcome::Compressed(c) | Outcome::Forced(c) => c.probability,
            Outcome::StaleDropped { probability, .. }
            | Outcome::SummarizerFailed { probability, .. } => *probability,
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
}

impl EngineBuilder {
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
        }
    }

    /// The effective settings.
    pub fn settings(&self) -> &EffectiveSettings {
        &self.settings
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
        if let GateDecision::FastExit(reason) = gate {
            return Outcome::FastExit(reason);
        }
        let session = match self.store.load_live_tail(key).await {
            Ok(s) => s,
            Err(e) => return store_failure(e),
        };
        self.evaluate_open_gate(&session, gate, snapshot.input)
            .await
    }

    /// One post-turn evaluation of a session the caller already loaded (its whole history);
    /// appends through the store with `session.revision` as the expected revision.
    pub async fn evaluate_session(&self, session: &Session) -> Outcome {
        let input = gate_input(&session.events);
        let gate = self.gate(input);
        self.evaluate_open_gate(session, gate, input).await
    }

    /// Everything after the gate: the probe (skipped at the hard backstop), the plan, the
    /// summary and the append.
    async fn evaluate_open_gate(
        &self,
        session: &Session,
        gate: GateDecision,
        input: GateInput,
    ) -> Outcome {
        let forced = match gate {
            GateDecision::FastExit(reason) => return Outcome::FastExit(reason),
            GateDecision::ForceCompress => true,
            GateDecision::Probe => false,
        };
        let probability = if forced {
            None
        } else {
            match self.probe(session, input).await {
                Ok(p) => Some(p),
                Err(reason) => return Outcome::Continue(reason),
            }
        };
        let Some(plan) = plan_compaction(&session.events, self.settings.retention_turns) else {
            return Outcome::NothingToCompact;
        };
        self.compact(session, &plan, forced, probability).await
    }

    /// Runs the probe; `Ok(p)` means COMPRESS.
    async fn probe(
        &self,
        session: &Session,
        input: GateInput,
    ) -> Result<Probability, ContinueReason> {
        // Turns the live summary already covers are folded: the probe reads the rest.
        let view = coordinator_view(&session.events);
        let summarized_until = live_compaction_index(&view)
            .and_then(|i| view[i].compaction())
            .map(|c| c.end_timestamp);
        let turns: Vec<_> = completed_turns(&view)
            .into_iter()
            .filter(|t| summarized_until.is_none_or(|end| t.first_timestamp() > end))
            .collect();
        // The gate counted completed turns, but the session read after it shows none (it changed
        // in between): there is nothing to ask about, so no call is made and the engine fails open.
        let Some(state) = extract_decision_state(
            &turns,
            &session.state,
            self.estimator.as_ref(),
            self.state_budget_tokens,
        ) else {
            return Err(ContinueReason::ProbeFailed {
                failure: "no completed turn to show the decision model: the session changed \
                          between the gate and the read; no call made"
                    .to_owned(),
            });
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
        let answer = self.decision.decide(&request).await;
        let checked = match &answer {
            Ok(a) => Probability::new(a.probability).map_err(|e| e.to_string()),
            Err(e) => Err(format!("decision model failed: {e}")),
        };
        let (probability, failure) = match checked {
            Ok(p) => (Some(p), None),
            Err(f) => (None, Some(f)),
        };
        let v = probability.map_or(Verdict::Continue, |p| verdict(p, self.settings.threshold));
        span.finish(&ProbeEnd {
            probability,
            verdict: v,
            answer: answer.as_ref().ok(),
            failure: failure.as_deref(),
        });
        match (probability, failure) {
            (Some(p), _) if v == Verdict::Compress => Ok(p),
            (Some(p), _) => Err(ContinueReason::BelowThreshold {
                probability: p,
                threshold: self.settings.threshold,
            }),
            (None, failure) => {
                let failure = failure.unwrap_or_default();
                tracing::warn!(failure = %scrub(&failure), "compaction probe failed; continuing (fail-open)");
                Err(ContinueReason::ProbeFailed { failure })
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
        let request = SummaryRequest {
            model: self.settings.summarizer_model.clone(),
            prompt: plan.summarizer_prompt(),
            previous_summary: plan.previous.as_ref().map(|p| p.summary.clone()),
            new_turns_text: plan.new_turns_text(),
            turns: plan.turns.clone(),
        };
        let info = self.summarizer.info();
        let span = self.telemetry.start_summarize(&SummarizeStart {
            model: &info,
            request: &request,
            range: (plan.start_timestamp, plan.end_timestamp),
            slice_turns: plan.slice_turn_count(),
            retained_turns: plan.retained_turns,
            forced,
        });
        let summary = match self.summarizer.summarize(&request).await {
            Ok(s) if !s.text.trim().is_empty() => s,
            Ok(_) => {
                return summarizer_failed(
                    span,
                    "summarizer returned an empty summary".into(),
                    forced,
                    probability,
                );
            }
            Err(e) => {
                return summarizer_failed(
                    span,
                    format!("summarizer failed: {e}"),
                    forced,
                    probability,
                );
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
                let failure = e.to_string();
                span.finish(&SummarizeEnd {
                    summary: Some(&summary),
                    failure: Some(&failure),
                });
                match e {
                    StoreError::Stale { .. } => {
                        tracing::info!(failure = %scrub(&failure), "compaction dropped: session moved on");
                        Outcome::StaleDropped {
                            failure,
                            probability,
                        }
                    }
                    other => store_failure(other),
                }
            }
        }
    }
}

fn summarizer_failed(
    span: Box<dyn crate::ports::SummarizeSpan>,
    failure: String,
    forced: bool,
    probability: Option<Probability>,
) -> Outcome {
    tracing::warn!(
        failure = %scrub(&failure),
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
    let failure = error.to_string();
    tracing::warn!(failure = %scrub(&failure), "compaction store failed; nothing written (fail-open)");
    Outcome::StoreFailed { failure }
}
