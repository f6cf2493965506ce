//! Lossless recall on real SQLite files, against compaction-core's scan rules as the oracle:
//! for generated histories (compactions, scoped events, rewinds, partial chunks) the FTS5
//! search finds exactly the hits the scan finds, with the same turns, coverage, snippets and
//! texts, and every compaction and turn range expands to the same events verbatim. Also: the
//! migration that builds the index for an existing file, a read-only open of a file without
//! it, and deletion keeping the index whole.

mod common;

use common::recall::{TURN_RANGES, by_id, folded, queries, with_words};
use common::{history, key, temp_store};
use compaction_core::store_support::scan::{expand_compaction, expand_turns, search_history};
use compaction_core::store_support::{latest_view_timestamp, timestamp_may_follow};
use compaction_core::testing::EventFactory;
use compaction_core::{Event, ExpandError, RecallQuery, Revision, SessionKey};
use proptest::prelude::*;
use rusqlite::Connection;
use session_store::blocking::SqliteStore;
use session_store::{Durability, OpenOptions, SCHEMA_VERSION, SessionStoreError};

/// Appends what the store accepts; returns the accepted events.
fn append_all(store: &SqliteStore, key: &SessionKey, events: &[Event]) -> Vec<Event> {
    store.create_session(key, Default::default()).unwrap();
    let mut accepted: Vec<Event> = Vec::new();
    for event in events {
        if timestamp_may_follow(latest_view_timestamp(&accepted), event) {
            let revision = Revision(accepted.len() as u64);
            store.append_event(key, revision, event).unwrap();
            accepted.push(event.clone());
        }
    }
    accepted
}

