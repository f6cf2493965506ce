//! Lossless recall on `PostgresStore` against a real PostgreSQL, with compaction-core's scan
//! rules as the oracle: for generated histories the `tsvector` search finds exactly the hits
//! the scan finds (turns, coverage, snippets, texts), every compaction and turn range expands
//! to the same events verbatim, and `turns_before` counts as the scan does. Also: migration 2
//! building the index for an existing database (in batches, across sessions) and refusing a
//! body that does not parse, query text that is `tsquery` syntax, an event too large for one
//! vector, and the errors for unknown compactions, ranges and sessions.
//!
//! Needs `COMPACTION_TEST_POSTGRES_URL` (`cargo xtask pg start`); without it each test prints
//! a SKIPPED line and passes, except under `CI=true`.
#![cfg(feature = "postgres")]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::history;
use common::pg::{admin, unique_schema};
use common::recall::{TURN_RANGES, by_id, folded, queries, with_words};
use compaction_core::store_support::scan::{self, expand_compaction, expand_turns, search_history};
use compaction_core::store_support::{latest_view_timestamp, timestamp_may_follow};
use compaction_core::testing::EventFactory;
use compaction_core::{
    Event, ExpandError, RecallQuery, Revision, SessionKey, SessionStore, StoreError,
};
use proptest::prelude::*;
use serde_json::Map;
use session_store::postgres::POSTGRES_SCHEMA_VERSION;
use session_store::{PostgresOptions, PostgresStore};
use test_data::pg::database_url;

async fn store_in(url: &str, schema: &str) -> PostgresStore {
    PostgresStore::connect_with(url, PostgresOptions::default().schema(schema))
        .await
        .expect("connect the PostgreSQL store")
}

fn key(n: u64) -> SessionKey {
    SessionKey::new("zocrates", "user-1", format!("session-{n}"))
}

/// Appends what the store accepts; returns the accepted events.
async fn append_all(store: &PostgresStore, key: &SessionKey, events: &[Event]) -> Vec<Event> {
    store.create_session(key, Map::new()).await.unwrap();
    let mut accepted: Vec<Event> = Vec::new();
    for event in events {
        if timestamp_may_follow(latest_view_timestamp(&accepted), event) {
            let revision = Revision(accepted.len() as u64);
            store.append(key, revision, event.clone()).await.unwrap();
            accepted.push(event.clone());
        }
    }
    accepted
}

/// Every query, compaction, turn range and turn count answers as the scan does.
async fn assert_agrees(
    store: &PostgresStore,
    key: &SessionKey,
    events: &[Event],
) -> Result<(), TestCaseError> {
    for q in queries() {
        let got = by_id(store.search(key, &q, 100).await.unwrap());
        let want = by_id(search_history(events, &q, 100));
        prop_assert_eq!(got, want, "query {:?}", q);
    }
    for c in events.iter().filter(|e| e.compaction().is_some()) {
        let got = store.expand(key, &c.id).await;
        match (got, expand_compaction(events, &c.id)) {
            (Ok(got), Ok(want)) => prop_assert_eq!(got, want, "compaction {}", c.id),
            (Err(StoreError::Expand { error, .. }), Err(want)) => prop_assert_eq!(error, want),
            (got, want) => prop_assert!(false, "compaction {}: {:?} vs {:?}", c.id, got, want),
        }
    }
    for (first, last) in TURN_RANGES {
        let want = expand_turns(events, first, last);
        match store.expand_turns(key, first, last).await {
            Ok(got) => prop_assert_eq!(Ok(got), want, "turns {}..{}", first, last),
            Err(StoreError::Expand { error, .. }) => prop_assert_eq!(Err(error), want),
            Err(other) => prop_assert!(false, "{}", other),
        }
    }
    for e in events {
        let got = store.turns_before(key, e.timestamp).await.unwrap();
        prop_assert_eq!(got, Some(scan::turns_before(events, e.timestamp)));
    }
    Ok(())
}

