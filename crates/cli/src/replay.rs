//! Replays a transcript through the real engine, one post-turn evaluation per turn.
//!
//! # Prompt tokens
//! For each turn the replay reports the coordinator's prompt tokens *without* compaction and
//! *with* it:
//! - *without*: the transcript's `prompt_tokens`; when absent, the previous turn's *without*
//!   (or [`PROMPT_OVERHEAD_TOKENS`] for the first turn) plus this turn's estimated tokens
//!   (compaction-core's default estimator, `CharsPerToken`: one token per four characters of
//!   each event's rendered text). A transcript that gives no figures thus starts at the
//!   overhead and adds every turn's estimate; one that gives some continues from the last
//!   reported figure.
//! - what a turn *costs* the prompt: the growth of `prompt_tokens` from that turn to the next
//!   when both report it, otherwise the turn's estimate;
//! - *with*: *without*, minus the costs of the turns the live summary covers, plus the
//!   summary's estimated tokens.
//!
//! The figure *with* compaction is what the coordinator of a compacting deployment would
//! report, so it is the usage recorded on the turn's answer and what the envelope gate reads.

use std::sync::Arc;

use compaction_core::RESEARCH_TURN_HISTORY;
use compaction_core::render_event_body;
use compaction_core::{
    CharsPerToken, Clock, Engine, Event, EventBuilder, IdGenerator, Outcome, Revision,
    ScriptedTool, ScriptedTurn, SessionKey, SessionStore, TokenEstimator,
};
use serde::Serialize;
use serde_json::{Map, Value, json};
use telemetry::TelemetryConfig;
use tracing::Instrument as _;

use crate::transcript::TranscriptTurn;

/// Estimated tokens of the coordinator's system prompt and tool schemas.
pub const PROMPT_OVERHEAD_TOKENS: u64 = 2_000;

/// The name of the coordinator agent in replayed events.
const COORDINATOR: &str = "coordinator";

/// What happened after one turn.
#[derive(Debug, Clone, Serialize)]
pub struct TurnRecord {
    /// 1-based turn number.
    pub turn: usize,
    /// Completed turns since the live compaction, as the gate counted them.
    pub completed_turns: usize,
    /// Coordinator prompt tokens without compaction.
    pub prompt_tokens_without: u64,
    /// Coordinator prompt tokens with compaction.
    pub prompt_tokens_with: u64,
    /// `exit`, `probe` or `backstop`.
    pub gate: String,
    /// p, when the decision model answered.
    pub probability: Option<f64>,
    /// `COMPRESS`, `CONTINUE` or `-` on a fast exit.
    pub verdict: String,
    /// The engine's outcome label.
    pub outcome: String,
    /// Why: the fast-exit reason, the failure, or the compaction's range.
    pub detail: String,
}

/// The prompt figures *without* compaction, turn by turn, and what each turn costs the prompt
/// (see the module docs).
#[derive(Debug, Default, Clone, PartialEq)]
struct PromptLedger {
    /// The settled costs of the turns, summed: entry `i` is what the first `i + 1` turns cost
    /// (prefix sums, so that the cost of the first `n` turns is one lookup).
    costs: Vec<u64>,
    /// The estimate of the latest turn when it reported `prompt_tokens`: its cost is the growth
    /// to the next turn's figure if that one reports too, otherwise this estimate.
    pending: Option<u64>,
    /// The latest turn's figure without compaction.
    latest: Option<u64>,
}

impl PromptLedger {
    /// Records a turn that reported `reported` prompt tokens (or none) and whose events are
    /// `estimated` tokens; returns its figure without compaction.
    fn record(&mut self, reported: Option<u64>, estimated: u64) -> u64 {
        let without = match reported {
            Some(reported) => {
                // The growth since the previous reported figure is what that turn cost.
                if self.pending.take().is_some()
                    && let Some(previous) = self.latest
                {
                    self.settle(reported.saturating_sub(previous));
                }
                self.pending = Some(estimated);
                reported
            }
            None => {
                if let Some(pending) = self.pending.take() {
                    self.settle(pending);
                }
                self.settle(estimated);
                self.latest
                    .unwrap_or(PROMPT_OVERHEAD_TOKENS)
                    .saturating_add(estimated)
            }
        };
        self.latest = Some(without);
        without
    }

    /// Settles the next turn's cost.
    fn settle(&mut self, cost: u64) {
        let total = self.costs.last().copied().unwrap_or(0).saturating_add(cost);
        self.costs.push(total);
    }