/// Every query, compaction and turn range answers as the scan of the whole history does.
fn assert_agrees(
    store: &SqliteStore,
    key: &SessionKey,
    events: &[Event],
) -> Result<(), TestCaseError> {
    for q in queries() {
        let got = by_id(store.search(key, &q, 100).unwrap());
        let want = by_id(search_history(events, &q, 100));
        prop_assert_eq!(got, want, "query {:?}", q);
    }
    for c in events.iter().filter(|e| e.compaction().is_some()) {
        let got = store.expand(key, &c.id).map_err(|e| e.to_string());
        let want = expand_compaction(events, &c.id).map_err(|e| e.to_string());
        prop_assert_eq!(got.is_ok(), want.is_ok(), "{:?} vs {:?}", got, want);
        if let (Ok(got), Ok(want)) = (store.expand(key, &c.id), expand_compaction(events, &c.id)) {
            prop_assert_eq!(got, want, "compaction {}", c.id);
        }
    }
    for (first, last) in TURN_RANGES {
        let want = expand_turns(events, first, last);
        match store.expand_turns(key, first, last) {
            Ok(got) => prop_assert_eq!(Ok(got), want, "turns {}..{}", first, last),
            Err(SessionStoreError::Expand { error, .. }) => prop_assert_eq!(Err(error), want),
            Err(other) => prop_assert!(false, "{}", other),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn sqlite_recall_matches_the_scan(
        events in history(40),
        picks in proptest::collection::vec(proptest::collection::vec(0usize..6, 0..4), 1..30),
    ) {
        let (_dir, store) = temp_store(Durability::Normal);
        let key = key();
        let accepted = append_all(&store, &key, &with_words(events, &picks));
        assert_agrees(&store, &key, &accepted)?;
    }
}

#[test]
fn hits_on_folded_turns_name_the_summary_and_expand_verbatim() {
    let (_dir, store) = temp_store(Durability::Normal);
    let key = key();
    let (events, id) = folded(&mut EventFactory::new());
    let accepted = append_all(&store, &key, &events);
    let hits = store
        .search(&key, &RecallQuery::parse("PLATING").unwrap(), 10)
        .unwrap();
    assert_eq!(hits.len(), 3, "{hits:#?}");
    assert!(
        hits.iter()
            .all(|h| h.covered_by.as_deref() == Some(id.as_str()))
    );
    assert!(hits.iter().any(|h| h.snippet.contains("**plating**")));
    let expanded = store.expand(&key, &id).unwrap();
    let covered: Vec<&Event> = accepted[..8].iter().filter(|e| e.is_unscoped()).collect();
    assert_eq!(
        expanded.iter().map(|r| &r.event).collect::<Vec<_>>(),
        covered
    );
    let unknown = store.expand(&key, "no-such-id").unwrap_err();
    assert!(matches!(
        &unknown,
        SessionStoreError::Expand { error: ExpandError::UnknownCompaction(id), .. } if id == "no-such-id"
    ));
    assert!(
        unknown
            .to_string()
            .contains("no compaction event \"no-such-id\""),
        "{unknown}"
    );
    let range = store.expand_turns(&key, 3, 9).unwrap_err();
    assert!(range.to_string().contains("has 3 turn(s)"), "{range}");
}

fn raw(path: &std::path::Path) -> Connection {
    Connection::open(path).unwrap()
}

/// What a version-3 build left behind: no recall index, no turn-start column.
fn downgrade_to_version_3(path: &std::path::Path) {
    let conn = raw(path);
    conn.execute_batch(
        "DROP TRIGGER recall_text_insert; DROP TRIGGER recall_text_delete; \
         DROP TABLE recall_fts; DROP TABLE recall_text; DROP INDEX events_turn_starts; \
         ALTER TABLE events DROP COLUMN turn_start; PRAGMA user_version = 3;",
    )
    .unwrap();
}

#[test]
fn a_version_3_file_is_searched_by_scanning_read_only_and_indexed_by_a_writing_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.db");
    let key = key();
    let (events, id) = folded(&mut EventFactory::new());
    let accepted = append_all(&SqliteStore::open(&path).unwrap(), &key, &events);
    downgrade_to_version_3(&path);
    let q = RecallQuery::parse("plating").unwrap();
    let want = by_id(search_history(&accepted, &q, 10));

    let reader = SqliteStore::open_read_only(&path, OpenOptions::default()).unwrap();
    assert_eq!(by_id(reader.search(&key, &q, 10).unwrap()), want);
    assert_eq!(
        reader.expand(&key, &id).unwrap(),
        expand_compaction(&accepted, &id).unwrap()
    );
    drop(reader);
    let version: i64 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 3, "a read-only open migrates nothing");

    let writer = SqliteStore::open(&path).unwrap();
    assert_eq!(by_id(writer.search(&key, &q, 10).unwrap()), want);
    assert_eq!(
        writer.expand_turns(&key, 1, 3).unwrap(),
        expand_turns(&accepted, 1, 3).unwrap()
    );
    let version: i64 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn deleting_a_session_deletes_its_index_rows_and_keeps_the_index_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let store = SqliteStore::open(&path).unwrap();
    let mut f = EventFactory::new();
    let other = SessionKey::new("zocrates", "user-1", "other");
    append_all(&store, &key(), &folded(&mut f).0);
    append_all(&store, &other, &folded(&mut f).0);
    assert!(store.delete_session(&key()).unwrap());
    let q = RecallQuery::parse("plating").unwrap();
    assert_eq!(store.search(&other, &q, 10).unwrap().len(), 3);
    assert!(matches!(
        store.search(&key(), &q, 10),
        Err(SessionStoreError::NotFound { .. })
    ));
    let conn = raw(&path);
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM recall_text", [], |r| r.get(0))
        .unwrap();
    let indexed: i64 = conn
        .query_row(
            "SELECT count(*) FROM recall_fts WHERE recall_fts MATCH 'plating'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((rows, indexed), (10, 3));
    conn.execute(
        "INSERT INTO recall_fts (recall_fts, rank) VALUES ('integrity-check', 1)",
        [],
    )
    .unwrap();
}

#[test]
fn fts_syntax_in_a_query_is_searched_as_words() {
    let (_dir, store) = temp_store(Durability::Normal);
    let key = key();
    let mut f = EventFactory::new();
    let mut events = f.conversational_turn("i1", "Is NEAR-field \"plating\" real*?", "Maybe.");
    events.extend(f.conversational_turn("i2", "unrelated", "answer"));
    append_all(&store, &key, &events);
    for text in [
        r#""plating"*"#,
        "NEAR plating",
        "-plating",
        "plating NEAR(field, real)",
        "real*",
    ] {
        let q = RecallQuery::parse(text).unwrap();
        let hits = store.search(&key, &q, 10).unwrap();
        assert_eq!(hits.len(), 1, "{text}: {hits:?}");
        assert_eq!(hits[0].event_id, events[0].id);
    }
}
