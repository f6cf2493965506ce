//! Round trips, schema migrations and the typed errors, on real SQLite files in temp dirs.

mod common;

use std::time::Duration;

use common::{key, temp_store, ts};
use compaction_core::testing::EventFactory;
use compaction_core::{Event, Revision, SessionKey, assemble_context, gate_input};
use rusqlite::Connection;
use serde_json::{Map, json};
use session_store::blocking::SqliteStore;
use session_store::{Durability, OpenOptions, SCHEMA_VERSION, SessionStoreError};

/// One event of every kind the store meets, including fields it does not model.
fn every_kind() -> Vec<Event> {
    let mut f = EventFactory::new();
    let mut events = vec![f.model("g", "Hello — what shall we research? 🔋")];
    events.extend(f.research_turn("inv1", "What causes capacity fade?", "Lithium plating."));
    events.extend(f.conversational_turn("inv2", "And silicon?", "Pulverization."));
    let mut partial = f.model("inv2", "strea");
    partial.partial = Some(true);
    events.push(partial);
    let mut errored = f.model("inv3", "");
    errored.content = None;
    errored.error_code = Some("RESOURCE_EXHAUSTED".into());
    events.push(errored);
    let (s, e) = (events[1].timestamp, events[8].timestamp);
    events.push(f.compaction("inv4", s, e, "Rolling summary."));
    events.push(f.rewind("inv5", "inv3"));
    // Usage with every field, unmodelled actions, parts and top-level fields, awkward floats.
    let raw = json!({
        "id": "raw-1", "invocationId": "inv6", "author": "coordinator",
        "timestamp": 1_700_000_100.123_456_7,
        "content": {"role": "model", "parts": [
            {"text": "thinking", "thought": true},
            {"inline_data": {"mime_type": "image/png", "data": "AAAA"}},
            {"functionCall": {"id": "fc9", "name": "search_library",
                              "args": {"q": "x", "k": 0.1, "tiny": 1e-300, "big": 123_456.789_012_345_68}}}
        ]},
        "usageMetadata": {"promptTokenCount": 42_000, "candidatesTokenCount": 7,
                          "totalTokenCount": 42_007, "cachedContentTokenCount": 3},
        "actions": {"stateDelta": {"RESEARCH_TURN_HISTORY": {"inv1": {"conclude_output": "plating"}},
                                   "temp:scratch": 1},
                    "transfer_to_agent": "searcher"},
        "branch": "root.coordinator", "long_running_tool_ids": ["fc9"], "custom_metadata": null
    });
    events.push(serde_json::from_value(raw).expect("valid ADK event"));
    let scoped_compaction = f
        .compaction("inv7", ts(1.0), ts(2.0), "scoped summary")
        .with_scope("search_pipeline:fc9");
    events.push(scoped_compaction);
    events
}

fn append_all(store: &SqliteStore, key: &SessionKey, events: &[Event]) -> Revision {
    let mut revision = store.header(key).expect("header").revision;
    for event in events {
        revision = store.append_event(key, revision, event).expect("append");
    }
    revision
}

#[test]
fn every_event_kind_round_trips_and_state_delta_updates_state() {
    let (dir, store) = temp_store(Durability::Full);
    let key = key();
    let mut state = Map::new();
    state.insert("topic".into(), json!("batteries"));
    store.create_session(&key, state).unwrap();
    let events = every_kind();
    assert_eq!(
        append_all(&store, &key, &events),
        Revision(events.len() as u64)
    );
    drop(store);

    let store = SqliteStore::open(dir.path().join("sessions.db")).unwrap();
    let session = store.get_session(&key).unwrap();
    assert_eq!(session.events, events);
    assert_eq!(session.revision, Revision(events.len() as u64));
    assert_eq!(session.state["topic"], json!("batteries"));
    assert_eq!(
        session.state["RESEARCH_TURN_HISTORY"],
        json!({"inv1": {"conclude_output": "plating"}})
    );
    assert!(!session.state.contains_key("temp:scratch"));
    assert_eq!(store.header(&key).unwrap().gate, gate_input(&events));
    assert_eq!(store.load_context(&key).unwrap(), assemble_context(&events));
}

fn raw(path: &std::path::Path) -> Connection {
    Connection::open(path).unwrap()
}

