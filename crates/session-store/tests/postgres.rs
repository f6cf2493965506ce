//! `PostgresStore` against a real PostgreSQL (feature `postgres`).
//!
//! The tests read the database URL from `COMPACTION_TEST_POSTGRES_URL` (`cargo xtask pg start`
//! prints one; `cargo xtask verify` starts a cluster itself when PostgreSQL is installed). Each
//! test works in its own PostgreSQL schema, so they run in parallel on one database. Without
//! the variable they print a SKIPPED line and pass, except under `CI=true`, where a missing
//! database fails them.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::history;
use common::pg::{admin, unique_schema};
use compaction_core::store_support::{latest_view_timestamp, timestamp_may_follow};
use compaction_core::testing::{
    EventFactory, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    Engine, Event, FailureKind, Outcome, Revision, SessionKey, SessionStore, StoreError,
    assemble_context, compaction_history, gate_input, live_tail,
};
use proptest::prelude::*;
use serde_json::Map;
use session_store::postgres::POSTGRES_SCHEMA_VERSION;
use session_store::{PostgresAccess, PostgresOptions, PostgresStore, SessionStoreError};
use test_data::pg::database_url;

async fn store_in(url: &str, schema: &str) -> PostgresStore {
    PostgresStore::connect_with(url, PostgresOptions::default().schema(schema))
        .await
        .expect("connect the PostgreSQL store")
}

/// A store in a fresh schema of its own.
async fn fresh_store(url: &str, test: &str) -> (PostgresStore, String) {
    let schema = unique_schema("t", test);
    (store_in(url, &schema).await, schema)
}

fn key(n: u64) -> SessionKey {
    SessionKey::new("zocrates", "user-1", format!("session-{n}"))
}

/// One property case: every append checked against the core, as the SQLite oracle does.
async fn oracle_case(
    store: &PostgresStore,
    replica: &PostgresStore,
    key: &SessionKey,
    events: &[Event],
) -> Result<(), TestCaseError> {
    store
        .create_session(key, Map::new())
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut revision = Revision(0);
    let mut accepted: Vec<Event> = Vec::new();
    for event in events {
        if !timestamp_may_follow(latest_view_timestamp(&accepted), event) {
            let refused = store.append(key, revision, event.clone()).await;
            let typed = matches!(refused, Err(StoreError::NonIncreasingTimestamp { .. }));
            prop_assert!(typed, "{:?}", refused);
            prop_assert_eq!(store.header(key).await.unwrap().revision, revision);
            continue;
        }
        accepted.push(event.clone());
        let i = accepted.len() - 1;
        if i > 0 {
            // A writer that read an older revision is refused and writes nothing.
            let stale = store
                .append(key, Revision(revision.0 - 1), event.clone())
                .await;
            let refused = matches!(
                stale,
                Err(StoreError::Stale { actual, .. }) if actual == revision
            );
            prop_assert!(refused, "{:?}", stale);
        }
        revision = store.append(key, revision, event.clone()).await.unwrap();
        prop_assert_eq!(revision, Revision(i as u64 + 1));
        let prefix = &accepted[..];
        // The header as another replica (its own pool) reads it.
        let header = replica.header(key).await.unwrap();
        prop_assert_eq!(header.revision, revision);
        prop_assert_eq!(header.gate, gate_input(prefix), "header after event {}", i);
        let snapshot = store.gate_snapshot(key).await.unwrap();
        prop_assert_eq!(snapshot.input, gate_input(prefix));
        prop_assert_eq!(
            store.load_context(key).await.unwrap(),
            assemble_context(prefix),
            "context after event {}",
            i
        );
        prop_assert_eq!(
            store.load_live_tail(key).await.unwrap().events,
            live_tail(prefix),
            "live tail after event {}",
            i
        );
        prop_assert_eq!(
            store.compaction_history(key).await.unwrap(),
            compaction_history(prefix),
            "compaction history after event {}",
            i
        );
    }
    let session = replica.load(key).await.unwrap();
    prop_assert_eq!(session.revision, revision);
    prop_assert_eq!(&session.events, &accepted);
    Ok(())
}

