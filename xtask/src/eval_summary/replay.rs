//! One replay of a session through the real engine under a run's settings, with the core's
//! test clock, ids and constant decision model, collecting every fold.

use std::sync::Arc;

use cli::replay::Replay;
use compaction_core::{DecisionModel, Engine, SessionKey, SessionStore, Settings};
use serde_json::{Map, Value};
use session_store::SqliteStore;
use summarizer::{SummarizerConfig, build_summarizer};

use super::*;
use compaction_core::testing::{ScriptedDecisionModel, SequentialIds, SteppingClock};

/// One way of replaying a session.
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    pub(super) name: &'static str,
    /// Fold every N turns; `None` for the spec's defaults and their decision model.
    pub(super) every: Option<usize>,
}

pub(super) const RUNS: [Run; 4] = [
    Run {
        name: "defaults",
        every: None,
    },
    Run {
        name: "every-2",
        every: Some(2),
    },
    Run {
        name: "every-3",
        every: Some(3),
    },
    Run {
        name: "every-5",
        every: Some(5),
    },
];

pub(super) fn settings_for(run: Run) -> Settings {
    match run.every {
        None => Settings::default(),
        Some(n) => Settings {
            adaptive_compaction_retention_turns: if n <= 2 { 1 } else { 2 },
            adaptive_compaction_min_turns: n as i64,
            adaptive_compaction_token_floor: 0,
            adaptive_compaction_token_ceiling: 10_000_000,
            adaptive_compaction_threshold: 0.5,
            ..Settings::default()
        },
    }
}

/// The live summary after one fold, and the turns (0-based) it covers.
#[derive(Debug, Clone)]
pub(super) struct Fold {
    pub(super) after_turn: usize,
    pub(super) text: String,
    pub(super) covered: Vec<usize>,
    pub(super) receipt: Option<compaction_core::Receipt>,
}

/// What a replay produced: each fold, and the failures the engine reported.
#[derive(Debug, Default)]
pub(super) struct Replayed {
    pub(super) folds: Vec<Fold>,
    pub(super) failures: Vec<String>,
}

/// The receipt the engine stored on compaction `event_id`.
pub(super) async fn stored_receipt(
    store: &SqliteStore,
    key: &SessionKey,
    event_id: &str,
) -> Result<Option<compaction_core::Receipt>, String> {
    let session = store.load(key).await.map_err(|e| e.to_string())?;
    Ok(session
        .events
        .iter()
        .find(|e| e.id == event_id)
        .and_then(compaction_core::Receipt::of_event))
}

/// The run's decision model and why it was chosen: a constant "compact" for forced folds, else
/// the `decision_adapter` of the settings (`--decision`, or the `--config` file's own key).
pub(super) fn decision_model(
    run: Run,
    effective: &compaction_core::EffectiveSettings,
    settings_map: &Map<String, Value>,
) -> Result<(Arc<dyn DecisionModel>, String), String> {
    if let Some(every) = run.every {
        let model: Arc<dyn DecisionModel> = Arc::new(ScriptedDecisionModel::constant(1.0));
        return Ok((model, format!("forced: p = 1, a fold every {every} turns")));
    }
    let decision_config =
        decision_client::DecisionConfig::from_map(settings_map).map_err(|e| e.to_string())?;
    let selected = decision_client::build_decision_model(
        effective,
        &decision_config,
        decision_client::process_env,
    )
    .map_err(|e| e.to_string())?;
    Ok((selected.model, selected.reason))
}

pub(super) async fn replay(
    turns: &[EvalTurn],
    run: Run,
    config: &SummarizerConfig,
    settings_map: &Map<String, Value>,
) -> Result<Replayed, String> {
    let settings = settings_for(run);
    let effective = settings.effective().map_err(|e| e.to_string())?;
    let selected = build_summarizer(&effective, config, decision_client::process_env).map_err(
        |e| match e {
            summarizer::SummarizerFactoryError::NotBuilt { .. } => format!(
                "{e}; for the chat summarizer run \
                 `cargo run -p xtask --features remote -- eval-summary ...`"
            ),
            e => e.to_string(),
        },
    )?;
    let (decision, _) = decision_model(run, &effective, settings_map)?;
    let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temp dir: {e}"))?;
    let store =
        Arc::new(SqliteStore::open(dir.path().join("sessions.db")).map_err(|e| e.to_string())?);
    let clock = Arc::new(SteppingClock::starting_at(1_700_000_001));
    let ids = Arc::new(SequentialIds::default());
    let engine = Engine::builder(
        decision,
        selected.summarizer.clone(),
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .settings(settings)
    .build()
    .map_err(|e| e.to_string())?;
    let key = SessionKey::new("eval", "researcher", "eval-summary");
    let mut replay = Replay::start(engine, store.clone(), clock.clone(), ids, key.clone())
        .await
        .map_err(|e| e.to_string())?;
    let mut starts = Vec::new();
    let mut out = Replayed::default();
    let mut live: Option<String> = None;
    for (i, turn) in turns.iter().enumerate() {
        // The turn's user event is the clock's next reading.
        starts.push(clock.peek());
        let record = replay
            .turn(&turn.transcript)
            .await
            .map_err(|e| e.to_string())?;
        if record.detail.starts_with("nothing written") || record.detail.starts_with("dropped") {
            out.failures
                .push(format!("turn {}: {}", i + 1, record.detail));
        }
        let context = store.load_context(&key).await.map_err(|e| e.to_string())?;
        if let Some(summary) = context.summary()
            && live.as_deref() != Some(summary.event_id.as_str())
        {
            live = Some(summary.event_id.clone());
            let covered = starts
                .iter()
                .enumerate()
                .filter(|(_, ts)| summary.compaction.covers(**ts))
                .map(|(n, _)| n)
                .collect();
            let receipt = stored_receipt(&store, &key, &summary.event_id).await?;
            out.folds.push(Fold {
                after_turn: i + 1,
                text: summary.compaction.summary_text(),
                covered,
                receipt,
            });
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Measuring one fold.
