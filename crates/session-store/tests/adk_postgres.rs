//! `AdkPostgresStore` against a real PostgreSQL (feature `postgres`), on tables created by the
//! DDL real google-adk 2.13.0 (SQLAlchemy + asyncpg) creates (`fixtures/adk-database-v1-postgres.sql`).
//!
//! The database URL and the skip rule are those of `tests/postgres.rs`:
//! `COMPACTION_TEST_POSTGRES_URL`, a SKIPPED line without it, a failure under `CI=true`. Each
//! test loads ADK's tables into a PostgreSQL schema of its own.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use common::history;
use common::pg::{admin, unique_schema};
use compaction_core::testing::{
    EventFactory, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    Engine, Event, Outcome, Revision, SessionKey, SessionStore, StoreError, Timestamp,
    assemble_context, compaction_history, gate_input, live_tail, rolling_tail_positions,
};
use proptest::prelude::*;
use serde_json::{Map, json};
use session_store::{
    AdkPostgresStore, PostgresAccess, PostgresLayout, PostgresOptions, PostgresStore,
    SessionStoreError, detect_postgres_layout,
};
use test_data::pg::database_url;

/// ADK's `DatabaseSessionService` schema v1 on PostgreSQL, as real ADK created it.
const ADK_PG_DDL: &str = include_str!("fixtures/adk-database-v1-postgres.sql");

/// A fresh schema holding `ddl` (run with the schema as its `search_path`).
async fn schema_with(url: &str, test: &str, ddl: &str) -> String {
    let schema = unique_schema("adk", test);
    admin(url)
        .await
        .batch_execute(&format!(
            "CREATE SCHEMA {schema}; SET search_path TO {schema}; {ddl}"
        ))
        .await
        .expect("load the DDL");
    schema
}

/// ADK's tables in a fresh schema, and the store on them.
async fn adk_store(url: &str, test: &str) -> (AdkPostgresStore, String) {
    let schema = schema_with(url, test, ADK_PG_DDL).await;
    let store = AdkPostgresStore::connect_with(url, PostgresOptions::default().schema(&schema))
        .await
        .expect("connect the ADK store");
    (store, schema)
}

