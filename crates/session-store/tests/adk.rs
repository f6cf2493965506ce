//! `AdkStore` on files laid out exactly as google-adk 2.13.0 creates them (the DDL below was
//! dumped from files ADK itself created), plus the refusals: ADK's legacy v0 layout, and the
//! native store opening an ADK file. The Python side (`cargo xtask adk-interop`) checks the
//! same behaviour against ADK's own services.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use compaction_core::testing::{
    EventFactory, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    Engine, Event, Outcome, SessionKey, SessionStore, StoreError, Timestamp, assemble_context,
    live_tail,
};
use rusqlite::Connection;
use serde_json::{Map, Value, json};
use session_store::blocking::{AdkStore, SqliteStore};
use session_store::{AdkFlavor, Layout, OpenOptions, SessionStoreError, detect_layout};

use common::adk::{DATABASE_DDL, SQLITE_DDL, adk_file, key, now};

/// ADK's legacy v0 layout: one column per event field, pickled `actions`.
const V0_DDL: &str = include_str!("fixtures/adk-legacy-v0.sql");

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
            matches!(err, SessionStoreError::NonIncreasingTimestamp { .. }),
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
        let port: Arc<dyn SessionStore> = Arc::new(session_store::AdkStore::from(store.clone()));
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

/// Right after a compaction that retains nothing, no event after the live summary reports
/// prompt tokens: the gate snapshot still gives the whole history's latest coordinator figure,
/// as `gate_input` does, and the live tail holds only the compaction.
#[test]
fn the_gate_snapshot_reads_prompt_tokens_from_before_the_live_summary() {
    let dir = tempfile::tempdir().unwrap();
    for (flavor, path) in flavors(dir.path()) {
        let store = AdkStore::open(&path).unwrap();
        let created = store.create_session(&key(), Map::new()).unwrap();
        let mut f = EventFactory::starting_at(now().ceil() + 1.0);
        let mut events = f.research_turn("inv1", "q1", "synthesis");
        events[5] = events[5].clone().with_prompt_tokens(42_000);
        let (start, end) = (events[0].timestamp, events[5].timestamp);
        events.push(f.compaction("inv2", start, end, "summary"));
        let mut revision = created.revision;
        for e in &events {
            revision = store.append_event(&key(), revision, e).unwrap();
        }
        let snapshot = store.gate_snapshot(&key()).unwrap();
        assert_eq!(
            snapshot.input.coordinator_prompt_tokens,
            Some(42_000),
            "{flavor:?}"
        );
        assert_eq!(snapshot.input.completed_turns_since_compaction, 0);
        assert_eq!(snapshot.revision, revision);
        let tail = store.load_live_tail(&key()).unwrap();
        assert_eq!(tail.events.len(), 1, "{flavor:?}: {:?}", tail.events);
        assert!(tail.events[0].compaction().is_some());
    }
}

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Step {
    Conversational,
    Research,
    /// A rolling compaction ending that many events before the last one (retention).
    Compaction(usize),
    /// ADK's own sliding-window compaction: from the first event of the turn `.0` turns
    /// before the last to the last event of the turn `.1` turns before the last (`.1 <= .0`),
    /// so windows overlap the way `compaction_interval` / `overlap_size` make them.
    Window(usize, usize),
    Rewind(usize),
    /// A user message filed inside a pipeline scope (ADK's Runner after a scope no
    /// `finish_task` closed).
    ScopedUser,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => Just(Step::Conversational),
        3 => Just(Step::Research),
        1 => (0_usize..6).prop_map(Step::Compaction),
        1 => (0_usize..4, 0_usize..3).prop_map(|(a, b)| Step::Window(a.max(b), b)),
        1 => (0_usize..8).prop_map(Step::Rewind),
        1 => Just(Step::ScopedUser),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// For generated histories (turns, scoped pipelines with their own token counts, rolling
    /// compactions that retain a few events, rewinds) on either layout: the store gives back
    /// exactly the appended events in order, every revision is the update_time ADK would
    /// compare and moves forward, the gate figures and assembled context computed from the
    /// loaded session equal those of the appended history, and the outlined reads (live tail,
    /// gate snapshot) equal core's reference on the whole history.
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
        // From now on, so that events are later than the session's update_time and compaction
        // ranges line up with the events they cover.
        let mut f = EventFactory::starting_at(now().ceil() + 1.0);
        let mut events: Vec<Event> = Vec::new();
        // (first, last) event index of each turn, oldest first.
        let mut turns: Vec<(usize, usize)> = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let inv = format!("inv{i}");
            let tokens = 1_000 * i as u64;
            match s {
                Step::Conversational => {
                    let mut turn = f.conversational_turn(&inv, &format!("q{i}"), "a");
                    if i % 3 != 0 {
                        turn[1] = turn[1].clone().with_prompt_tokens(tokens);
                    }
                    turns.push((events.len(), events.len() + turn.len() - 1));
                    events.extend(turn);
                }
                Step::Research => {
                    let mut turn = f.research_turn(&inv, &format!("q{i}"), "s");
                    // A sub-agent's spike, which the gate must never see.
                    turn[2] = turn[2].clone().with_prompt_tokens(1_000_000 + tokens);
                    turn[5] = turn[5].clone().with_prompt_tokens(tokens);
                    turns.push((events.len(), events.len() + turn.len() - 1));
                    events.extend(turn);
                }
                Step::Compaction(retained) => {
                    if let (Some(first), Some(last)) =
                        (events.first(), events.len().checked_sub(1 + retained))
                    {
                        let (start, end) = (first.timestamp, events[last].timestamp);
                        events.push(f.compaction(&inv, start, end, "summary"));
                    }
                }
                Step::Window(from, to) => {
                    if let (Some(first), Some(last)) = (
                        turns.len().checked_sub(1 + from).map(|t| turns[t].0),
                        turns.len().checked_sub(1 + to).map(|t| turns[t].1),
                    ) {
                        let (start, end) = (events[first].timestamp, events[last].timestamp);
                        events.push(f.compaction(&inv, start, end, &format!("adk window {i}")));
                    }
                }
                Step::Rewind(back) => {
                    let target = format!("inv{}", i.saturating_sub(back + 1));
                    events.push(f.rewind(&inv, &target));
                }
                Step::ScopedUser => {
                    let scope = format!("search_pipeline:fc-inv{}", i % 2);
                    events.push(f.user(&inv, &format!("q{i}")).with_scope(scope));
                }
            }
        }
        let mut revision = created.revision;
        for (j, e) in events.iter().enumerate() {
            let next = store.append_event(&key(), revision, e).unwrap();
            proptest::prop_assert!(next > revision);
            revision = next;
            // Asked after every append: read once, then carried across this store's own
            // appends (tail_memo), always the core's answer on the whole history.
            proptest::prop_assert_eq!(
                store.scoped_user_messages(&key()).unwrap(),
                compaction_core::scoped_user_messages(&events[..=j])
            );
        }
        let session = store.get_session(&key()).unwrap();
        proptest::prop_assert_eq!(&session.events, &events);
        proptest::prop_assert_eq!(session.revision, revision);
        proptest::prop_assert_eq!(
            compaction_core::gate_input(&session.events),
            compaction_core::gate_input(&events)
        );
        proptest::prop_assert_eq!(assemble_context(&session.events), assemble_context(&events));
        let tail = store.load_live_tail(&key()).unwrap();
        let rolling: Vec<Event> = compaction_core::rolling_tail_positions(&events)
            .into_iter()
            .map(|i| events[i].clone())
            .collect();
        proptest::prop_assert_eq!(&tail.events, &rolling);
        // The live tail is a part of it, and the engine plans the same from it as from the
        // whole history, ADK's own overlapping summaries included.
        for event in live_tail(&events) {
            proptest::prop_assert!(rolling.contains(&event));
        }
        for k in 0..3 {
            proptest::prop_assert_eq!(
                compaction_core::plan_compaction(&tail.events, k),
                compaction_core::plan_compaction(&events, k),
                "plan with K = {}", k
            );
        }
        proptest::prop_assert_eq!(tail.revision, revision);
        proptest::prop_assert_eq!(&tail.state, &session.state);
        let snapshot = store.gate_snapshot(&key()).unwrap();
        proptest::prop_assert_eq!(snapshot.input, compaction_core::gate_input(&events));
        proptest::prop_assert_eq!(snapshot.revision, revision);
    }
}