#[test]
fn migrates_an_empty_file_and_a_new_path_and_reopens_without_migrating_again() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let fresh = dir.path().join("fresh.db");
    for path in [&empty, &fresh] {
        let store = SqliteStore::open(path).unwrap();
        store.create_session(&key(), Map::new()).unwrap();
        drop(store);
        let conn = raw(path);
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(conn);
        // Reopening keeps the data and the version.
        let store = SqliteStore::open(path).unwrap();
        assert_eq!(store.header(&key()).unwrap().revision, Revision(0));
    }
}

/// A file from schema version 1 counted a turn ending in an actions-only event (a callback's
/// state delta) as not completed; opening it with this build recounts every header from the
/// stored history, once, in the migration's transaction.
#[test]
fn opening_a_version_1_file_recounts_its_turn_headers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let mut f = compaction_core::testing::EventFactory::new();
    let mut events = Vec::new();
    for i in 0..3 {
        let inv = format!("inv{i}");
        events.extend(f.conversational_turn(&inv, "question", "answer"));
        let mut delta = f.model(&inv, "");
        delta.content = None;
        delta
            .actions
            .extra
            .insert("state_delta".into(), serde_json::json!({"k": i}));
        events.push(delta);
    }
    {
        let store = SqliteStore::open(&path).unwrap();
        store.create_session(&key(), Map::new()).unwrap();
        let mut revision = Revision(0);
        for e in &events {
            revision = store.append_event(&key(), revision, e).unwrap();
        }
        assert_eq!(
            store.header(&key()).unwrap().gate,
            compaction_core::gate_input(&events)
        );
    }
    // What a version-1 build left behind: the old count (the last turn still open) and the
    // old version.
    {
        let conn = raw(&path);
        conn.execute("UPDATE sessions SET closed_turns = 0, open_turn = 1", [])
            .unwrap();
        // Nor had it the recall index of migration 4.
        conn.execute_batch(
            "DROP TRIGGER recall_text_insert; DROP TRIGGER recall_text_delete; \
             DROP TABLE recall_fts; DROP TABLE recall_text; DROP INDEX events_turn_starts; \
             ALTER TABLE events DROP COLUMN turn_start;",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let header = store.header(&key()).unwrap();
    assert_eq!(header.gate, compaction_core::gate_input(&events));
    assert_eq!(header.gate.completed_turns_since_compaction, 3);
    let version: i64 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn refuses_a_future_schema_without_touching_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    {
        let conn = raw(&path);
        conn.execute_batch(
            "CREATE TABLE from_the_future (x); INSERT INTO from_the_future VALUES (1);",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    match &err {
        SessionStoreError::FutureSchema {
            path: p,
            found,
            supported,
        } => {
            assert_eq!(p, &path);
            assert_eq!(*found, SCHEMA_VERSION + 1);
            assert_eq!(*supported, SCHEMA_VERSION);
        }
        other => panic!("expected FutureSchema, got {other:?}"),
    }
    assert!(err.to_string().contains("future.db"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file was rewritten"
    );
    assert!(!dir.path().join("future.db-wal").exists());
}

#[test]
fn stale_not_found_duplicate_and_existing_sessions_are_typed_errors_that_write_nothing() {
    let (_dir, store) = temp_store(Durability::Normal);
    let key = key();
    let mut f = EventFactory::new();
    assert!(matches!(
        store.append_event(&key, Revision(0), &f.user("a", "q")),
        Err(SessionStoreError::NotFound { .. })
    ));
    store.create_session(&key, Map::new()).unwrap();
    let err = store.create_session(&key, Map::new()).unwrap_err();
    assert!(
        matches!(err, SessionStoreError::AlreadyExists { .. }),
        "{err:?}"
    );

    let first = f.user("a", "q");
    store.append_event(&key, Revision(0), &first).unwrap();
    let err = store
        .append_event(&key, Revision(0), &f.model("a", "r"))
        .unwrap_err();
    match &err {
        SessionStoreError::Stale {
            expected, actual, ..
        } => {
            assert_eq!((*expected, *actual), (Revision(0), Revision(1)));
        }
        other => panic!("expected Stale, got {other:?}"),
    }
    assert!(
        err.to_string().contains("zocrates/user-1/session-1"),
        "{err}"
    );
    let err = store.append_event(&key, Revision(1), &first).unwrap_err();
    assert!(
        matches!(err, SessionStoreError::DuplicateEvent { ref event_id, .. } if event_id == &first.id),
        "{err:?}"
    );
    let session = store.get_session(&key).unwrap();
    assert_eq!((session.revision, session.events.len()), (Revision(1), 1));
    assert_eq!(store.header(&key).unwrap().revision, Revision(1));
}

#[test]
fn a_non_sqlite_file_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = "These are research notes, not a database.\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, SessionStoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn a_database_corrupted_after_creation_is_reported_not_panicked_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        store.create_session(&key(), Map::new()).unwrap();
        let mut f = EventFactory::new();
        let events: Vec<Event> = (0..200)
            .flat_map(|i| {
                f.conversational_turn(&format!("i{i}"), &"q".repeat(200), &"a".repeat(200))
            })
            .collect();
        append_all(&store, &key(), &events);
    }
    // Closing the last connection checkpointed the WAL; now scribble over every page but the first.
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8192);
    for b in &mut bytes[4096..] {
        *b = 0xAB;
    }
    std::fs::write(&path, &bytes).unwrap();
    let result = SqliteStore::open(&path).and_then(|s| s.get_session(&key()));
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            SessionStoreError::Corrupt { .. } | SessionStoreError::Damaged { .. }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("sessions.db"), "{err}");
}

