//! Replays a transcript through the real engine, one post-turn evaluation per turn.
//!
//! # Prompt tokens
//! For each turn the replay reports the coordinator's prompt tokens *without* compaction and
//! *with* it:
//! - *without*: the transcript's `prompt_tokens`; when absent, [`PROMPT_OVERHEAD_TOKENS`] plus
//!   the estimated tokens of every turn so far (compaction-core's default estimator,
//!   `CharsPerToken`: one token per four characters of each event's rendered text).
//! - what a turn *costs* the prompt: the growth of `prompt_tokens` from that turn to the next
//!   (or its estimate when the transcript gives no figures);
//! - *with*: *without*, minus the costs of the turns the live summary covers, plus the
//!   summary's estimated tokens.
//!
//! The figure *with* compaction is what the coordinator of a compacting deployment would
//! report, so it is the usage recorded on the turn's answer and what the envelope gate reads.

use std::sync::Arc;

use compaction_core::plan::render_event_body;
use compaction_core::state::RESEARCH_TURN_HISTORY;
use compaction_core::{
    AssembledContext, CharsPerToken, Clock, Content, ContinueReason, Engine, Event, FunctionCall,
    FunctionResponse, IdGenerator, Outcome, Part, Revision, SessionKey, SessionStore,
    TokenEstimator,
};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use crate::transcript::TranscriptTurn;

/// Estimated tokens of the coordinator's system prompt and tool schemas.
pub const PROMPT_OVERHEAD_TOKENS: u64 = 2_000;

/// The name of the coordinator agent in replayed events.
const COORDINATOR: &str = "coordinator";

/// A store the replay can create sessions in and read contexts from.
#[async_trait::async_trait]
pub trait ReplayStore: SessionStore {
    /// Creates an empty session with `state`.
    async fn create(&self, key: &SessionKey, state: Map<String, Value>)
    -> Result<Revision, String>;
    /// The assembled context of the next turn.
    async fn context(&self, key: &SessionKey) -> Result<AssembledContext, String>;
}

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

/// Drives a transcript through the engine.
pub struct Replay<S: ReplayStore> {
    engine: Engine,
    store: Arc<S>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    key: SessionKey,
    revision: Revision,
    /// `RESEARCH_TURN_HISTORY` entries with the index of their turn, oldest first: only the
    /// turns the live summary does not cover yet (the decision state reads no others).
    research: Vec<(usize, Value)>,
    /// What each turn costs the coordinator's prompt, oldest first.
    turn_costs: Vec<u64>,
    /// The timestamp of each turn's last event, oldest first.
    turn_last_timestamps: Vec<compaction_core::Timestamp>,
    previous_without: Option<u64>,
    turns: usize,
}

/// A replay failure that stops the run (the store could not be written).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReplayError(pub String);