    /// What the first `turns` turns cost the prompt (the latest turn's estimate standing in
    /// for its cost while that is not settled). One lookup, whatever `turns` is.
    fn cost_of_first(&self, turns: usize) -> u64 {
        let settled = turns.min(self.costs.len());
        let sum = settled.checked_sub(1).map_or(0, |last| self.costs[last]);
        match self.pending {
            Some(pending) if turns > settled => sum.saturating_add(pending),
            _ => sum,
        }
    }

    /// The latest turn's figure without compaction.
    fn latest(&self) -> Option<u64> {
        self.latest
    }
}

/// Drives a transcript through the engine.
pub struct Replay<S: SessionStore + ?Sized> {
    engine: Engine,
    store: Arc<S>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    key: SessionKey,
    revision: Revision,
    /// `RESEARCH_TURN_HISTORY` entries with the index of their turn, oldest first: only the
    /// turns the live summary does not cover yet (the decision state reads no others).
    research: Vec<(usize, Value)>,
    /// The prompt figures without compaction and what each turn costs.
    ledger: PromptLedger,
    /// The timestamp of each turn's last event, oldest first (increasing: the clock is
    /// monotonic), so the turns a summary covers are found by binary search.
    turn_last_timestamps: Vec<compaction_core::Timestamp>,
    /// The live compaction, as this replay appended it: the replay is the session's only
    /// writer and never rewinds, so it need not read the context back after every turn.
    live: Option<compaction_core::EventCompaction>,
    turns: usize,
    /// What each turn's span records (`telemetry::turn_span`).
    span_config: TelemetryConfig,
}

/// How many of the latest turns' `RESEARCH_TURN_HISTORY` entries the replay keeps in the
/// session state. The decision state shows at most
/// [`compaction_core::DEFAULT_STATE_BUDGET_TOKENS`] (500) tokens of recent turns, and a
/// rendered turn is never under six tokens, so no probe reads further back than about 85
/// turns; older entries only made each research turn's `state_delta` (and so the replay)
/// grow with the session.
pub const RESEARCH_WINDOW_TURNS: usize = 96;

/// A replay failure that stops the run (the store could not be read or written), with the
/// store's failure as its [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ReplayError {
    message: String,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl ReplayError {
    /// `source`, shown as `message`.
    fn new(message: String, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        ReplayError {
            message,
            source: Box::new(source),
        }
    }

    /// The store's error, shown as itself.
    fn store(error: compaction_core::StoreError) -> Self {
        ReplayError::new(error.to_string(), error)
    }
}

impl<S: SessionStore + ?Sized> Replay<S> {
    /// Creates the session and prepares to replay.
    pub async fn start(
        engine: Engine,
        store: Arc<S>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        key: SessionKey,
    ) -> Result<Self, ReplayError> {
        let revision = store
            .create_session(&key, Map::new())
            .await
            .map_err(ReplayError::store)?
            .revision;
        Ok(Replay {
            engine,
            store,
            clock,
            ids,
            key,
            revision,
            research: Vec::new(),
            ledger: PromptLedger::default(),
            turn_last_timestamps: Vec::new(),
            live: None,
            turns: 0,
            span_config: TelemetryConfig::default(),
        })
    }

    /// Records each turn's span as `config` says (hidden inputs and outputs); the default
    /// records both, scrubbed.
    pub fn with_span_config(mut self, config: TelemetryConfig) -> Self {
        self.span_config = config;
        self
    }

    /// Tokens the estimator gives an event.
    fn estimate(event: &Event) -> u64 {
        CharsPerToken.estimate(&render_event_body(event)) as u64
    }