/// The oracle property of the SQLite store, on PostgreSQL: after every append the header, the
/// context, the live tail and the compaction history equal compaction-core's functions of the
/// whole history; stale and non-increasing appends are refused and write nothing; the stored
/// history is the accepted one, event for event.
#[test]
fn postgres_store_matches_the_oracle_after_every_append() {
    let Some(url) = database_url("postgres_store_matches_the_oracle_after_every_append") else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (store, schema) = runtime.block_on(fresh_store(&url, "oracle"));
    let replica = runtime.block_on(store_in(&url, &schema));
    let cases = AtomicU64::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(64));
    let result = runner.run(&history(40), |events| {
        let key = key(cases.fetch_add(1, Ordering::Relaxed));
        runtime.block_on(oracle_case(&store, &replica, &key, &events))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Many tasks on two stores (two pools, as two replicas) race to append on the revision they
/// all read: in every round exactly one wins, every other is refused as stale naming the
/// winner's revision, and the stored history holds the winners only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_appends_on_one_revision_have_exactly_one_winner() {
    let Some(url) = database_url("racing_appends_on_one_revision_have_exactly_one_winner") else {
        return;
    };
    let (a, schema) = fresh_store(&url, "race").await;
    let b = store_in(&url, &schema).await;
    let key = key(0);
    a.create_session(&key, Map::new()).await.unwrap();
    let racers = 16;
    let mut f = EventFactory::new();
    let mut winners: Vec<Event> = Vec::new();
    let mut revision = Revision(0);
    for round in 0..10 {
        let offers: Vec<Event> = (0..racers)
            .map(|i| {
                f.user(
                    &format!("inv-{round}-{i}"),
                    &format!("offer {i} of round {round}"),
                )
            })
            .collect();
        let barrier = Arc::new(tokio::sync::Barrier::new(racers));
        let tasks: Vec<_> = offers
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, event)| {
                let store = if i % 2 == 0 { a.clone() } else { b.clone() };
                let (key, barrier) = (key.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.append(&key, revision, event).await
                })
            })
            .collect();
        let mut won = Vec::new();
        for (i, task) in tasks.into_iter().enumerate() {
            match task.await.unwrap() {
                Ok(new) => won.push((i, new)),
                Err(StoreError::Stale {
                    expected, actual, ..
                }) => {
                    assert_eq!(expected, revision);
                    assert_eq!(actual, Revision(revision.0 + 1));
                }
                Err(other) => panic!("round {round}, racer {i}: {other}"),
            }
        }
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        let (i, new) = won[0];
        assert_eq!(new, Revision(revision.0 + 1));
        revision = new;
        winners.push(offers[i].clone());
    }
    let session = b.load(&key).await.unwrap();
    assert_eq!(session.revision, revision);
    assert_eq!(session.events, winners);
    assert_eq!(a.header(&key).await.unwrap().gate, gate_input(&winners));
}