#[test]
fn a_lock_held_past_the_busy_timeout_is_a_locked_error_naming_file_and_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let store = SqliteStore::open_with(
        &path,
        OpenOptions::default().busy_timeout(Duration::from_millis(50)),
    )
    .unwrap();
    let key = key();
    store.create_session(&key, Map::new()).unwrap();
    let mut f = EventFactory::new();
    let event = f.user("a", "q");

    let mut other = raw(&path);
    let tx = other
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let err = store.append_event(&key, Revision(0), &event).unwrap_err();
    match &err {
        SessionStoreError::Locked { timeout, .. } => {
            assert_eq!(*timeout, Duration::from_millis(50))
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("sessions.db") && message.contains("zocrates/user-1/session-1"),
        "{message}"
    );
    assert!(message.contains(&event.id), "{message}");
    // WAL: the header can still be read while another writer holds the lock.
    assert_eq!(store.header(&key).unwrap().revision, Revision(0));
    tx.rollback().unwrap();
    assert_eq!(
        store.append_event(&key, Revision(0), &event).unwrap(),
        Revision(1)
    );
}

#[test]
fn an_undeserializable_event_names_file_session_revision_and_event() {
    let (dir, store) = temp_store(Durability::Normal);
    let key = key();
    store.create_session(&key, Map::new()).unwrap();
    let mut f = EventFactory::new();
    let events = f.conversational_turn("a", "q", "r");
    append_all(&store, &key, &events);
    raw(&dir.path().join("sessions.db"))
        .execute("UPDATE events SET body = '{\"id\": 5}' WHERE seq = 2", [])
        .unwrap();
    for err in [
        store.get_session(&key).unwrap_err(),
        store.load_context(&key).unwrap_err(),
    ] {
        match &err {
            SessionStoreError::CorruptEvent {
                revision, event_id, ..
            } => {
                assert_eq!((*revision, event_id.as_str()), (2, events[1].id.as_str()));
            }
            other => panic!("expected CorruptEvent, got {other:?}"),
        }
        let message = err.to_string();
        for needle in [
            "sessions.db",
            "zocrates/user-1/session-1",
            &events[1].id,
            "revision 2",
        ] {
            assert!(message.contains(needle), "{needle} missing from: {message}");
        }
    }
    // The header still answers: the fast exit never reads event bodies.
    assert_eq!(store.header(&key).unwrap().revision, Revision(2));
}

#[test]
fn undecodable_state_is_a_typed_error() {
    let (dir, store) = temp_store(Durability::Normal);
    store.create_session(&key(), Map::new()).unwrap();
    raw(&dir.path().join("sessions.db"))
        .execute("UPDATE sessions SET state = '[1, 2'", [])
        .unwrap();
    let err = store.get_session(&key()).unwrap_err();
    assert!(
        matches!(err, SessionStoreError::CorruptState { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("zocrates/user-1/session-1"),
        "{err}"
    );
}

#[test]
fn a_path_in_a_missing_directory_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("sessions.db");
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, SessionStoreError::Sqlite { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
}