    /// Appends one turn's events, then runs the post-turn evaluation.
    pub async fn turn(&mut self, turn: &TranscriptTurn) -> Result<TurnRecord, ReplayError> {
        self.turns += 1;
        let n = self.turns;
        let invocation = format!("inv-{n:04}-{}", self.ids.next_id());
        let covered = self.live_coverage().await?;
        // The decision state reads research findings only for turns after the live summary:
        // older entries are dropped so that the state (written whole in each research turn's
        // `state_delta`, as ADK does) stays as small as the live tail.
        let covered_turns = covered.map_or(0, |c| c.turns);
        let window_start = (n - 1).saturating_sub(RESEARCH_WINDOW_TURNS - 1);
        let keep_from = covered_turns.max(window_start);
        let stale = self
            .research
            .partition_point(|(index, _)| *index < keep_from);
        self.research.drain(..stale);
        let mut events = self.turn_events(turn, &invocation);
        let estimated: u64 = events
            .iter()
            .filter(|e| e.is_unscoped())
            .map(Self::estimate)
            .sum();
        let without = self.ledger.record(turn.prompt_tokens, estimated);
        let with = self.with_compaction(without, covered);
        if let Some(answer) = events.last_mut() {
            let usage = answer.usage_metadata.get_or_insert_with(Default::default);
            usage.prompt_token_count = Some(with);
            usage.candidates_token_count = turn.completion_tokens;
        }
        if let Some(last) = events.last() {
            self.turn_last_timestamps.push(last.timestamp);
        }
        for event in events {
            self.revision = self
                .store
                .append(&self.key, self.revision, event)
                .await
                .map_err(ReplayError::store)?;
        }
        let snapshot = self
            .store
            .gate_snapshot(&self.key)
            .await
            .map_err(ReplayError::store)?
            .input;
        // OpenInference's turn span (CHAIN, session.id, user.id, the user's message in, the
        // record out), so that Phoenix lists the turn and nests both compaction spans under it.
        let span = telemetry::turn_span(&self.span_config, &self.key, n as u64, &turn.user);
        let outcome = self
            .engine
            .evaluate_and_compact(&self.key)
            .instrument(span.clone())
            .await;
        if let Some(c) = outcome.compaction() {
            self.revision = c.revision;
            if let Some(compaction) = c.event.compaction() {
                self.live = Some(compaction.clone());
            }
        }
        // The model failures fail open; a store that cannot be read or written stops the run.
        if let Outcome::StoreFailed { failure } = &outcome {
            return Err(ReplayError::new(
                format!("turn {n}: {failure}"),
                failure.clone(),
            ));
        }
        let record = record(
            n,
            snapshot.completed_turns_since_compaction,
            without,
            with,
            &outcome,
        );
        if let Ok(output) = serde_json::to_string(&record) {
            telemetry::record_turn_output(&self.span_config, &span, &output);
        }
        Ok(record)
    }

    /// What the live summary stands in for: how many of the replayed turns it covers and its
    /// estimated tokens; `None` before the first compaction.
    async fn live_coverage(&self) -> Result<Option<Coverage>, ReplayError> {
        Ok(self.live.as_ref().map(|compaction| {
            let ts = &self.turn_last_timestamps;
            let first = ts.partition_point(|t| *t < compaction.start_timestamp);
            let past = ts.partition_point(|t| *t <= compaction.end_timestamp);
            Coverage {
                turns: past.saturating_sub(first),
                summary_tokens: CharsPerToken.estimate(&compaction.summary_text()) as u64,
            }
        }))
    }

    /// The prompt of a turn whose uncompacted prompt is `without` tokens, once the live
    /// summary stands in for the turns it covers: minus those turns' costs, plus the summary.
    fn with_compaction(&self, without: u64, coverage: Option<Coverage>) -> u64 {
        let Some(coverage) = coverage else {
            return without;
        };
        let covered = self.ledger.cost_of_first(coverage.turns);
        without
            .saturating_sub(covered)
            .saturating_add(coverage.summary_tokens)
    }

    /// Prompt tokens the next turn would start from: (without, with) compaction.
    pub async fn next_prompt_tokens(&self) -> Result<(u64, u64), ReplayError> {
        let without = self.ledger.latest().unwrap_or(0);
        let coverage = self.live_coverage().await?;
        Ok((without, self.with_compaction(without, coverage)))
    }

    /// The events of one transcript turn, timestamps from the clock (the core's
    /// [`EventBuilder::turn`]); a research turn's answer records the findings of the turns the
    /// live summary does not cover yet in `RESEARCH_TURN_HISTORY`.
    fn turn_events(&mut self, turn: &TranscriptTurn, invocation: &str) -> Vec<Event> {
        let state_delta = turn.findings_summary.as_ref().map(|findings| {
            self.research.push((
                self.turns - 1,
                json!({
                    "invocation_id": invocation,
                    "conclude_output": { "findings_summary": findings },
                }),
            ));
            let history: Vec<&Value> = self.research.iter().map(|(_, entry)| entry).collect();
            json!({ RESEARCH_TURN_HISTORY: history })
        });
        let script = ScriptedTurn {
            user: turn.user.clone(),
            tools: turn
                .tools
                .iter()
                .map(|tool| ScriptedTool {
                    call_id: None,
                    name: tool.name.clone(),
                    args: tool.args.clone(),
                    result: tool.result.clone(),
                })
                .collect(),
            pipeline: turn
                .pipeline
                .iter()
                .map(|step| (String::new(), step.clone()))
                .collect(),
            answer: turn.assistant.clone(),
            state_delta,
        };
        EventBuilder::new(&*self.clock, &*self.ids, COORDINATOR).turn(invocation, &script)
    }
}

