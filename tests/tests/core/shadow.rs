//! Shadow mode (issue 16): the engine probes and records each decision, and never compacts.

use std::sync::Arc;

use compaction_core::testing::{
    InMemoryStore, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{Engine, FailureKind, Outcome, SessionStore, Settings};

use crate::fixtures::{key, session_with_turns};

fn shadow_engine(decision: ScriptedDecisionModel, store: Arc<InMemoryStore>) -> Engine {
    Engine::builder(
        Arc::new(decision),
        Arc::new(RecordingSummarizer::new()),
        store,
        Arc::new(SteppingClock::starting_at(1_800_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .settings(Settings::default())
    .shadow(true)
    .build()
    .expect("valid settings")
}

/// A COMPRESS verdict, the hard backstop and a failed probe are all recorded, with p, the
/// model, the state's hash and the gate's figures; nothing is appended to the session.
#[tokio::test]
async fn shadow_mode_records_every_decision_and_compacts_nothing() {
    let store = Arc::new(InMemoryStore::new());
    store.insert(session_with_turns(6, 60_000).1);
    let engine = shadow_engine(
        ScriptedDecisionModel::scripted([Ok(0.9), Ok(0.3), Err("upstream 503".to_owned())]),
        store.clone(),
    );
    let first = engine.evaluate_and_compact(&key()).await;
    assert!(
        matches!(
            &first,
            Outcome::Shadowed {
                not_recorded: None,
                ..
            }
        ),
        "{first:?}"
    );
    assert_eq!(first.verdict_label(), "COMPRESS");
    assert!(first.to_string().contains("nothing compacted"), "{first}");
    // The backstop would force compaction: shadow mode still only asks and records.
    store.insert(session_with_turns(6, 150_000).1);
    let second = engine.evaluate_and_compact(&key()).await;
    assert_eq!(second.gate_label(), "backstop");
    assert_eq!(second.verdict_label(), "CONTINUE");
    let third = engine.evaluate_and_compact(&key()).await;
    assert_eq!(third.failure().map(|f| f.kind()), Some(FailureKind::Other));

    assert_eq!(
        store.appends(),
        0,
        "shadow mode never writes to the session"
    );
    let decisions = store.decisions(&key()).await.unwrap();
    assert_eq!(decisions.len(), 3);
    assert_eq!(decisions[0].probability, Some(0.9));
    assert_eq!(decisions[0].verdict.as_deref(), Some("COMPRESS"));
    assert_eq!(decisions[0].turn, 6);
    assert_eq!(decisions[0].completed_turns_since_compaction, 6);
    assert_eq!(decisions[0].coordinator_prompt_tokens, Some(60_000));
    assert_eq!(decisions[0].state_hash.len(), 16);
    assert!(decisions[1].backstop);
    assert_eq!(
        decisions[1].state_hash, decisions[2].state_hash,
        "same session, same state"
    );
    assert!(decisions[2].probability.is_none() && decisions[2].failure.is_some());
    // A record survives JSON (what stores keep).
    let json = serde_json::to_string(&decisions[2]).unwrap();
    let back: compaction_core::DecisionRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, decisions[2]);
}

/// Below the gate, shadow mode is as free as the real thing: no call, no record.
#[tokio::test]
async fn shadow_mode_keeps_the_fast_exit() {
    let store = Arc::new(InMemoryStore::new());
    store.insert(session_with_turns(2, 60_000).1);
    let engine = shadow_engine(ScriptedDecisionModel::constant(0.9), store.clone());
    let outcome = engine.evaluate_and_compact(&key()).await;
    assert!(matches!(outcome, Outcome::FastExit(_)));
    assert!(store.decisions(&key()).await.unwrap().is_empty());
}
