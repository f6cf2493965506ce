//! The `SessionStore` port: the engine runs its whole post-turn path on the SQLite store.

mod common;

use std::sync::Arc;

use common::{key, temp_store};
use compaction_core::testing::{
    EventFactory, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    Engine, FastExitReason, Outcome, Revision, SessionStore, StoreError, assemble_context,
    gate_input,
};
use serde_json::Map;
use session_store::Durability;

#[tokio::test(flavor = "current_thread")]
async fn the_port_maps_stale_and_not_found_and_answers_from_the_header() {
    let (_dir, store) = temp_store(Durability::Normal);
    let port: Arc<dyn SessionStore> = Arc::new(session_store::SqliteStore::from(store.clone()));
    let key = key();
    assert!(matches!(
        port.load(&key).await,
        Err(StoreError::NotFound(_))
    ));
    store.create_session(&key, Map::new()).unwrap();
    let mut f = EventFactory::new();
    let events = f.conversational_turn("a", "q", "r");
    let mut revision = Revision(0);
    for e in &events {
        revision = port.append(&key, revision, e.clone()).await.unwrap();
    }
    let stale = port.append(&key, Revision(0), f.user("b", "q")).await;
    assert!(
        matches!(
            stale,
            Err(StoreError::Stale {
                actual: Revision(2),
                ..
            })
        ),
        "{stale:?}"
    );
    let snapshot = port.gate_snapshot(&key).await.unwrap();
    assert_eq!(snapshot.revision, Revision(2));
    assert_eq!(snapshot.input, gate_input(&events));
    assert_eq!(port.load(&key).await.unwrap().events, events);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_fast_exits_then_compacts_through_the_store() {
    let (_dir, store) = temp_store(Durability::Full);
    let key = key();
    store.create_session(&key, Map::new()).unwrap();
    let summarizer = Arc::new(RecordingSummarizer::new());
    let engine = Engine::builder(
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer.clone(),
        Arc::new(session_store::SqliteStore::from(store.clone())),
        Arc::new(SteppingClock::starting_at(1_800_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .build()
    .unwrap();

    let mut f = EventFactory::new();
    let mut revision = Revision(0);
    let mut outcomes = Vec::new();
    for turn in 0..6 {
        let inv = format!("inv{turn}");
        let mut events = f.conversational_turn(&inv, &format!("question {turn}"), "answer");
        events[1] = events[1].clone().with_prompt_tokens(40_000 + 10_000 * turn);
        for e in events {
            revision = store.append_event(&key, revision, &e).unwrap();
        }
        let outcome = engine.evaluate_and_compact(&key).await;
        if let Outcome::Compressed(c) = &outcome {
            revision = c.revision;
        }
        outcomes.push(outcome);
    }
    assert!(matches!(
        outcomes[0],
        Outcome::FastExit(FastExitReason::TooFewTurns { completed: 1, .. })
    ));
    assert!(
        outcomes.iter().any(|o| matches!(o, Outcome::Compressed(_))),
        "{outcomes:?}"
    );
    assert!(summarizer.calls() >= 1);
    // Each request numbers its turns by the session's count (the summary's turn pointers).
    for request in summarizer.requests() {
        let asked = request.turns[0].user.strip_prefix("question ").unwrap();
        let first: usize = asked.parse().unwrap();
        assert_eq!(
            request.first_turn,
            Some(first + 1),
            "{:?}",
            request.turns[0]
        );
    }
    let session = store.get_session(&key).unwrap();
    let context = store.load_context(&key).unwrap();
    assert!(context.summary().is_some());
    assert_eq!(context, assemble_context(&session.events));
    assert_eq!(
        store.header(&key).unwrap().gate,
        gate_input(&session.events)
    );
}

/// The async store is the port: with `SessionStore` in scope, `store.gate_snapshot(&key).await`
/// is the port's call (no synchronous method of the same name shadows it), and a service
/// holding only the async store can create a session, append, assemble the next prompt and
/// list the compactions.
#[tokio::test]
async fn a_service_needs_nothing_but_the_async_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = session_store::SqliteStore::open(dir.path().join("sessions.db")).unwrap();
    let key = key();
    let created = store.create_session(&key, Map::new()).await.unwrap();
    let again = store.create_session(&key, Map::new()).await.unwrap_err();
    assert_eq!(again.kind(), compaction_core::FailureKind::AlreadyExists);
    let mut f = EventFactory::new();
    let mut revision = created.revision;
    for i in 0..6 {
        for e in f.conversational_turn(&format!("i{i}"), &format!("q{i}"), &format!("a{i}")) {
            revision = store.append(&key, revision, e).await.unwrap();
        }
    }
    let snapshot = store.gate_snapshot(&key).await.unwrap();
    assert_eq!(snapshot.revision, revision);
    let whole = store.load(&key).await.unwrap();
    assert_eq!(
        store.load_context(&key).await.unwrap(),
        assemble_context(&whole.events)
    );
    assert_eq!(
        store.compaction_history(&key).await.unwrap(),
        compaction_core::compaction_history(&whole.events)
    );
}

/// An unscoped event stamped no later than the latest one is refused with a typed error that
/// names both timestamps, and nothing is written; scoped events are not checked.
#[tokio::test]
async fn the_store_refuses_timestamps_that_do_not_increase() {
    let dir = tempfile::tempdir().unwrap();
    let store = session_store::SqliteStore::open(dir.path().join("sessions.db")).unwrap();
    let key = key();
    store.create_session(&key, Map::new()).await.unwrap();
    let mut f = EventFactory::new();
    let query = f.user("i1", "q1");
    let revision = store
        .append(&key, Revision(0), query.clone())
        .await
        .unwrap();
    let mut tied = f.model("i1", "a1");
    tied.timestamp = query.timestamp;
    let err = store
        .append(&key, revision, tied.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::NonIncreasingTimestamp { latest, offered, event_id, .. }
            if *latest == query.timestamp && *offered == query.timestamp && *event_id == tied.id),
        "{err}"
    );
    assert_eq!(store.load(&key).await.unwrap().events.len(), 1);
    // A scoped pipeline step may carry any timestamp: it is never in the view.
    let scoped = tied.clone().with_scope("search_pipeline:t1");
    let revision = store.append(&key, revision, scoped).await.unwrap();
    // The next in-view event only has to follow the view.
    let later = f.model("i1", "a1");
    store.append(&key, revision, later).await.unwrap();
}

/// Shadow decisions are kept beside the session through the port, in order, and survive a
/// reopen; recording one leaves the session's revision alone.
#[tokio::test]
async fn shadow_decisions_round_trip_through_the_port() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let store = session_store::SqliteStore::open(&path).unwrap();
    let key = key();
    store.create_session(&key, Map::new()).await.unwrap();
    let mut f = EventFactory::new();
    let mut revision = Revision(0);
    for i in 0..6 {
        for e in f.conversational_turn(&format!("i{i}"), &format!("q{i}"), &format!("a{i}")) {
            revision = store
                .append(&key, revision, e.with_prompt_tokens(60_000))
                .await
                .unwrap();
        }
    }
    let engine = Engine::builder(
        Arc::new(ScriptedDecisionModel::scripted([Ok(0.91), Ok(0.12)])),
        Arc::new(RecordingSummarizer::new()),
        Arc::new(store.clone()),
        Arc::new(SteppingClock::starting_at(1_800_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .shadow(true)
    .build()
    .unwrap();
    for _ in 0..2 {
        let outcome = engine.evaluate_and_compact(&key).await;
        assert!(
            matches!(
                outcome,
                Outcome::Shadowed {
                    not_recorded: None,
                    ..
                }
            ),
            "{outcome:?}"
        );
    }
    assert_eq!(store.gate_snapshot(&key).await.unwrap().revision, revision);
    drop(store);
    let reopened = session_store::SqliteStore::open(&path).unwrap();
    let decisions = reopened.decisions(&key).await.unwrap();
    let ps: Vec<_> = decisions.iter().map(|d| d.probability).collect();
    assert_eq!(ps, [Some(0.91), Some(0.12)]);
    assert_eq!(decisions[0].turn, 6);
}