impl<S: ReplayStore> Replay<S> {
    /// Creates the session and prepares to replay.
    pub async fn start(
        engine: Engine,
        store: Arc<S>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        key: SessionKey,
    ) -> Result<Self, ReplayError> {
        let revision = store.create(&key, Map::new()).await.map_err(ReplayError)?;
        Ok(Replay {
            engine,
            store,
            clock,
            ids,
            key,
            revision,
            research: Vec::new(),
            turn_costs: Vec::new(),
            turn_last_timestamps: Vec::new(),
            previous_without: None,
            turns: 0,
        })
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
        self.research.retain(|(index, _)| *index >= covered_turns);
        let mut events = self.turn_events(turn, &invocation);
        let estimated: u64 = events
            .iter()
            .filter(|e| e.is_unscoped())
            .map(Self::estimate)
            .sum();
        let without = match turn.prompt_tokens {
            Some(reported) => {
                // The growth since the previous turn is what the previous turn cost the prompt.
                if let Some(previous) = self.previous_without {
                    self.turn_costs.push(reported.saturating_sub(previous));
                }
                reported
            }
            None => {
                self.turn_costs.push(estimated);
                PROMPT_OVERHEAD_TOKENS + self.turn_costs.iter().sum::<u64>()
            }
        };
        self.previous_without = Some(without);
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
                .map_err(|e| ReplayError(e.to_string()))?;
        }
        let snapshot = self
            .store
            .gate_snapshot(&self.key)
            .await
            .map_err(|e| ReplayError(e.to_string()))?
            .input;
        let span = tracing::info_span!("turn", turn = n, session = %self.key);
        let outcome = self
            .engine
            .evaluate_and_compact(&self.key)
            .instrument(span)
            .await;
        if let Some(c) = outcome.compaction() {
            self.revision = c.revision;
        }
        Ok(record(
            n,
            snapshot.completed_turns_since_compaction,
            without,
            with,
            &outcome,
        ))
    }

    /// What the live summary stands in for: how many of the replayed turns it covers and its
    /// estimated tokens; `None` before the first compaction.
    async fn live_coverage(&self) -> Result<Option<Coverage>, ReplayError> {
        let context = self.store.context(&self.key).await.map_err(ReplayError)?;
        Ok(context.summary().map(|summary| Coverage {
            turns: self
                .turn_last_timestamps
                .iter()
                .filter(|ts| summary.compaction.covers(**ts))
                .count(),
            summary_tokens: CharsPerToken.estimate(&summary.compaction.summary_text()) as u64,
        }))
    }

    /// The prompt of a turn whose uncompacted prompt is `without` tokens, once the live
    /// summary stands in for the turns it covers: minus those turns' costs, plus the summary.
    fn with_compaction(&self, without: u64, coverage: Option<Coverage>) -> u64 {
        let Some(coverage) = coverage else {
            return without;
        };
        let covered: u64 = self.turn_costs.iter().take(coverage.turns).sum();
        without.saturating_sub(covered) + coverage.summary_tokens
    }

    /// Prompt tokens the next turn would start from: (without, with) compaction.
    pub async fn next_prompt_tokens(&self) -> Result<(u64, u64), ReplayError> {
        let without = self.previous_without.unwrap_or(0);
        let coverage = self.live_coverage().await?;
        Ok((without, self.with_compaction(without, coverage)))
    }

    /// The events of one transcript turn, timestamps from the clock.
    fn turn_events(&mut self, turn: &TranscriptTurn, invocation: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let next = |author: &str, content: Content| {
            Event::new(self.ids.next_id(), invocation, author, self.clock.now())
                .with_content(content)
        };
        events.push(next("user", Content::user_text(&turn.user)));
        for (i, tool) in turn.tools.iter().enumerate() {
            let call_id = format!("fc-{invocation}-{i}");
            events.push(next(
                COORDINATOR,
                Content {
                    role: Some("model".into()),
                    parts: vec![Part {
                        function_call: Some(FunctionCall {
                            id: Some(call_id.clone()),
                            name: tool.name.clone(),
                            args: tool.args.clone(),
                        }),
                        ..Part::default()
                    }],
                },
            ));
            if i == 0 {
                for step in &turn.pipeline {
                    let author = "search_pipeline_agent";
                    events.push(
                        next(author, Content::model_text(step))
                            .with_scope(format!("search_pipeline:{call_id}")),
                    );
                }
            }
            events.push(next(
                "user",
                Content {
                    role: Some("user".into()),
                    parts: vec![Part {
                        function_response: Some(FunctionResponse {
                            id: Some(call_id),
                            name: tool.name.clone(),
                            response: Some(json!({ "result": tool.result })),
                        }),
                        ..Part::default()
                    }],
                },
            ));
        }
        if turn.tools.is_empty() {
            for step in &turn.pipeline {
                events.push(
                    next("search_pipeline_agent", Content::model_text(step))
                        .with_scope(format!("search_pipeline:{invocation}")),
                );
            }
        }
        let mut answer = next(COORDINATOR, Content::model_text(&turn.assistant));
        if let Some(findings) = &turn.findings_summary {
            self.research.push((
                self.turns - 1,
                json!({
                    "invocation_id": invocation,
                    "conclude_output": { "findings_summary": findings },
                }),
            ));
            let history: Vec<&Value> = self.research.iter().map(|(_, entry)| entry).collect();
            answer.actions.extra.insert(
                "state_delta".into(),
                json!({ RESEARCH_TURN_HISTORY: history }),
            );
        }
        events.push(answer);
        events
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
    let p = outcome.probability().map(|p| p.value());
    let (gate, verdict, detail) = match outcome {
        Outcome::FastExit(reason) => ("exit", "-".to_owned(), reason.to_string()),
        Outcome::Continue(ContinueReason::BelowThreshold { threshold, .. }) => (
            "probe",
            "CONTINUE".to_owned(),
            format!("p < τ = {threshold}"),
        ),
        Outcome::Continue(ContinueReason::ProbeFailed { failure }) => (
            "probe",
            "CONTINUE".to_owned(),
            format!("fail-open: {failure}"),
        ),
        Outcome::Compressed(c) => ("probe", "COMPRESS".to_owned(), compaction_detail(c)),
        Outcome::Forced(c) => ("backstop", "COMPRESS".to_owned(), compaction_detail(c)),
        Outcome::StaleDropped { failure, .. } => (
            "probe",
            "COMPRESS".to_owned(),
            format!("dropped: {failure}"),
        ),
        Outcome::SummarizerFailed {
            failure, forced, ..
        } => (
            if *forced { "backstop" } else { "probe" },
            "COMPRESS".to_owned(),
            format!("nothing written: {failure}"),
        ),
        Outcome::NothingToCompact => (
            "probe",
            "COMPRESS".to_owned(),
            "nothing new to fold".to_owned(),
        ),
        Outcome::StoreFailed { failure } => {
            ("-", "-".to_owned(), format!("store failed: {failure}"))
        }
    };
    TurnRecord {
        turn,
        completed_turns: completed,
        prompt_tokens_without: without,
        prompt_tokens_with: with,
        gate: gate.to_owned(),
        probability: p,
        verdict,
        outcome: outcome.label().to_owned(),
        detail,
    }
}

fn compaction_detail(c: &compaction_core::Compaction) -> String {
    format!("folded {} turns into the rolling summary", c.slice_turns)
}
