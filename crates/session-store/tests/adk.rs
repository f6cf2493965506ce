//! `AdkStore` on files laid out exactly as google-adk 2.13.0 creates them (the DDL below was
//! dumped from files ADK itself created), plus the refusals: ADK's legacy v0 layout, and the
//! native store opening an ADK file. The Python side (`cargo xtask adk-interop`) checks the
//! same behaviour against ADK's own services.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use compaction_core::testing::{
    EventFactory, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    Engine, Event, Outcome, SessionKey, SessionStore, StoreError, Timestamp, assemble_context,
};
use rusqlite::Connection;
use serde_json::{Map, Value, json};
use session_store::{
    AdkFlavor, AdkStore, Layout, OpenOptions, SessionStoreError, SqliteStore, detect_layout,
};

/// `DatabaseSessionService` schema v1, as SQLAlchemy creates it on SQLite (ADK 2.13.0).
const DATABASE_DDL: &str = r#"
CREATE TABLE adk_internal_metadata ("key" VARCHAR(128) NOT NULL, value VARCHAR(256) NOT NULL, PRIMARY KEY ("key"));
CREATE TABLE sessions (app_name VARCHAR(128) NOT NULL, user_id VARCHAR(128) NOT NULL, id VARCHAR(128) NOT NULL,
    state TEXT NOT NULL, create_time DATETIME NOT NULL, update_time DATETIME NOT NULL, PRIMARY KEY (app_name, user_id, id));
CREATE TABLE app_states (app_name VARCHAR(128) NOT NULL, state TEXT NOT NULL, update_time DATETIME NOT NULL, PRIMARY KEY (app_name));
CREATE TABLE user_states (app_name VARCHAR(128) NOT NULL, user_id VARCHAR(128) NOT NULL, state TEXT NOT NULL,
    update_time DATETIME NOT NULL, PRIMARY KEY (app_name, user_id));
CREATE TABLE events (id VARCHAR(128) NOT NULL, app_name VARCHAR(128) NOT NULL, user_id VARCHAR(128) NOT NULL,
    session_id VARCHAR(128) NOT NULL, invocation_id VARCHAR(256) NOT NULL, timestamp DATETIME NOT NULL, event_data TEXT,
    PRIMARY KEY (id, app_name, user_id, session_id),
    FOREIGN KEY(app_name, user_id, session_id) REFERENCES sessions (app_name, user_id, id) ON DELETE CASCADE);
CREATE INDEX idx_events_app_user_session_ts_id ON events (app_name, user_id, session_id, timestamp DESC, id DESC);
INSERT INTO adk_internal_metadata VALUES ('schema_version', '1');
"#;

/// `SqliteSessionService`'s schema (ADK 2.13.0, `CREATE_SCHEMA_SQL`).
const SQLITE_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS app_states (app_name TEXT PRIMARY KEY, state TEXT NOT NULL, update_time REAL NOT NULL);
CREATE TABLE IF NOT EXISTS user_states (app_name TEXT NOT NULL, user_id TEXT NOT NULL, state TEXT NOT NULL,
    update_time REAL NOT NULL, PRIMARY KEY (app_name, user_id));
CREATE TABLE IF NOT EXISTS sessions (app_name TEXT NOT NULL, user_id TEXT NOT NULL, id TEXT NOT NULL, state TEXT NOT NULL,
    create_time REAL NOT NULL, update_time REAL NOT NULL, PRIMARY KEY (app_name, user_id, id));
CREATE TABLE IF NOT EXISTS events (id TEXT NOT NULL, app_name TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL, timestamp REAL NOT NULL, event_data TEXT NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, id),
    FOREIGN KEY (app_name, user_id, session_id) REFERENCES sessions(app_name, user_id, id) ON DELETE CASCADE);
"#;

