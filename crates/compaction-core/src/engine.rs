//! The engine: one post-turn evaluation, driven through the ports (spec section 2).
//!
//! `evaluate_and_compact` runs the envelope gate on the store's snapshot, probes the decision
//! model (or skips it at the hard backstop), plans the slice, runs the rolling consolidation
//! summarizer and appends the compaction event with the revision it read. It never returns
//! an error: every failure becomes an [`Outcome`] that says what happened (fail-open).
//! A failure text it traces passes through [`scrub`] first: an exporter that ships log
//! events (a standard tracing-opentelemetry layer does) never receives a key-shaped token.

//!
//! Its steps live beside it: `build` (the builder), `ask` (the probe and shadow mode) and
//! `compact` (the summary and the append); what it returns is [`crate::outcome`].

mod ask;
mod build;
mod compact;

use std::sync::Arc;
use std::time::Duration;

use crate::context::live_compaction_index;
use crate::estimate::TokenEstimator;
use crate::gate::{FastExitReason, GateDecision, GateInput, envelope_gate, gate_input};
use crate::history::coordinator_view;
use crate::plan::plan_compaction;
use crate::ports::{
    Clock, DecisionModel, IdGenerator, SessionStore, StoreError, Summarizer, TailWindow, Telemetry,
};
use crate::probe::Probability;
use crate::session::{Session, SessionKey};
use crate::settings::{EffectiveSettings, Settings, SettingsError};
use crate::state::{
    DecisionState, NeedMore, extract_decision_state_from_view, extract_decision_state_from_window,
};

pub use self::build::EngineBuilder;
use self::compact::store_failure;
pub use crate::outcome::{Compaction, ContinueReason, Outcome};

/// The probe's deadline when the host sets none: the spec's 10 s (section 5.1).
pub const DEFAULT_PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// The summarizer's deadline when the host sets none.
pub const DEFAULT_SUMMARIZE_DEADLINE: Duration = Duration::from_secs(120);

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

impl Engine {
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