/// Issue 20 item 9: a compaction event whose start is after its end (written by someone else)
/// is refused as corrupt, naming the event, by every read; it never becomes the live summary
/// that hides the history. Appending one is refused too.
#[test]
fn a_compaction_that_starts_after_it_ends_is_refused_naming_the_event() {
    let dir = tempfile::tempdir().unwrap();
    for (flavor, path) in flavors(dir.path()) {
        let store = AdkStore::open(&path).unwrap();
        let created = store.create_session(&key(), Map::new()).unwrap();
        let mut f = EventFactory::starting_at(now().ceil() + 1.0);
        let mut events = f.research_turn("inv1", "q1", "synthesis");
        let (start, end) = (events[0].timestamp, events[5].timestamp);
        let backwards = f.compaction("inv2", end, start, "bogus");
        let err = store
            .append_event(&key(), created.revision, &backwards)
            .unwrap_err();
        assert!(err.to_string().contains(&backwards.id), "{flavor:?}: {err}");
        events.push(f.compaction("inv2", start, end, "summary"));
        let compaction_id = events[6].id.clone();
        let mut revision = created.revision;
        for e in &events {
            revision = store.append_event(&key(), revision, e).unwrap();
        }
        // Another writer swaps the range in place.
        let conn = Connection::open(&path).unwrap();
        let changed = conn
            .execute(
                "UPDATE events SET event_data = json_set(event_data, \
                 '$.actions.compaction.start_timestamp', \
                 json_extract(event_data, '$.actions.compaction.end_timestamp') + 10) \
                 WHERE id = ?1",
                [&compaction_id],
            )
            .unwrap();
        assert_eq!(changed, 1);
        drop(conn);
        let reads: [(&str, Result<(), SessionStoreError>); 3] = [
            ("get_session", store.get_session(&key()).map(|_| ())),
            ("load_live_tail", store.load_live_tail(&key()).map(|_| ())),
            ("gate_snapshot", store.gate_snapshot(&key()).map(|_| ())),
        ];
        for (read, result) in reads {
            let err = result.expect_err(read);
            let message = err.to_string();
            assert!(
                message.contains(&compaction_id) && message.contains("starts after it ends"),
                "{flavor:?} {read}: {message}"
            );
        }
    }
}