/// ADK's legacy v0 layout: one column per event field, pickled `actions`.
const V0_DDL: &str = r#"
CREATE TABLE sessions (app_name VARCHAR(128) NOT NULL, user_id VARCHAR(128) NOT NULL, id VARCHAR(128) NOT NULL,
    state TEXT NOT NULL, create_time DATETIME NOT NULL, update_time DATETIME NOT NULL, PRIMARY KEY (app_name, user_id, id));
CREATE TABLE events (id VARCHAR(128) NOT NULL, app_name VARCHAR(128) NOT NULL, user_id VARCHAR(128) NOT NULL,
    session_id VARCHAR(128) NOT NULL, invocation_id VARCHAR(256) NOT NULL, author VARCHAR(256) NOT NULL,
    actions BLOB NOT NULL, timestamp DATETIME NOT NULL, content TEXT, PRIMARY KEY (id, app_name, user_id, session_id));
"#;

fn adk_file(dir: &Path, name: &str, ddl: &str) -> PathBuf {
    let path = dir.join(name);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(ddl).unwrap();
    path
}

fn key() -> SessionKey {
    SessionKey::new("zocrates", "u1", "s1")
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The factory's events moved to start `offset` seconds from now (ADK sessions are created
/// "now", and an event must be later than the session's update_time).
fn from_now(events: Vec<Event>, offset: f64) -> Vec<Event> {
    let base = now() + offset - 1_700_000_000.0;
    events
        .into_iter()
        .map(|mut e| {
            e.timestamp = Timestamp::new(e.timestamp.seconds() + base).unwrap();
            e
        })
        .collect()
}

fn flavors(dir: &Path) -> Vec<(AdkFlavor, PathBuf)> {
    vec![
        (
            AdkFlavor::Database,
            adk_file(dir, "database.db", DATABASE_DDL),
        ),
        (AdkFlavor::Sqlite, adk_file(dir, "sqlite.db", SQLITE_DDL)),
    ]
}

#[test]
fn detects_every_layout_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    assert_eq!(detect_layout(&missing).unwrap(), Layout::Empty);
    assert!(!missing.exists(), "detection must not create the file");
    let native = dir.path().join("native.db");
    SqliteStore::open(&native).unwrap();
    assert_eq!(detect_layout(&native).unwrap(), Layout::Native);
    let files = flavors(dir.path());
    assert_eq!(detect_layout(&files[0].1).unwrap(), Layout::AdkDatabase);
    assert_eq!(detect_layout(&files[1].1).unwrap(), Layout::AdkSqlite);
    let v0 = adk_file(dir.path(), "v0.db", V0_DDL);
    assert_eq!(detect_layout(&v0).unwrap(), Layout::AdkLegacyV0);
    let other = adk_file(dir.path(), "other.db", "CREATE TABLE notes (body TEXT);");
    let err = detect_layout(&other).unwrap_err();
    assert!(
        matches!(err, SessionStoreError::ForeignDatabase { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("notes"), "{err}");
}

#[test]
fn a_legacy_v0_file_is_refused_naming_adks_migration_command() {
    let dir = tempfile::tempdir().unwrap();
    let v0 = adk_file(dir.path(), "v0.db", V0_DDL);
    let bytes = std::fs::read(&v0).unwrap();
    let err = AdkStore::open(&v0).unwrap_err();
    assert!(
        matches!(err, SessionStoreError::AdkLegacySchema { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("adk migrate session"), "{message}");
    assert!(message.contains("v0.db"), "{message}");
    let native = SqliteStore::open(&v0).unwrap_err();
    assert!(
        native.to_string().contains("adk migrate session"),
        "{native}"
    );
    assert_eq!(std::fs::read(&v0).unwrap(), bytes, "the file was modified");
}

#[test]
fn the_native_store_refuses_an_adk_database_and_leaves_it_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for (_, path) in flavors(dir.path()) {
        let store = AdkStore::open(&path).unwrap();
        store.create_session(&key(), Map::new()).unwrap();
        drop(store);
        let bytes = std::fs::read(&path).unwrap();
        let err = SqliteStore::open(&path).unwrap_err();
        assert!(
            matches!(err, SessionStoreError::ForeignDatabase { .. }),
            "{err}"
        );
        let message = err.to_string();
        assert!(message.contains("Google ADK session database"), "{message}");
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "the file was modified"
        );
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        assert!(!wal.exists(), "the journal mode was changed");
        // And the ADK store refuses a native file.
        let native = dir.path().join("native.db");
        SqliteStore::open(&native).unwrap();
        let err = AdkStore::open(&native).unwrap_err();
        assert!(
            matches!(err, SessionStoreError::NotAdkDatabase { .. }),
            "{err}"
        );
    }
}

#[test]
fn events_round_trip_with_adks_revision_and_merged_state() {
    let dir = tempfile::tempdir().unwrap();
    for (flavor, path) in flavors(dir.path()) {
        let store = AdkStore::open(&path).unwrap();
        assert_eq!(store.flavor(), flavor);
        let mut state = Map::new();
        state.insert("topic".into(), json!("SEI"));
        let created = store.create_session(&key(), state).unwrap();
        assert_eq!(store.revision(&key()).unwrap(), created.revision);
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "INSERT OR REPLACE INTO app_states (app_name, state, update_time) VALUES ('zocrates', '{\"k\": 1}', 0)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT OR REPLACE INTO user_states (app_name, user_id, state, update_time) VALUES ('zocrates', 'u1', '{\"name\": \"Ada\"}', 0)",
            [],
        )
        .unwrap();
        let mut f = EventFactory::new();
        let mut events = f.research_turn("inv1", "What limits SEI growth?", "Synthesis.");
        events.extend(f.conversational_turn("inv2", "And cracking?", "Stress."));
        events.push(f.rewind("inv3", "inv2"));
        let events = from_now(events, 1.0);
        let mut revision = created.revision;
        for e in &events {
            let next = store.append_event(&key(), revision, e).unwrap();
            // Python's `datetime.fromtimestamp` rounding can differ from a plain
            // `round(ts * 1e6)` by one microsecond.
            let micros = (e.timestamp.seconds() * 1e6).round() as u64;
            assert!(
                next.0.abs_diff(micros) <= 1,
                "{flavor:?}: the revision is update_time in microseconds ({next} vs {micros})"
            );
            assert_eq!(store.revision(&key()).unwrap(), next);
            assert!(next > revision);
            revision = next;
        }
        let session = store.get_session(&key()).unwrap();
        assert_eq!(session.events, events, "{flavor:?}");
        assert_eq!(session.revision, revision);
        assert_eq!(session.state["topic"], json!("SEI"));
        assert_eq!(session.state["app:k"], json!(1));
        assert_eq!(session.state["user:name"], json!("Ada"));
        // The stored columns use the flavor's encoding.
        let (kind, ts): (String, String) = conn
            .query_row(
                "SELECT typeof(update_time), CAST(update_time AS TEXT) FROM sessions",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        match flavor {
            AdkFlavor::Database => {
                assert_eq!(kind, "text");
                assert_eq!(ts.len(), "YYYY-MM-DD HH:MM:SS.ffffff".len(), "{ts}");
            }
            _ => assert_eq!(kind, "real"),
        }
        // The event JSON is snake_case, ADK's own spelling.
        let body: String = conn
            .query_row(
                "SELECT event_data FROM events WHERE id = ?1",
                [&events[0].id],
                |r| r.get(0),
            )
            .unwrap();
        let body: Value = serde_json::from_str(&body).unwrap();
        assert!(body.get("invocation_id").is_some(), "{body}");
    }
}

#[test]
fn appends_are_checked_against_update_time_and_adks_event_shape() {
    let dir = tempfile::tempdir().unwrap();
    for (flavor, path) in flavors(dir.path()) {
        let store = AdkStore::open(&path).unwrap();
        let created = store.create_session(&key(), Map::new()).unwrap();
        let mut f = EventFactory::new();
        let events = from_now(f.conversational_turn("inv1", "q", "a"), 1.0);
        let r1 = store
            .append_event(&key(), created.revision, &events[0])
            .unwrap();
        let stale = store.append_event(&key(), created.revision, &events[1]);
        assert!(
            matches!(stale, Err(SessionStoreError::Stale { expected, actual, .. }) if expected == created.revision && actual == r1),
            "{flavor:?}: {stale:?}"
        );
        let mut same_id = events[1].clone();
        same_id.id = events[0].id.clone();
        let dup = store.append_event(&key(), r1, &same_id);
        assert!(
            matches!(dup, Err(SessionStoreError::DuplicateEvent { .. })),
            "{dup:?}"
        );
        let mut earlier = events[1].clone();
        earlier.timestamp = events[0].timestamp;
        let err = store.append_event(&key(), r1, &earlier).unwrap_err();
        assert!(
            err.to_string()
                .contains("not after the session's update_time"),
            "{err}"
        );
        let mut foreign = events[1].clone();
        foreign
            .actions
            .extra
            .insert("engine_private".into(), json!(1));
        let err = store.append_event(&key(), r1, &foreign).unwrap_err();
        assert!(err.to_string().contains("custom_metadata"), "{err}");
        let mut delta = events[1].clone();
        delta
            .actions
            .extra
            .insert("stateDelta".into(), json!({"x": 1}));
        assert!(store.append_event(&key(), r1, &delta).is_err());
        // Nothing of the refused appends was written.
        assert_eq!(store.get_session(&key()).unwrap().events.len(), 1);
        assert_eq!(store.revision(&key()).unwrap(), r1);
        let missing = SessionKey::new("zocrates", "u1", "nope");
        assert!(matches!(
            store.append_event(&missing, r1, &events[1]),
            Err(SessionStoreError::NotFound { .. })
        ));
    }
}

#[test]
fn an_append_waits_for_a_writer_holding_the_lock_then_fails_past_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = flavors(dir.path()).remove(0);
    let store = AdkStore::open_with(
        &path,
        OpenOptions::default().busy_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let created = store.create_session(&key(), Map::new()).unwrap();
    let mut f = EventFactory::new();
    let events = from_now(f.conversational_turn("inv1", "q", "a"), 1.0);

    // Another writer (ADK mid-append) holds the write lock past the timeout.
    let mut other = Connection::open(&path).unwrap();
    let tx = other
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let err = store
        .append_event(&key(), created.revision, &events[0])
        .unwrap_err();
    assert!(matches!(err, SessionStoreError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("database.db"), "{err}");

    // Within the timeout, the append queues behind the writer and then succeeds.
    let patient = AdkStore::open(&path).unwrap();
    let event = events[0].clone();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let appender = std::thread::spawn(move || {
        started_tx.send(()).unwrap();
        patient.append_event(&key(), created.revision, &event)
    });
    started_rx.recv().unwrap();
    tx.commit().unwrap();
    let revision = appender.join().unwrap().unwrap();
    assert!(revision > created.revision);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_compacts_an_adk_session_through_the_port() {
    let dir = tempfile::tempdir().unwrap();
    for (flavor, path) in flavors(dir.path()) {
        let store = AdkStore::open(&path).unwrap();
        let created = store.create_session(&key(), Map::new()).unwrap();
        let port: Arc<dyn SessionStore> = Arc::new(store.clone());
        let mut f = EventFactory::new();
        let mut events = Vec::new();
        for turn in 0..6_u64 {
            let inv = format!("inv{turn}");
            let mut turn_events = if turn % 2 == 0 {
                f.research_turn(&inv, &format!("question {turn}"), "synthesis")
            } else {
                f.conversational_turn(&inv, &format!("question {turn}"), "answer")
            };
            let last = turn_events.len() - 1;
            turn_events[last] = turn_events[last]
                .clone()
                .with_prompt_tokens(40_000 + 10_000 * turn);
            events.extend(turn_events);
        }
        let events = from_now(events, 1.0);
        let mut revision = created.revision;
        for e in &events {
            revision = port.append(&key(), revision, e.clone()).await.unwrap();
        }
        let clock_start = (now() + 3_600.0) as u64;
        let engine = Engine::builder(
            Arc::new(ScriptedDecisionModel::constant(0.9)),
            Arc::new(RecordingSummarizer::new()),
            port.clone(),
            Arc::new(SteppingClock::starting_at(clock_start)),
            Arc::new(SequentialIds::default()),
        )
        .build()
        .unwrap();
        let outcome = engine.evaluate_and_compact(&key()).await;
        let Outcome::Compressed(compaction) = &outcome else {
            panic!("{flavor:?}: {outcome:?}");
        };
        let session = store.get_session(&key()).unwrap();
        assert_eq!(session.revision, compaction.revision);
        let stored = session.events.last().unwrap();
        assert_eq!(stored, &compaction.event, "{flavor:?}");
        assert!(stored.extra.contains_key("custom_metadata"));
        assert!(stored.content.is_none() && stored.is_user());
        assert!(assemble_context(&session.events).summary().is_some());
        // A writer that read before the compaction is now stale.
        let late = from_now(vec![f.user("late", "late")], 7_200.0).remove(0);
        assert!(matches!(
            port.append(&key(), revision, late).await,
            Err(StoreError::Stale { .. })
        ));
    }
}

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Step {
    Conversational,
    Research,
    Compaction,
    Rewind(usize),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => Just(Step::Conversational),
        3 => Just(Step::Research),
        1 => Just(Step::Compaction),
        1 => (0_usize..8).prop_map(Step::Rewind),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// For generated histories (turns, scoped pipelines, compactions, rewinds) on either
    /// layout: the store gives back exactly the appended events in order, every revision is
    /// the update_time ADK would compare and moves forward, and the gate figures and assembled
    /// context computed from the loaded session equal those of the appended history.
    #[test]
    fn loads_what_was_appended(steps in proptest::collection::vec(step(), 1..12), database in proptest::bool::ANY) {
        let dir = tempfile::tempdir().unwrap();
        let path = if database {
            adk_file(dir.path(), "p.db", DATABASE_DDL)
        } else {
            adk_file(dir.path(), "p.db", SQLITE_DDL)
        };
        let store = AdkStore::open(&path).unwrap();
        let created = store.create_session(&key(), Map::new()).unwrap();
        let mut f = EventFactory::new();
        let mut events: Vec<Event> = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let inv = format!("inv{i}");
            match s {
                Step::Conversational => events.extend(f.conversational_turn(&inv, &format!("q{i}"), "a")),
                Step::Research => events.extend(f.research_turn(&inv, &format!("q{i}"), "s")),
                Step::Compaction => {
                    if let (Some(first), Some(last)) = (events.first(), events.last()) {
                        let (start, end) = (first.timestamp, last.timestamp);
                        events.push(f.compaction(&inv, start, end, "summary"));
                    }
                }
                Step::Rewind(back) => {
                    let target = format!("inv{}", i.saturating_sub(back + 1));
                    events.push(f.rewind(&inv, &target));
                }
            }
        }
        let events = from_now(events, 1.0);
        let mut revision = created.revision;
        for e in &events {
            let next = store.append_event(&key(), revision, e).unwrap();
            proptest::prop_assert!(next > revision);
            revision = next;
        }
        let session = store.get_session(&key()).unwrap();
        proptest::prop_assert_eq!(&session.events, &events);
        proptest::prop_assert_eq!(session.revision, revision);
        proptest::prop_assert_eq!(
            compaction_core::gate_input(&session.events),
            compaction_core::gate_input(&events)
        );
        proptest::prop_assert_eq!(assemble_context(&session.events), assemble_context(&events));
    }
}
