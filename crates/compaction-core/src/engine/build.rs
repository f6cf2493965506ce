//! [`EngineBuilder`]: the engine's ports, settings, deadlines and modes, validated once.

use std::sync::Arc;
use std::time::Duration;

use super::{DEFAULT_PROBE_DEADLINE, DEFAULT_SUMMARIZE_DEADLINE, Engine};
use crate::estimate::{CharsPerToken, TokenEstimator};
use crate::ports::{
    Clock, DecisionModel, IdGenerator, NoTelemetry, SessionStore, Summarizer, Telemetry,
};
use crate::settings::{Settings, SettingsError};
use crate::state::DEFAULT_STATE_BUDGET_TOKENS;

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
    /// ([`crate::Outcome::Shadowed`]). For calibrating τ on real traffic before trusting it.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// Sets the probe's deadline (default [`DEFAULT_PROBE_DEADLINE`], the spec's 10 s): a
    /// probe that has not answered by then fails open ([`crate::FailureKind::Timeout`]).
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
}