/// What the live summary stands in for.
#[derive(Debug, Clone, Copy)]
struct Coverage {
    /// Replayed turns it covers (the oldest ones).
    turns: usize,
    /// Its estimated tokens.
    summary_tokens: u64,
}

fn record(turn: usize, completed: usize, without: u64, with: u64, outcome: &Outcome) -> TurnRecord {
    let OutcomeSummary {
        gate,
        verdict,
        detail,
    } = OutcomeSummary::of(outcome);
    TurnRecord {
        turn,
        completed_turns: completed,
        prompt_tokens_without: without,
        prompt_tokens_with: with,
        gate: gate.to_owned(),
        probability: outcome.probability().map(|p| p.value()),
        verdict: verdict.to_owned(),
        outcome: outcome.label().to_owned(),
        detail,
    }
}

/// An outcome as a person reads it: which gate path ran, the verdict and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeSummary {
    /// `exit`, `probe`, `backstop` or `-` (the store failed).
    pub gate: &'static str,
    /// `COMPRESS`, `CONTINUE` or `-` on a fast exit.
    pub verdict: &'static str,
    /// Why: the fast-exit reason, the failure, or what was folded.
    pub detail: String,
}

impl OutcomeSummary {
    /// Summarizes `outcome` in the core's words ([`Outcome::gate_label`],
    /// [`Outcome::verdict_label`], [`Outcome::detail`]).
    pub fn of(outcome: &Outcome) -> Self {
        OutcomeSummary {
            gate: outcome.gate_label(),
            verdict: outcome.verdict_label(),
            detail: outcome.detail(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(turns: &[(Option<u64>, u64)]) -> (PromptLedger, Vec<u64>) {
        let mut ledger = PromptLedger::default();
        let figures = turns.iter().map(|&(r, e)| ledger.record(r, e)).collect();
        (ledger, figures)
    }

    #[test]
    fn estimates_alone_add_every_turn_to_the_overhead() {
        let (l, figures) = ledger(&[(None, 100), (None, 50), (None, 25)]);
        assert_eq!(figures, [2_100, 2_150, 2_175]);
        assert_eq!(l.cost_of_first(2), 150);
        assert_eq!(l.cost_of_first(9), 175);
    }

    #[test]
    fn reported_figures_cost_each_turn_its_growth_to_the_next() {
        let (l, figures) = ledger(&[(Some(40_000), 100), (Some(43_000), 50), (Some(47_500), 25)]);
        assert_eq!(figures, [40_000, 43_000, 47_500]);
        assert_eq!(l.cost_of_first(2), 3_000 + 4_500);
        // The latest turn's growth is not known yet: its estimate stands in.
        assert_eq!(l.cost_of_first(3), 3_000 + 4_500 + 25);
    }

    /// A turn without figures continues from the last reported one instead of falling back to
    /// a sum of estimates, and every turn's cost is counted once, in order.
    #[test]
    fn mixed_transcripts_stay_in_step() {
        let (l, figures) = ledger(&[(Some(41_000), 100), (None, 60), (Some(45_000), 70)]);
        assert_eq!(figures, [41_000, 41_060, 45_000]);
        // Turn 1 reported, turn 2 did not: turn 1 costs its estimate; turn 2 its estimate
        // (`costs` holds their running sums).
        assert_eq!(l.costs, [100, 100 + 60]);
        assert_eq!(l.cost_of_first(3), 100 + 60 + 70);
        let (l, figures) = ledger(&[(None, 100), (Some(30_000), 60), (Some(31_000), 70)]);
        assert_eq!(figures, [2_100, 30_000, 31_000]);
        assert_eq!(l.costs, [100, 100 + 1_000]);
    }

    #[test]
    fn huge_figures_saturate_instead_of_overflowing() {
        let (l, figures) = ledger(&[(Some(u64::MAX), u64::MAX), (None, u64::MAX)]);
        assert_eq!(figures, [u64::MAX, u64::MAX]);
        assert_eq!(l.cost_of_first(2), u64::MAX);
    }
}