/// The store's connection is terminated by the server (`pg_terminate_backend`) while an append
/// is inside its transaction (its compare-and-set done, its insert waiting on a lock the test
/// holds): the append fails with a named `transport` store error, nothing of it is written
/// (the revision included), and the next call works on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_mid_append_is_a_named_error_and_writes_nothing() {
    let Some(url) =
        database_url("a_connection_killed_mid_append_is_a_named_error_and_writes_nothing")
    else {
        return;
    };
    let schema = unique_schema("t", "fault");
    let app = format!("fault_{schema}");
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = PostgresStore::connect_with(
        &format!("{url}{sep}application_name={app}"),
        PostgresOptions::default()
            .schema(&schema)
            .max_connections(1),
    )
    .await
    .unwrap();
    let key = key(0);
    store.create_session(&key, Map::new()).await.unwrap();
    let mut f = EventFactory::new();
    let mut revision = Revision(0);
    let mut written = Vec::new();
    for e in f.conversational_turn("i1", "q1", "a1") {
        revision = store.append(&key, revision, e.clone()).await.unwrap();
        written.push(e);
    }

    let mut blocker = admin(&url).await;
    let lock = blocker.transaction().await.unwrap();
    lock.batch_execute(&format!("LOCK TABLE {schema}.events IN SHARE MODE"))
        .await
        .unwrap();
    let victim = f.user("i2", "q2");
    let append = tokio::spawn({
        let (store, key, victim) = (store.clone(), key.clone(), victim.clone());
        async move { store.append(&key, revision, victim).await }
    });
    // Wait until the append is inside its transaction, blocked on the events table.
    let watcher = admin(&url).await;
    let started = Instant::now();
    let pid: i32 = loop {
        let waiting = watcher
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                 AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO events%'",
                &[&app],
            )
            .await
            .unwrap();
        if let Some(row) = waiting {
            break row.get(0);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the append never blocked on the events table"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let killed: bool = watcher
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(killed);
    let failed = append.await.unwrap().unwrap_err();
    lock.commit().await.unwrap();
    assert_eq!(failed.kind(), FailureKind::Transport, "{failed}");
    let message = failed.to_string();
    assert!(
        message.contains("PostgreSQL failed while storing event")
            && message.contains(&key.to_string())
            && message.contains("terminating connection"),
        "{message}"
    );
    // Nothing of the killed append was written, and the next call reconnects (one connection
    // in the pool: the broken one was dropped).
    let session = store.load(&key).await.unwrap();
    assert_eq!(session.revision, revision);
    assert_eq!(session.events, written);
    let after = store.append(&key, revision, victim.clone()).await.unwrap();
    assert_eq!(after, Revision(revision.0 + 1));
    written.push(victim);
    assert_eq!(store.load(&key).await.unwrap().events, written);
}

/// The port's typed errors, and the engine's whole post-turn path through the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_compacts_through_the_postgres_store() {
    let Some(url) = database_url("the_engine_compacts_through_the_postgres_store") else {
        return;
    };
    let (store, _) = fresh_store(&url, "engine").await;
    let key = key(0);
    assert!(matches!(
        store.load(&key).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .append(&key, Revision(0), EventFactory::new().user("a", "q"))
            .await,
        Err(StoreError::NotFound(_))
    ));
    store.create_session(&key, Map::new()).await.unwrap();
    let again = store.create_session(&key, Map::new()).await.unwrap_err();
    assert_eq!(again.kind(), FailureKind::AlreadyExists);

    let summarizer = Arc::new(RecordingSummarizer::new());
    let engine = Engine::builder(
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer.clone(),
        Arc::new(store.clone()),
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
            revision = store.append(&key, revision, e).await.unwrap();
        }
        let outcome = engine.evaluate_and_compact(&key).await;
        if let Outcome::Compressed(c) = &outcome {
            revision = c.revision;
        }
        outcomes.push(outcome);
    }
    assert!(
        outcomes.iter().any(|o| matches!(o, Outcome::Compressed(_))),
        "{outcomes:?}"
    );
    assert!(summarizer.calls() >= 1);
    let session = store.load(&key).await.unwrap();
    assert_eq!(session.revision, revision);
    let context = store.load_context(&key).await.unwrap();
    assert!(context.summary().is_some());
    assert_eq!(context, assemble_context(&session.events));
    assert_eq!(
        store.gate_snapshot(&key).await.unwrap().input,
        gate_input(&session.events)
    );
}

