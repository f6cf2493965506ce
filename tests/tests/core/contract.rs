//! The engine's contract with a consuming service (issue 14): timestamps that cannot lose a
//! retained turn, typed failures, deadlines the engine owns, and outcomes a service can show
//! and serialize.

use std::future::pending;
use std::sync::Arc;

use async_trait::async_trait;
use compaction_core::testing::{
    InMemoryStore, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    AdapterError, ContinueReason, DecisionAnswer, DecisionModel, Engine, Event, FailureKind,
    ModelInfo, Outcome, ProbeRequest, Revision, Session, SessionStore, Settings, StoreError,
    Summarizer, Summary, SummaryRequest, Timestamp, classified,
};

use crate::fixtures::{Harness, key, session_with_turns};

/// Re-stamps every event of `session` with whole seconds of a coarse clock: `per_second`
/// events share each second.
fn coarse(session: &mut Session, per_second: usize) {
    for (i, event) in session.events.iter_mut().enumerate() {
        let second = 1_700_000_000 + (i / per_second) as u64;
        event.timestamp = Timestamp::new(second as f64).unwrap();
    }
}

/// With a one-second clock, turn N-K (its answer) and turn N-K+1 (its query) share a
/// timestamp: a compaction up to that second would cover the retained turn and it would
/// vanish from the next prompt. The engine refuses to compact and says why; nothing is
/// written.
#[tokio::test]
async fn a_coarse_clock_never_makes_a_retained_turn_disappear() {
    let h = Harness::answering(0.95);
    let (_, mut session) = session_with_turns(10, 60_000);
    // Two events per second would be fine; a turn's answer and the next query share one.
    for (i, event) in session.events.iter_mut().enumerate() {
        let second = 1_700_000_000 + i.div_ceil(2) as u64;
        event.timestamp = Timestamp::new(second as f64).unwrap();
    }
    let outcome = h.evaluate(session).await;
    match &outcome {
        Outcome::Continue(ContinueReason::TimestampsNotIncreasing {
            slice_end,
            retained_start,
            probability,
        }) => {
            assert_eq!(slice_end, retained_start);
            assert!(probability.is_some(), "the model was asked: {outcome:?}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(h.store.appends(), 0);
    assert_eq!(h.summarizer.calls(), 0);
    assert!(
        outcome
            .to_string()
            .contains("timestamps must strictly increase")
    );
}

/// Equal timestamps inside the slice are harmless (they are all folded); only the boundary
/// to the retained turns matters.
#[tokio::test]
async fn equal_timestamps_inside_the_slice_still_compact() {
    let h = Harness::answering(0.95);
    let (_, mut session) = session_with_turns(10, 60_000);
    // Every turn's two events share one second; turns are a second apart.
    coarse(&mut session, 2);
    let outcome = h.evaluate(session).await;
    assert!(matches!(outcome, Outcome::Compressed(_)), "{outcome:?}");
    let stored = h.stored();
    let context = compaction_core::assemble_context(&stored.events);
    // K = 2 turns stay verbatim, whatever the clock.
    let verbatim: Vec<String> = context
        .entries
        .iter()
        .filter_map(|e| match e {
            compaction_core::ContextEntry::Event(e) if e.is_user() => Some(e.text()),
            _ => None,
        })
        .collect();
    assert_eq!(verbatim, ["q9", "q10"]);
}

/// The port's stores refuse an unscoped event whose timestamp does not increase, naming both.
#[tokio::test]
async fn the_in_memory_store_refuses_a_timestamp_that_does_not_increase() {
    let store = InMemoryStore::new();
    let created = store
        .create_session(&key(), serde_json::Map::new())
        .await
        .unwrap();
    let mut f = compaction_core::testing::EventFactory::new();
    let first = f.user("inv1", "q1");
    let mut tied = f.model("inv1", "a1");
    tied.timestamp = first.timestamp;
    let revision = store
        .append(&key(), created.revision, first.clone())
        .await
        .unwrap();
    let err = store.append(&key(), revision, tied).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::NonIncreasingTimestamp);
    assert!(
        matches!(&err, StoreError::NonIncreasingTimestamp { latest, offered, .. }
            if *latest == first.timestamp && *offered == first.timestamp),
        "{err}"
    );
    let again = store
        .create_session(&key(), serde_json::Map::new())
        .await
        .unwrap_err();
    assert_eq!(again.kind(), FailureKind::AlreadyExists);
}

/// A decision model that never answers.
struct Hanging;

#[async_trait]
impl DecisionModel for Hanging {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "hanging")
    }
    async fn decide(&self, _: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        pending().await
    }
}

#[async_trait]
impl Summarizer for Hanging {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "hanging")
    }
    async fn summarize(&self, _: &SummaryRequest) -> Result<Summary, AdapterError> {
        pending().await
    }
}

fn engine_with(
    decision: Arc<dyn DecisionModel>,
    summarizer: Arc<dyn Summarizer>,
    store: Arc<InMemoryStore>,
    clock: SteppingClock,
) -> Engine {
    Engine::builder(
        decision,
        summarizer,
        store,
        Arc::new(clock),
        Arc::new(SequentialIds::default()),
    )
    .settings(Settings::default())
    .build()
    .expect("valid settings")
}