fn key(n: u64) -> SessionKey {
    SessionKey::new("zocrates", "u1", format!("s{n}"))
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The factory's events (and their compaction ranges) moved to start `offset` seconds from
/// now: an ADK session is created "now" and an event must be later than its update_time.
fn from_now(events: Vec<Event>, offset: f64) -> Vec<Event> {
    let base = (now() + offset).ceil() - EventFactory::new().user("x", "x").timestamp.seconds();
    let shift = |t: Timestamp| Timestamp::new(t.seconds() + base).unwrap();
    events
        .into_iter()
        .map(|mut e| {
            e.timestamp = shift(e.timestamp);
            if let Some(c) = e.actions.compaction.as_mut() {
                c.start_timestamp = shift(c.start_timestamp);
                c.end_timestamp = shift(c.end_timestamp);
            }
            e
        })
        .collect()
}

/// ADK's revision of an event's timestamp: `datetime.fromtimestamp` to the microsecond.
fn micros(t: Timestamp) -> u64 {
    let s = t.seconds();
    (s.trunc() as u64) * 1_000_000 + ((s - s.trunc()) * 1e6).round_ties_even() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detects_the_layouts_without_writing() {
    let Some(url) = database_url("detects_the_layouts_without_writing") else {
        return;
    };
    let adk = schema_with(&url, "detect", ADK_PG_DDL).await;
    let empty = schema_with(&url, "detect_empty", "").await;
    let native = unique_schema("adk", "detect_native");
    PostgresStore::connect_with(&url, PostgresOptions::default().schema(&native))
        .await
        .unwrap();
    let none = "no_such_schema";
    assert_eq!(
        detect_postgres_layout(&url, none, &adk).await.unwrap(),
        PostgresLayout::AdkDatabase
    );
    assert_eq!(
        detect_postgres_layout(&url, none, &empty).await.unwrap(),
        PostgresLayout::Empty
    );
    // The native store wins when both are there.
    assert_eq!(
        detect_postgres_layout(&url, &native, &adk).await.unwrap(),
        PostgresLayout::Native
    );
    // ADK's legacy v0 layout names ADK's migration command.
    let v0 = schema_with(
        &url,
        "detect_v0",
        "CREATE TABLE sessions (app_name TEXT, user_id TEXT, id TEXT); \
         CREATE TABLE events (id TEXT, actions BYTEA);",
    )
    .await;
    let err = detect_postgres_layout(&url, none, &v0).await.unwrap_err();
    assert!(err.to_string().contains("adk migrate session"), "{err}");
    // The ADK store refuses a schema without ADK's tables, and one with the wrong types.
    let err = AdkPostgresStore::connect_with(&url, PostgresOptions::default().schema(&empty))
        .await
        .unwrap_err();
    assert!(
        matches!(err, SessionStoreError::NotAdkDatabase { .. }),
        "{err}"
    );
    let text_times = schema_with(
        &url,
        "detect_tz",
        &ADK_PG_DDL.replace(
            "update_time timestamp without time zone NOT NULL\n);\nCREATE TABLE user_states",
            "update_time timestamp with time zone NOT NULL\n);\nCREATE TABLE user_states",
        ),
    )
    .await;
    let err = AdkPostgresStore::connect_with(&url, PostgresOptions::default().schema(&text_times))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sessions.update_time"), "{err}");
    // Detection wrote nothing: the empty schema is still empty.
    let tables: i64 = admin(&url)
        .await
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&empty],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_round_trip_with_adks_revision_lock_and_merged_state() {
    let Some(url) = database_url("events_round_trip_with_adks_revision_lock_and_merged_state")
    else {
        return;
    };
    let (store, schema) = adk_store(&url, "round_trip").await;
    let mut state = Map::new();
    state.insert("topic".into(), json!("SEI"));
    let created = store.create_session(&key(0), state).await.unwrap();
    assert_eq!(store.revision(&key(0)).await.unwrap(), created.revision);
    let again = store.create_session(&key(0), Map::new()).await.unwrap_err();
    assert!(
        matches!(again, SessionStoreError::AlreadyExists { .. }),
        "{again}"
    );
    let db = admin(&url).await;
    db.batch_execute(&format!(
        "SET search_path TO {schema}; \
         UPDATE app_states SET state = '{{\"k\": 1}}'; \
         UPDATE user_states SET state = '{{\"name\": \"Ada\"}}';"
    ))
    .await
    .unwrap();
    let mut f = EventFactory::new();
    let mut events = f.research_turn("inv1", "What limits SEI growth?", "Synthesis.");
    events.extend(f.conversational_turn("inv2", "And cracking?", "Stress."));
    events.push(f.rewind("inv3", "inv2"));
    let events = from_now(events, 1.0);
    let mut revision = created.revision;
    for e in &events {
        let next = store.append_event(&key(0), revision, e).await.unwrap();
        assert_eq!(next.0, micros(e.timestamp), "the revision is update_time");
        assert_eq!(store.revision(&key(0)).await.unwrap(), next);
        revision = next;
    }
    let session = store.get_session(&key(0)).await.unwrap();
    assert_eq!(session.events, events);
    assert_eq!(session.revision, revision);
    assert_eq!(session.state["topic"], json!("SEI"));
    assert_eq!(session.state["app:k"], json!(1));
    assert_eq!(session.state["user:name"], json!("Ada"));
    // The columns hold naive UTC, whatever the session's time zone; the JSON is jsonb.
    db.batch_execute("SET TIME ZONE 'America/New_York'")
        .await
        .unwrap();
    let (stored, event_ts): (String, String) = {
        let r = db
            .query_one(
                &format!(
                    "SELECT to_char(s.update_time, 'YYYY-MM-DD HH24:MI:SS.US'), \
                     to_char(max(e.timestamp), 'YYYY-MM-DD HH24:MI:SS.US') \
                     FROM {schema}.sessions s JOIN {schema}.events e ON e.session_id = s.id \
                     GROUP BY s.update_time"
                ),
                &[],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(stored, event_ts);
    let epoch: f64 = db
        .query_one(
            &format!("SELECT extract(epoch FROM update_time)::float8 FROM {schema}.sessions"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!((epoch * 1e6 - revision.0 as f64).abs() < 2.0, "{epoch}");

    // A stale handle is refused and writes nothing.
    let late = from_now(vec![EventFactory::new().user("inv4", "late")], 60.0);
    let stale = store
        .append_event(&key(0), created.revision, &late[0])
        .await
        .unwrap_err();
    assert!(
        matches!(stale, SessionStoreError::Stale { actual, .. } if actual == revision),
        "{stale}"
    );
    assert_eq!(store.get_session(&key(0)).await.unwrap().events, events);

    // ADK's row lock: while another transaction holds the session row FOR UPDATE (as ADK's
    // append_event does), an append waits for it; when that writer moved update_time on, the
    // append is refused as stale.
    let mut locker = admin(&url).await;
    let tx = locker.transaction().await.unwrap();
    let locker_pid: i32 = tx
        .query_one(
            &format!("SELECT pg_backend_pid() FROM {schema}.sessions WHERE id = 's0' FOR UPDATE"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let waiting = {
        let store = store.clone();
        let event = late[0].clone();
        tokio::spawn(async move { store.append_event(&key(0), revision, &event).await })
    };
    // The append cannot finish while the lock is held: the server shows it blocked by the
    // locker (polled: the condition is the server's own report, not elapsed time).
    // No sleep: each poll is one round trip to the server; the deadline only bounds a failure.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut waited = false;
    while !waited && std::time::Instant::now() < deadline && !waiting.is_finished() {
        let n: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&locker_pid],
            )
            .await
            .unwrap()
            .get(0);
        waited = n > 0;
    }
    assert!(waited, "the append did not wait for the session row's lock");
    assert!(!waiting.is_finished());
    tx.execute(
        &format!(
            "UPDATE {schema}.sessions SET update_time = update_time + interval '1 microsecond' \
             WHERE id = 's0'"
        ),
        &[],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let refused = waiting.await.unwrap().unwrap_err();
    assert!(
        matches!(refused, SessionStoreError::Stale { actual, .. } if actual.0 == revision.0 + 1),
        "{refused}"
    );
}

/// One property case on ADK's layout: every append checked against the core, as the SQLite
/// `AdkStore` and the native stores are.
async fn oracle_case(
    store: &AdkPostgresStore,
    key: &SessionKey,
    events: &[Event],
) -> Result<(), TestCaseError> {
    let created = store
        .create_session(key, Map::new())
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut revision = created.revision;
    let mut accepted: Vec<Event> = Vec::new();
    for event in from_now(events.to_vec(), 1.0) {
        let backwards = event
            .actions
            .compaction
            .as_ref()
            .is_some_and(|c| c.start_timestamp > c.end_timestamp);
        // ADK would not load these, or would apply a state delta this store does not.
        let state_delta = ["state_delta", "stateDelta"].iter().any(|k| {
            event.actions.extra.get(*k).is_some_and(|v| {
                !(v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty))
            })
        });
        if backwards || event.is_partial() || state_delta {
            let refused = store.append(key, revision, event.clone()).await;
            prop_assert!(refused.is_err(), "{:?}", refused);
            prop_assert_eq!(store.revision(key).await.unwrap(), revision);
            continue;
        }
        // ADK's update_time is the latest event's timestamp: it must move forward.
        if micros(event.timestamp) <= revision.0 {
            let refused = store.append(key, revision, event.clone()).await;
            let typed = matches!(refused, Err(StoreError::NonIncreasingTimestamp { .. }));
            prop_assert!(typed, "{:?}", refused);
            prop_assert_eq!(store.revision(key).await.unwrap(), revision);
            continue;
        }
        // A writer that read an older revision is refused and writes nothing.
        let stale = store
            .append(key, Revision(revision.0 - 1), event.clone())
            .await;
        let refused = matches!(stale, Err(StoreError::Stale { actual, .. }) if actual == revision);
        prop_assert!(refused, "{:?}", stale);
        accepted.push(event.clone());
        revision = store.append(key, revision, event.clone()).await.unwrap();
        prop_assert_eq!(revision.0, micros(event.timestamp));
        let prefix = &accepted[..];
        let i = prefix.len() - 1;
        // Asked first, so that it is carried across the append from the last read (tail_memo).
        prop_assert_eq!(
            store.scoped_user_messages(key).await.unwrap(),
            compaction_core::scoped_user_messages(prefix),
            "scope warning after event {}",
            i
        );
        let snapshot = store.gate_snapshot(key).await.unwrap();
        prop_assert_eq!(snapshot.revision, revision);
        prop_assert_eq!(snapshot.input, gate_input(prefix), "gate after event {}", i);
        let tail = store.load_live_tail(key).await.unwrap();
        let rolling: Vec<Event> = rolling_tail_positions(prefix)
            .into_iter()
            .map(|p| prefix[p].clone())
            .collect();
        prop_assert_eq!(&tail.events, &rolling, "rolling tail after event {}", i);
        for event in live_tail(prefix) {
            prop_assert!(tail.events.contains(&event), "live tail after event {}", i);
        }
        prop_assert_eq!(
            store.load_context(key).await.unwrap(),
            assemble_context(prefix),
            "context after event {}",
            i
        );
        prop_assert_eq!(
            store.compaction_history(key).await.unwrap(),
            compaction_history(prefix),
            "compaction history after event {}",
            i
        );
    }
    let session = store.load(key).await.unwrap();
    prop_assert_eq!(session.revision, revision);
    prop_assert_eq!(&session.events, &accepted);
    Ok(())
}

/// The oracle property on ADK's PostgreSQL layout: after every append the gate snapshot, the
/// live tail (ADK's rolling tail), the context and the compaction history equal
/// compaction-core's functions of the whole history; stale and non-increasing appends are
/// refused and write nothing; the stored history is the accepted one, event for event.
#[test]
fn adk_postgres_store_matches_the_oracle_after_every_append() {
    let Some(url) = database_url("adk_postgres_store_matches_the_oracle_after_every_append") else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (store, _) = runtime.block_on(adk_store(&url, "oracle"));
    let cases = AtomicU64::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(32));
    let result = runner.run(&history(30), |events| {
        let key = key(cases.fetch_add(1, Ordering::Relaxed));
        runtime.block_on(oracle_case(&store, &key, &events))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The engine compacts an ADK session on PostgreSQL; a handle loaded before the compaction is
/// stale afterwards; a read-only store refuses to write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_compacts_and_an_old_handle_goes_stale() {
    let Some(url) = database_url("the_engine_compacts_and_an_old_handle_goes_stale") else {
        return;
    };
    let (store, schema) = adk_store(&url, "engine").await;
    let key = key(0);
    let created = store.create_session(&key, Map::new()).await.unwrap();
    let summarizer = Arc::new(RecordingSummarizer::new());
    let clock_start = now().ceil() as u64 + 10_000;
    let engine = Engine::builder(
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer.clone(),
        Arc::new(store.clone()),
        Arc::new(SteppingClock::starting_at(clock_start)),
        Arc::new(SequentialIds::default()),
    )
    .build()
    .unwrap();
    let mut f = EventFactory::new();
    let mut turns = Vec::new();
    for turn in 0..6 {
        let inv = format!("inv{turn}");
        let mut events = f.conversational_turn(&inv, &format!("question {turn}"), "answer");
        events[1] = events[1].clone().with_prompt_tokens(40_000 + 10_000 * turn);
        turns.extend(events);
    }
    let mut revision = created.revision;
    for e in from_now(turns, 1.0) {
        revision = store.append(&key, revision, e).await.unwrap();
    }
    let before = store.load(&key).await.unwrap();
    let outcome = engine.evaluate_and_compact(&key).await;
    let Outcome::Compressed(c) = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(summarizer.calls() >= 1);
    let session = store.load(&key).await.unwrap();
    assert_eq!(session.revision, c.revision);
    assert!(c.revision > before.revision);
    let context = store.load_context(&key).await.unwrap();
    assert!(context.summary().is_some());
    assert_eq!(context, assemble_context(&session.events));
    // The handle loaded before the compaction is stale.
    let late = EventFactory::starting_at((clock_start + 100) as f64).user("inv9", "late");
    let err = store
        .append(&key, before.revision, late.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Stale { .. }), "{err:?}");
    // A read-only store reads but cannot write.
    let reader = AdkPostgresStore::connect_with(
        &url,
        PostgresOptions::default()
            .schema(&schema)
            .access(PostgresAccess::ReadOnly),
    )
    .await
    .unwrap();
    assert_eq!(reader.load(&key).await.unwrap(), session);
    let err = reader
        .append(&key, session.revision, late)
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("read-only"), "{err:?}");
}

/// The store's connection is terminated by the server (`pg_terminate_backend`) while an append
/// is inside its transaction (ADK's row lock taken, its insert waiting on a lock the test
/// holds): the append fails with a named `transport` store error, nothing of it is written
/// (`update_time` included), and the next call works on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_mid_append_is_a_named_error_and_writes_nothing() {
    let Some(url) =
        database_url("a_connection_killed_mid_append_is_a_named_error_and_writes_nothing")
    else {
        return;
    };
    let schema = schema_with(&url, "fault", ADK_PG_DDL).await;
    let app = format!("fault_{schema}");
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = AdkPostgresStore::connect_with(
        &format!("{url}{sep}application_name={app}"),
        PostgresOptions::default()
            .schema(&schema)
            .max_connections(1),
    )
    .await
    .unwrap();
    let key = key(0);
    let created = store.create_session(&key, Map::new()).await.unwrap();
    let mut events = from_now(
        EventFactory::new().conversational_turn("i1", "q1", "a1"),
        1.0,
    );
    let victim = events.pop().unwrap();
    let mut revision = created.revision;
    for e in &events {
        revision = store.append_event(&key, revision, e).await.unwrap();
    }

    let mut blocker = admin(&url).await;
    let lock = blocker.transaction().await.unwrap();
    lock.batch_execute(&format!("LOCK TABLE {schema}.events IN SHARE MODE"))
        .await
        .unwrap();
    let append = tokio::spawn({
        let (store, key, victim) = (store.clone(), key.clone(), victim.clone());
        async move { store.append_event(&key, revision, &victim).await }
    });
    // Until the append is inside its transaction, blocked on the events table: each poll is
    // one round trip to the server; the deadline only bounds a failure.
    let watcher = admin(&url).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
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
            std::time::Instant::now() < deadline && !append.is_finished(),
            "the append never blocked on the events table"
        );
    };
    let killed: bool = watcher
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(killed);
    let failed = append.await.unwrap().unwrap_err();
    lock.commit().await.unwrap();
    assert_eq!(
        failed.failure_kind(),
        compaction_core::FailureKind::Transport,
        "{failed}"
    );
    let message = failed.to_string();
    assert!(
        message.contains("PostgreSQL failed while appending event")
            && message.contains(&key.to_string())
            && message.contains("terminating connection"),
        "{message}"
    );
    // Nothing of the killed append was written; the next call reconnects (one connection in
    // the pool: the broken one was dropped).
    let session = store.get_session(&key).await.unwrap();
    assert_eq!(session.revision, revision);
    assert_eq!(session.events, events);
    let after = store.append_event(&key, revision, &victim).await.unwrap();
    assert_eq!(after.0, micros(victim.timestamp));
    events.push(victim);
    assert_eq!(store.get_session(&key).await.unwrap().events, events);
}

/// One case of the incremental property: `events` appended by ADK's process (a store that
/// keeps nothing) in chunks ending at `cuts`, after each chunk (and after `late` ones, a copy of
/// the last row under an id that sorts before it, so before the last known row) a one-shot
/// run: a new store continuing the checkpoint the last one left in `state`.
async fn incremental_case(
    url: &str,
    schema: &str,
    state: &std::path::Path,
    key: &SessionKey,
    events: &[Event],
    cuts: &[(usize, bool)],
) -> Result<(), TestCaseError> {
    let options = PostgresOptions::default().schema(schema);
    let connect = async |state: Option<&std::path::Path>| {
        AdkPostgresStore::connect_with(url, options.clone())
            .await
            .unwrap()
            .with_state_dir(state.map(std::path::Path::to_path_buf))
    };
    let writer = connect(None).await;
    let mut revision = writer
        .create_session(key, Map::new())
        .await
        .unwrap()
        .revision;
    let sql = admin(url).await;
    sql.batch_execute(&format!("SET search_path TO {schema}"))
        .await
        .unwrap();
    let events = from_now(events.to_vec(), 1.0);
    let mut from = 0;
    for (n, &(cut, late)) in cuts.iter().enumerate() {
        let to = cut.clamp(from, events.len());
        for event in &events[from..to] {
            if let Ok(next) = writer.append(key, revision, event.clone()).await {
                revision = next;
            }
        }
        from = to;
        if late {
            sql.execute(
                "INSERT INTO events SELECT $4 || id, app_name, user_id, session_id, \
                 invocation_id, timestamp, event_data FROM events \
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 \
                 ORDER BY timestamp DESC, id DESC LIMIT 1",
                &[
                    &key.app_name,
                    &key.user_id,
                    &key.session_id,
                    &format!("0late{n}-"),
                ],
            )
            .await
            .unwrap();
        }
        let run = connect(Some(state)).await;
        let whole = connect(None).await;
        let all = whole.get_session(key).await.unwrap().events;
        let tail = run.load_live_tail(key).await.unwrap();
        let rolling: Vec<Event> = rolling_tail_positions(&all)
            .into_iter()
            .map(|p| all[p].clone())
            .collect();
        prop_assert_eq!(&tail.events, &rolling, "rolling tail after chunk {}", n);
        prop_assert_eq!(
            run.gate_snapshot(key).await.unwrap(),
            whole.gate_snapshot(key).await.unwrap()
        );
        prop_assert_eq!(
            run.scoped_user_messages(key).await.unwrap(),
            compaction_core::scoped_user_messages(&all)
        );
    }
    Ok(())
}

/// Issue 29 item 2 on PostgreSQL: one-shot runs between ADK's appends continue the session's
/// checkpoint (the rows after the last known one in ADK's order) and answer as a whole read and
/// as the core's functions of the whole history; a row inserted out of ADK's order is noticed
/// (the session's row count) and answered by a whole read.
#[test]
fn one_shot_runs_continue_the_checkpoint_on_postgres() {
    let Some(url) = database_url("one_shot_runs_continue_the_checkpoint_on_postgres") else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let schema = runtime.block_on(schema_with(&url, "incremental", ADK_PG_DDL));
    let state = tempfile::tempdir().unwrap();
    let cases = AtomicU64::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(16));
    let cuts = proptest::collection::vec((0_usize..40, proptest::bool::weighted(0.2)), 1..5);
    let result = runner.run(&(history(30), cuts), |(events, mut cuts)| {
        cuts.sort();
        let key = key(cases.fetch_add(1, Ordering::Relaxed));
        runtime.block_on(incremental_case(
            &url,
            &schema,
            state.path(),
            &key,
            &events,
            &cuts,
        ))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