/// Shadow decisions are kept beside the session, in order; recording one leaves the revision
/// alone; a store connected later reads them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_decisions_round_trip() {
    let Some(url) = database_url("shadow_decisions_round_trip") else {
        return;
    };
    let (store, schema) = fresh_store(&url, "shadow").await;
    let key = key(0);
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
    let later = store_in(&url, &schema).await;
    let decisions = later.decisions(&key).await.unwrap();
    let ps: Vec<_> = decisions.iter().map(|d| d.probability).collect();
    assert_eq!(ps, [Some(0.91), Some(0.12)]);
    assert_eq!(decisions[0].turn, 6);
}

/// Replicas starting together migrate once; a database written by a newer build is refused
/// and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_once_and_a_newer_schema_is_refused() {
    let Some(url) = database_url("migrations_run_once_and_a_newer_schema_is_refused") else {
        return;
    };
    let schema = unique_schema("t", "migrate");
    let connects: Vec<_> = (0..4)
        .map(|_| {
            let (url, schema) = (url.clone(), schema.clone());
            tokio::spawn(async move {
                PostgresStore::connect_with(&url, PostgresOptions::default().schema(&schema)).await
            })
        })
        .collect();
    for connect in connects {
        connect.await.unwrap().unwrap();
    }
    let client = admin(&url).await;
    let versions: Vec<i64> = client
        .query(&format!("SELECT version FROM {schema}.schema_version"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [POSTGRES_SCHEMA_VERSION]);
    client
        .execute(
            &format!("UPDATE {schema}.schema_version SET version = version + 1"),
            &[],
        )
        .await
        .unwrap();
    let refused = PostgresStore::connect_with(&url, PostgresOptions::default().schema(&schema))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, SessionStoreError::FutureSchema { found, .. } if found == POSTGRES_SCHEMA_VERSION + 1),
        "{refused:?}"
    );
    let bad_schema =
        PostgresStore::connect_with(&url, PostgresOptions::default().schema("Bad; drop"))
            .await
            .unwrap_err();
    assert!(bad_schema.to_string().contains("lowercase SQL identifier"));
}