/// The SQLite store's recall oracle, on PostgreSQL.
#[test]
fn postgres_recall_matches_the_scan() {
    let Some(url) = database_url("postgres_recall_matches_the_scan") else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime.block_on(store_in(&url, &unique_schema("t", "recall")));
    let cases = AtomicU64::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(32));
    let strategy = (
        history(40),
        proptest::collection::vec(proptest::collection::vec(0usize..6, 0..4), 1..30),
    );
    let result = runner.run(&strategy, |(events, picks)| {
        let key = key(cases.fetch_add(1, Ordering::Relaxed));
        runtime.block_on(async {
            let accepted = append_all(&store, &key, &with_words(events, &picks)).await;
            assert_agrees(&store, &key, &accepted).await
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// What a version-1 build left behind: no recall index, no turn-start column.
async fn downgrade_to_version_1(url: &str, schema: &str) {
    admin(url)
        .await
        .batch_execute(&format!(
            "SET search_path = {schema}; DROP INDEX events_recall; DROP INDEX events_turn_starts; \
             ALTER TABLE events DROP COLUMN recall, DROP COLUMN turn_start; \
             UPDATE schema_version SET version = 1;"
        ))
        .await
        .unwrap();
}

/// A database written before the index gets it from the migration: every stored event is
/// indexed (more than one backfill batch, over several sessions), and search, expansion and
/// turn counts answer as the scan does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_builds_the_index_for_an_existing_database() {
    let Some(url) = database_url("the_migration_builds_the_index_for_an_existing_database") else {
        return;
    };
    let schema = unique_schema("t", "recall_migrate");
    let store = store_in(&url, &schema).await;
    let mut f = EventFactory::new();
    let (events, id) = folded(&mut f);
    let small = append_all(&store, &key(0), &events).await;
    let mut long = Vec::new();
    for n in 0..110 {
        long.extend(f.research_turn(&format!("r{n}"), &format!("plating q{n}"), "anode"));
    }
    let long = append_all(&store, &key(1), &long).await;
    drop(store);
    downgrade_to_version_1(&url, &schema).await;

    let store = store_in(&url, &schema).await;
    let client = admin(&url).await;
    let version: i64 = client
        .query_one(&format!("SELECT version FROM {schema}.schema_version"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, POSTGRES_SCHEMA_VERSION);
    let indexes: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = $1 \
             AND indexname IN ('events_recall', 'events_turn_starts')",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexes, 2);
    let q = RecallQuery::parse("plating").unwrap();
    assert_eq!(
        by_id(store.search(&key(0), &q, 10).await.unwrap()),
        by_id(search_history(&small, &q, 10))
    );
    assert_eq!(
        store.expand(&key(0), &id).await.unwrap(),
        expand_compaction(&small, &id).unwrap()
    );
    assert_agrees(&store, &key(1), &long).await.unwrap();
    assert_eq!(long.len(), 660, "more than one backfill batch");
}

/// A stored body that does not parse fails the migration, naming the event, and leaves the
/// database at version 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_parse_fails_the_migration_and_writes_nothing() {
    let Some(url) = database_url("a_body_that_does_not_parse_fails_the_migration") else {
        return;
    };
    let schema = unique_schema("t", "recall_corrupt");
    let store = store_in(&url, &schema).await;
    append_all(&store, &key(0), &folded(&mut EventFactory::new()).0).await;
    drop(store);
    downgrade_to_version_1(&url, &schema).await;
    let client = admin(&url).await;
    client
        .execute(
            &format!("UPDATE {schema}.events SET body = '{{not json' WHERE seq = 3"),
            &[],
        )
        .await
        .unwrap();
    let refused = PostgresStore::connect_with(&url, PostgresOptions::default().schema(&schema))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("session-0")
            && refused.contains("revision 3")
            && refused.contains("not a valid event"),
        "{refused}"
    );
    let version: i64 = client
        .query_one(&format!("SELECT version FROM {schema}.schema_version"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 1);
}

/// `tsquery` and FTS syntax in a query is searched as words; never an SQL error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_syntax_is_searched_as_words() {
    let Some(url) = database_url("query_syntax_is_searched_as_words") else {
        return;
    };
    let store = store_in(&url, &unique_schema("t", "recall_syntax")).await;
    let mut f = EventFactory::new();
    let mut events = f.conversational_turn(
        "i1",
        "Is NEAR-field \"plating\" real*? It's 4.5 C at /tmp/x_y, see a@b.org",
        "Maybe.",
    );
    events.extend(f.conversational_turn("i2", "unrelated", "answer"));
    let events = append_all(&store, &key(0), &events).await;
    for text in [
        r#""plating"*"#,
        "NEAR plating",
        "-plating",
        "plating NEAR(field, real)",
        "real*",
        "plating:* & !field | (real)",
        "it's",
        r"plating\ 'real'",
        "4.5",
        "tmp x_y",
        "b.org",
    ] {
        let q = RecallQuery::parse(text).unwrap();
        let hits = store.search(&key(0), &q, 10).await.unwrap();
        assert_eq!(hits.len(), 1, "{text}: {hits:?}");
        assert_eq!(hits[0].event_id, events[0].id);
        assert_eq!(hits, search_history(&events, &q, 10), "{text}");
    }
}

/// An event with more distinct words than one vector holds is appended, and a word past the
/// cut is still found (the session is scanned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_too_large_for_one_vector_is_still_found() {
    let Some(url) = database_url("an_event_too_large_for_one_vector_is_still_found") else {
        return;
    };
    let store = store_in(&url, &unique_schema("t", "recall_large")).await;
    let mut f = EventFactory::new();
    let huge: Vec<String> = (0..70_000).map(|i| format!("word{i:05}x")).collect();
    let mut events = f.conversational_turn("i1", "dump", &huge.join(" "));
    events.extend(f.conversational_turn("i2", "plating", "ok"));
    let events = append_all(&store, &key(0), &events).await;
    for text in ["word00001x", "word69999x", "plating"] {
        let q = RecallQuery::parse(text).unwrap();
        let hits = store.search(&key(0), &q, 10).await.unwrap();
        assert_eq!(hits.len(), 1, "{text}");
        assert_eq!(hits, search_history(&events, &q, 10), "{text}");
    }
}

/// Unknown compactions, ranges outside the session and unknown sessions are named errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_references_are_named_errors() {
    let Some(url) = database_url("bad_references_are_named_errors") else {
        return;
    };
    let store = store_in(&url, &unique_schema("t", "recall_bad")).await;
    let (events, id) = folded(&mut EventFactory::new());
    append_all(&store, &key(0), &events).await;
    let hits = store
        .search(&key(0), &RecallQuery::parse("PLATING").unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 3, "{hits:#?}");
    assert!(
        hits.iter()
            .all(|h| h.covered_by.as_deref() == Some(id.as_str()))
    );
    assert!(hits.iter().any(|h| h.snippet.contains("**plating**")));
    let unknown = store.expand(&key(0), "no-such-id").await.unwrap_err();
    assert!(matches!(
        &unknown,
        StoreError::Expand { error: ExpandError::UnknownCompaction(id), .. } if id == "no-such-id"
    ));
    let range = store.expand_turns(&key(0), 3, 9).await.unwrap_err();
    assert!(range.to_string().contains("has 3 turn(s)"), "{range}");
    let missing = store
        .search(&key(9), &RecallQuery::parse("plating").unwrap(), 10)
        .await
        .unwrap_err();
    assert!(matches!(missing, StoreError::NotFound(_)), "{missing:?}");
    let missing = store.turns_before(&key(9), events[0].timestamp).await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
}