/// Replaces the character at `at` (a char index, wrapped) of `text` with `with`, or deletes it.
fn mutate(text: &str, at: usize, with: Option<char>) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = at % chars.len().max(1);
    chars
        .iter()
        .enumerate()
        .filter_map(|(i, c)| if i == at { with } else { Some(*c) })
        .collect()
}

proptest::proptest! {
    // Bounded for CI; a longer run: `PROPTEST_CASES=20000 cargo test -p adaptive-compaction-session-store --test adk fuzz`.
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Fuzz of ADK event JSON (issue 20): an `event_data` column holding a mutated event (a
    /// character replaced or deleted, up to three times) or arbitrary text never panics a
    /// read: every read either loads the session or fails with a store error naming the file.
    #[test]
    fn fuzz_adk_event_json_never_panics(
        edits in proptest::collection::vec((proptest::num::usize::ANY, proptest::option::of(proptest::char::any())), 1..4),
        raw in proptest::option::weighted(0.2, ".{0,40}"),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = adk_file(dir.path(), "f.db", SQLITE_DDL);
        let store = AdkStore::open(&path).unwrap();
        let created = store.create_session(&key(), Map::new()).unwrap();
        let mut f = EventFactory::starting_at(now().ceil() + 1.0);
        let mut events = f.research_turn("inv1", "q1", "synthesis");
        let (start, end) = (events[0].timestamp, events[5].timestamp);
        events.push(f.compaction("inv2", start, end, "summary"));
        let mut revision = created.revision;
        for e in &events {
            revision = store.append_event(&key(), revision, e).unwrap();
        }
        let target = &events[6].id;
        let conn = Connection::open(&path).unwrap();
        let original: String = conn
            .query_row("SELECT event_data FROM events WHERE id = ?1", [target], |r| r.get(0))
            .unwrap();
        let data = match raw {
            Some(text) => text,
            None => edits.iter().fold(original, |text, (at, with)| mutate(&text, *at, *with)),
        };
        conn.execute("UPDATE events SET event_data = ?1 WHERE id = ?2", (&data, target)).unwrap();
        drop(conn);
        for result in [
            store.get_session(&key()).map(|_| ()),
            store.load_live_tail(&key()).map(|_| ()),
            store.gate_snapshot(&key()).map(|_| ()),
        ] {
            if let Err(e) = result {
                proptest::prop_assert!(e.to_string().contains("f.db"), "{}", e);
            }
        }
    }
}

/// An ADK file (SqliteSessionService layout, WAL journal as a busy ADK app leaves it) holding
/// `turns` research turns.
fn filled_adk_file(dir: &Path, turns: usize) -> PathBuf {
    let path = adk_file(dir, "filled.db", SQLITE_DDL);
    let conn = Connection::open(&path).unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    let store = AdkStore::open(&path).unwrap();
    let created = store.create_session(&key(), Map::new()).unwrap();
    let mut f = EventFactory::starting_at(now().ceil() + 1.0);
    let mut revision = created.revision;
    for i in 0..turns {
        for e in f.research_turn(&format!("inv{i}"), &"q".repeat(300), &"s".repeat(300)) {
            revision = store.append_event(&key(), revision, &e).unwrap();
        }
    }
    path
}

/// The files in `dir` whose names start with `prefix`, sorted.
fn files_like(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// Issue 20 items 3 and 6 on an ADK file: a damaged file is refused before the first write
/// (byte-identical afterwards) when its whole-file check is due, and a read-only open reads, refuses writes and leaves no
/// `-wal`/`-shm` behind.
#[test]
fn an_adk_file_is_checked_before_writing_and_read_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = filled_adk_file(dir.path(), 40);
    assert_eq!(files_like(dir.path(), "filled.db"), ["filled.db"]);
    let reader = AdkStore::open_read_only(&path, OpenOptions::default()).unwrap();
    assert_eq!(reader.get_session(&key()).unwrap().events.len(), 240);
    let mut f = EventFactory::starting_at(now().ceil() + 10_000.0);
    let revision = reader.get_session(&key()).unwrap().revision;
    assert!(
        reader
            .append_event(&key(), revision, &f.user("inv-x", "no"))
            .is_err()
    );
    drop(reader);
    assert_eq!(files_like(dir.path(), "filled.db"), ["filled.db"]);

    let mut bytes = std::fs::read(&path).unwrap();
    let page = 4096;
    let pages = bytes.len() / page;
    assert!(pages >= 8, "{pages} pages");
    bytes[(pages / 2) * page..(pages / 2 + 1) * page].fill(0xFF);
    std::fs::write(&path, &bytes).unwrap();
    // A state directory with no record of a whole check of this file: the open checks it.
    // (Between recorded checks, tests/adk_incremental.rs.)
    let state = tempfile::tempdir().unwrap();
    let err =
        AdkStore::open_with_state_dir(&path, OpenOptions::default(), Some(state.path().into()))
            .unwrap_err();
    assert!(matches!(err, SessionStoreError::Damaged { .. }), "{err:?}");
    assert!(err.to_string().contains("filled.db"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

/// Lossless recall on ADK's own files (issue 32): read-only, by scanning the session's rows
/// (the port's defaults), so search and expand answer exactly as the core's scan over the
/// loaded history, and the file's schema is left as ADK made it (no index of ours).
#[test]
fn recall_on_adks_layouts_scans_and_creates_nothing() {
    use compaction_core::RecallQuery;
    use compaction_core::store_support::scan;
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for (flavor, path) in flavors(dir.path()) {
        let schema = |path: &Path| -> Vec<String> {
            let conn = Connection::open(path).unwrap();
            let mut stmt = conn
                .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
                .unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let before = schema(&path);
        let blocking = AdkStore::open(&path).unwrap();
        let created = blocking.create_session(&key(), Map::new()).unwrap();
        let mut f = EventFactory::new();
        let mut events = f.research_turn("inv1", "What limits lithium plating?", "Temperature.");
        events.extend(f.conversational_turn("inv2", "And the cathode?", "Oxygen release."));
        let folded = events.len();
        events.extend(f.conversational_turn("inv3", "Plating at low rates?", "Rarely."));
        events.push(f.user("inv4", "placeholder for the compaction's stamp"));
        let mut events = from_now(events, 1.0);
        // The compaction covers the first two turns (its range in the shifted clock).
        let (start, end) = (events[0].timestamp, events[folded - 1].timestamp);
        let stamp = events.pop().unwrap().timestamp;
        let mut fold = f.compaction("fold", start, end, "Plating and the cathode.");
        fold.timestamp = stamp;
        events.push(fold);
        let mut revision = created.revision;
        for e in &events {
            revision = blocking.append_event(&key(), revision, e).unwrap();
        }
        drop(blocking);
        let store = session_store::AdkStore::open(&path).unwrap();
        let stored = blocking_events(&path);
        let query = RecallQuery::parse("plating").unwrap();
        let hits = runtime.block_on(store.search(&key(), &query, 10)).unwrap();
        assert_eq!(
            hits,
            scan::search_history(&stored, &query, 10),
            "{flavor:?}"
        );
        assert!(hits.len() >= 2, "{flavor:?}: {hits:?}");
        assert!(
            hits.iter().any(|h| h.covered_by.is_some()),
            "{flavor:?}: a folded turn is found and marked"
        );
        let fold = &events.last().unwrap().id;
        let expanded = runtime.block_on(store.expand(&key(), fold)).unwrap();
        assert_eq!(expanded, scan::expand_compaction(&stored, fold).unwrap());
        assert!(
            expanded
                .iter()
                .any(|r| r.event.text().contains("lithium plating")),
            "{flavor:?}: the folded query comes back verbatim"
        );
        assert!(
            runtime.block_on(store.expand(&key(), "no-such")).is_err(),
            "{flavor:?}"
        );
        assert_eq!(
            schema(&path),
            before,
            "{flavor:?}: nothing created in ADK's file"
        );
    }
}

fn blocking_events(path: &Path) -> Vec<Event> {
    AdkStore::open(path)
        .unwrap()
        .get_session(&key())
        .unwrap()
        .events
}