/// A column whose type drifted from the schema (altered by hand) is a named store error — the
/// column, its PostgreSQL type and the type expected — on every path that reads it, never a
/// panic in the driver; the append that met it wrote nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_of_another_type_is_a_named_error_not_a_panic() {
    let Some(url) = database_url("a_column_of_another_type_is_a_named_error_not_a_panic") else {
        return;
    };
    let (store, schema) = fresh_store(&url, "drift").await;
    let key = key(1);
    let mut events = EventFactory::new();
    store.create_session(&key, Map::new()).await.unwrap();
    let first = events.user("i1", "How do tides lag the moon?");
    store.append(&key, Revision(0), first).await.unwrap();
    admin(&url)
        .await
        .batch_execute(&format!(
            "ALTER TABLE {schema}.sessions ALTER COLUMN prompt_tokens TYPE integer"
        ))
        .await
        .unwrap();
    // A new pool: a connection that prepared the statements before the change is refused by
    // the server itself (`cached plan must not change result type`).
    let store = store_in(&url, &schema).await;
    let check = |e: &SessionStoreError| {
        let shown = e.to_string();
        assert!(
            matches!(
                e,
                SessionStoreError::PostgresColumn { column, found, expected, .. }
                    if column == "prompt_tokens" && &**found == "int4" && &**expected == "Option<i64>"
            ),
            "{e:?}"
        );
        assert!(
            shown.contains("column prompt_tokens (PostgreSQL type int4)"),
            "{shown}"
        );
        assert_eq!(e.failure_kind(), FailureKind::StoreCorrupt);
    };
    check(&store.header(&key).await.unwrap_err());
    let refused = store
        .append(
            &key,
            Revision(1),
            events.model("i1", "Ocean basins resonate."),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), FailureKind::StoreCorrupt, "{refused:?}");
    assert!(
        refused.to_string().contains("column prompt_tokens"),
        "{refused}"
    );
    let events_stored: i64 = admin(&url)
        .await
        .query_one(&format!("SELECT count(*) FROM {schema}.events"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(events_stored, 1, "the refused append wrote nothing");
}

/// `Existing` and `ReadOnly` refuse a database without the store and leave it as it was;
/// `ReadOnly` reads a store and cannot write to it; `delete_session` removes a session whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_modes_and_delete() {
    let Some(url) = database_url("access_modes_and_delete") else {
        return;
    };
    let client = admin(&url).await;
    let schema = unique_schema("t", "access");
    for access in [PostgresAccess::Existing, PostgresAccess::ReadOnly] {
        let options = PostgresOptions::default().schema(&schema).access(access);
        let refused = PostgresStore::connect_with(&url, options)
            .await
            .unwrap_err();
        assert!(
            matches!(refused, SessionStoreError::PostgresNoStore { .. }),
            "{access:?}: {refused:?}"
        );
        assert_eq!(refused.failure_kind(), FailureKind::NotFound);
        assert!(
            refused.to_string().contains("no session store"),
            "{refused}"
        );
        let created: bool = client
            .query_one("SELECT to_regnamespace($1) IS NOT NULL", &[&schema])
            .await
            .unwrap()
            .get(0);
        assert!(!created, "{access:?} created the schema");
    }

    let writer = store_in(&url, &schema).await;
    let mut events = EventFactory::new();
    writer.create_session(&key(1), Map::new()).await.unwrap();
    writer
        .append(&key(1), Revision(0), events.user("i1", "first question"))
        .await
        .unwrap();
    let options = PostgresOptions::default()
        .schema(&schema)
        .access(PostgresAccess::ReadOnly);
    let reader = PostgresStore::connect_with(&url, options).await.unwrap();
    assert_eq!(reader.header(&key(1)).await.unwrap().revision, Revision(1));
    assert_eq!(reader.load(&key(1)).await.unwrap().events.len(), 1);
    let write = reader
        .append(&key(1), Revision(1), events.user("i2", "second question"))
        .await
        .unwrap_err();
    assert!(write.to_string().contains("read-only"), "{write}");
    assert!(reader.create_session(&key(2), Map::new()).await.is_err());
    assert_eq!(writer.header(&key(1)).await.unwrap().revision, Revision(1));

    let existing = PostgresOptions::default()
        .schema(&schema)
        .access(PostgresAccess::Existing);
    let evaluator = PostgresStore::connect_with(&url, existing).await.unwrap();
    assert!(evaluator.delete_session(&key(1)).await.unwrap());
    assert!(!evaluator.delete_session(&key(1)).await.unwrap());
    let left: i64 = client
        .query_one(&format!("SELECT count(*) FROM {schema}.events"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    assert!(matches!(
        writer.load(&key(1)).await,
        Err(StoreError::NotFound(_))
    ));
}

/// The sessions with an open turn (a query with no reply), from the header: a session whose
/// turn completed is not listed; a bound before every append lists none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_turns_are_listed_from_the_header() {
    let Some(url) = database_url("open_turns_are_listed_from_the_header") else {
        return;
    };
    let (store, _schema) = fresh_store(&url, "open_turns").await;
    let mut f = EventFactory::new();
    for n in 0..2 {
        store.create_session(&key(n), Map::new()).await.unwrap();
        let mut revision = Revision(0);
        let mut events = f.conversational_turn(&format!("i{n}"), "q", "a");
        if n == 1 {
            events.push(f.user(&format!("open{n}"), "a question left without a reply"));
        }
        for e in events {
            revision = store.append(&key(n), revision, e).await.unwrap();
        }
    }
    let later = compaction_core::Timestamp::new(4.0e9).unwrap();
    assert_eq!(store.open_turns(later).await.unwrap(), Some(vec![key(1)]));
    let earlier = compaction_core::Timestamp::new(0.0).unwrap();
    assert_eq!(store.open_turns(earlier).await.unwrap(), Some(vec![]));
}
