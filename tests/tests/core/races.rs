//! What the engine does when the session changes between the gate's read and the live tail's.

use std::sync::Arc;

use async_trait::async_trait;
use compaction_core::testing::{
    InMemoryStore, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    ContinueReason, Engine, Event, FailureKind, GateInput, GateSnapshot, Outcome, Revision,
    Session, SessionKey, SessionStore, StoreError,
};

use crate::fixtures::key;

/// A store whose gate snapshot still counts turns that its live tail no longer holds (a
/// rewind landed in between).
struct StaleGate(InMemoryStore);

#[async_trait]
impl SessionStore for StaleGate {
    async fn create_session(
        &self,
        key: &SessionKey,
        state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Session, StoreError> {
        self.0.create_session(key, state).await
    }

    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError> {
        self.0.load(key).await
    }

    async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
        let revision = self.0.load(key).await?.revision;
        Ok(GateSnapshot::new(
            GateInput {
                completed_turns_since_compaction: 6,
                coordinator_prompt_tokens: Some(60_000),
            },
            revision,
        ))
    }

    async fn append(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: Event,
    ) -> Result<Revision, StoreError> {
        self.0.append(key, expected, event).await
    }
}

/// The gate opened on turns the session no longer shows: nothing is asked of the decision
/// model (an empty state would be a paid call about nothing) and the outcome says why.
#[tokio::test]
async fn a_gate_that_opened_on_turns_now_gone_makes_no_call() {
    let store = InMemoryStore::serving_whole_histories();
    store.insert(Session {
        key: key(),
        state: serde_json::Map::new(),
        events: Vec::new(),
        revision: Revision(0),
    });
    let decision = Arc::new(ScriptedDecisionModel::constant(0.9));
    let engine = Engine::builder(
        decision.clone(),
        Arc::new(RecordingSummarizer::new()),
        Arc::new(StaleGate(store)),
        Arc::new(SteppingClock::starting_at(1_800_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .build()
    .expect("valid settings");
    let outcome = engine.evaluate_and_compact(&key()).await;
    assert!(
        matches!(
            &outcome,
            Outcome::Continue(ContinueReason::ProbeFailed { failure })
                if failure.kind() == FailureKind::NothingToShow
                    && failure.message().contains("no call made")
        ),
        "{outcome:?}"
    );
    assert_eq!(decision.calls(), 0);
}