/// A probe that never answers fails open when the engine's deadline passes: the session is
/// never wedged by an adapter.
#[tokio::test]
async fn a_decision_model_that_never_answers_fails_open_at_the_deadline() {
    let store = Arc::new(InMemoryStore::new());
    store.insert(session_with_turns(6, 60_000).1);
    let engine = engine_with(
        Arc::new(Hanging),
        Arc::new(RecordingSummarizer::new()),
        store.clone(),
        SteppingClock::starting_at(1_800_000_000).expiring_deadlines(),
    );
    let outcome = engine.evaluate_and_compact(&key()).await;
    let failure = outcome.failure().expect("a failure");
    assert_eq!(failure.kind(), FailureKind::Timeout, "{outcome}");
    assert!(matches!(
        outcome,
        Outcome::Continue(ContinueReason::ProbeFailed { .. })
    ));
    assert!(failure.message().contains("10000 ms"), "{failure}");
    assert_eq!(store.appends(), 0);
}

/// A summarizer that never answers fails open too; nothing is written.
#[tokio::test]
async fn a_summarizer_that_never_answers_fails_open_at_the_deadline() {
    let store = Arc::new(InMemoryStore::new());
    store.insert(session_with_turns(6, 60_000).1);
    let engine = engine_with(
        Arc::new(ScriptedDecisionModel::constant(0.95)),
        Arc::new(Hanging),
        store.clone(),
        SteppingClock::starting_at(1_800_000_000).expiring_deadlines(),
    );
    let outcome = engine.evaluate_and_compact(&key()).await;
    assert!(
        matches!(&outcome, Outcome::SummarizerFailed { failure, .. }
            if failure.kind() == FailureKind::Timeout),
        "{outcome:?}"
    );
    assert_eq!(store.appends(), 0);
}

/// A decision model whose error says what kind it is.
struct RateLimited;

#[async_trait]
impl DecisionModel for RateLimited {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "limited")
    }
    async fn decide(&self, _: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        Err(classified(FailureKind::HttpStatus(429), "rate limited"))
    }
}

/// Failures are typed: a service counts 429s and invalid probabilities without reading
/// English.
#[tokio::test]
async fn failures_carry_their_kind() {
    let store = Arc::new(InMemoryStore::new());
    store.insert(session_with_turns(6, 60_000).1);
    let limited = engine_with(
        Arc::new(RateLimited),
        Arc::new(RecordingSummarizer::new()),
        store.clone(),
        SteppingClock::starting_at(1_800_000_000),
    );
    let outcome = limited.evaluate_and_compact(&key()).await;
    assert_eq!(
        outcome.failure().map(|f| f.kind()),
        Some(FailureKind::HttpStatus(429)),
        "{outcome}"
    );
    let invalid = engine_with(
        Arc::new(ScriptedDecisionModel::constant(1.5)),
        Arc::new(RecordingSummarizer::new()),
        store.clone(),
        SteppingClock::starting_at(1_800_000_000),
    );
    let outcome = invalid.evaluate_and_compact(&key()).await;
    assert_eq!(
        outcome.failure().map(|f| f.kind()),
        Some(FailureKind::InvalidProbability),
        "{outcome}"
    );
    // A stale store is typed too.
    let racer = Arc::new(InMemoryStore::new());
    let (mut f, session) = session_with_turns(6, 60_000);
    racer.insert(session);
    racer.race_next_append(f.user("inv-late", "a late REST write"));
    let stale = engine_with(
        Arc::new(ScriptedDecisionModel::constant(0.95)),
        Arc::new(RecordingSummarizer::new()),
        racer,
        SteppingClock::starting_at(1_800_000_000),
    );
    let outcome = stale.evaluate_and_compact(&key()).await;
    assert!(
        matches!(&outcome, Outcome::StaleDropped { failure, .. } if failure.kind() == FailureKind::Stale),
        "{outcome:?}"
    );
}

/// What a person and a machine see of each outcome.
#[tokio::test]
async fn outcomes_display_and_serialize() {
    let mut shown = Vec::new();
    for p in [0.2, 0.95] {
        let h = Harness::answering(p);
        let outcome = h.evaluate(session_with_turns(6, 60_000).1).await;
        shown.push((outcome.to_string(), serde_json::to_value(&outcome).unwrap()));
    }
    let h = Harness::answering(0.95);
    let outcome = h.evaluate(session_with_turns(2, 60_000).1).await;
    shown.push((outcome.to_string(), serde_json::to_value(&outcome).unwrap()));
    let store = Arc::new(InMemoryStore::new());
    store.insert(session_with_turns(6, 60_000).1);
    let outcome = engine_with(
        Arc::new(RateLimited),
        Arc::new(RecordingSummarizer::new()),
        store,
        SteppingClock::starting_at(1_800_000_000),
    )
    .evaluate_and_compact(&key())
    .await;
    shown.push((outcome.to_string(), serde_json::to_value(&outcome).unwrap()));
    insta::assert_json_snapshot!(shown);
}

/// The revision the append named is the one the store saw: an `Event` built by a host with
/// the public constructors goes through the port unchanged.
#[tokio::test]
async fn a_host_builds_events_with_public_constructors() {
    let store = InMemoryStore::new();
    let session = store
        .create_session(&key(), serde_json::Map::new())
        .await
        .unwrap();
    let t = |s: f64| Timestamp::new(s).unwrap();
    let query = Event::new("e1", "inv1", "user", t(1.0))
        .with_content(compaction_core::Content::user_text("What is SEI growth?"));
    let reply = Event::new("e2", "inv1", "coordinator", t(2.0))
        .with_content(compaction_core::Content::model_text("A passivation layer."))
        .with_prompt_tokens(1_234);
    let r1 = store.append(&key(), session.revision, query).await.unwrap();
    let r2 = store.append(&key(), r1, reply).await.unwrap();
    assert_eq!(r2, Revision(2));
    let snapshot = store.gate_snapshot(&key()).await.unwrap();
    assert_eq!(snapshot.input.completed_turns_since_compaction, 1);
    assert_eq!(snapshot.input.coordinator_prompt_tokens, Some(1_234));
}
