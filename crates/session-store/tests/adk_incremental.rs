//! Issue 29 on ADK's own files: the incremental outline (each run reads only the rows appended
//! since the session's checkpoint, kept in the state directory between one-shot runs) answers
//! exactly as a whole read and as the core's functions of the whole history; and the damage
//! check between whole-file checks: damage in a page the run touches is refused before any
//! write, damage elsewhere is found by the next interval's whole check (or `check_integrity`).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use compaction_core::testing::EventFactory;
use compaction_core::{
    Event, Timestamp, coordinator_prompt_tokens, coordinator_view, rolling_tail_positions,
    scoped_user_messages,
};
use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::Map;
use session_store::blocking::AdkStore;
use session_store::{IntegrityCheck, OpenOptions, SessionStoreError, check_integrity};

use common::adk::{DATABASE_DDL, SQLITE_DDL, adk_file, key, now};

/// A store that keeps what it learns in `state` (`None`: nowhere, a whole read every time).
fn open(path: &Path, state: Option<&Path>) -> AdkStore {
    AdkStore::open_with_state_dir(path, OpenOptions::default(), state.map(Path::to_path_buf))
        .unwrap()
}

#[derive(Debug, Clone)]
enum Step {
    Turn,
    Research,
    /// An engine-style rolling compaction from the first event, keeping this many events.
    Rolling(usize),
    /// ADK's own sliding-window compaction of turns `from`..`to` back.
    Window(usize, usize),
    Rewind(usize),
    Scoped,
    /// A row another program inserted with a timestamp before the last one (ADK's order moves).
    Late,
    /// Another session's 5,000 rows appended to the file (the next read goes through the
    /// session's index instead of the file's rowid range).
    Other,
    /// The other sessions deleted (ADK's `delete_session`): the file's newest rows go, and the
    /// session's next rows take their rowids, below the last read's frontier.
    DropOther,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => Just(Step::Turn),
        2 => Just(Step::Research),
        2 => (0_usize..6).prop_map(Step::Rolling),
        1 => (0_usize..4, 0_usize..4).prop_map(|(a, b)| Step::Window(a.max(b), a.min(b))),
        1 => (0_usize..4).prop_map(Step::Rewind),
        1 => Just(Step::Scoped),
        1 => Just(Step::Late),
        1 => Just(Step::Other),
        1 => Just(Step::DropOther),
    ]
}

/// Appends `steps` as ADK's process would (its own connection, no state directory).
struct Writer {
    store: AdkStore,
    factory: EventFactory,
    events: Vec<Event>,
    turns: Vec<(Timestamp, Timestamp)>,
    n: usize,
}

impl Writer {
    fn append(&mut self, event: Event) {
        let revision = self.store.revision(&key()).unwrap();
        self.store.append_event(&key(), revision, &event).unwrap();
        self.events.push(event);
    }

    fn apply(&mut self, s: &Step, path: &Path) {
        self.n += 1;
        let i = self.n;
        let inv = format!("inv{i}");
        let f = &mut self.factory;
        let new: Vec<Event> = match s {
            Step::Turn => {
                let mut turn = f.conversational_turn(&inv, &format!("q{i}"), "a");
                turn[1] = turn[1].clone().with_prompt_tokens(100 * i as u64);
                turn
            }
            Step::Research => {
                let mut turn = f.research_turn(&inv, &format!("q{i}"), "s");
                turn[2] = turn[2].clone().with_prompt_tokens(1_000_000);
                turn
            }
            Step::Rolling(kept) => {
                match (self.events.first(), self.events.len().checked_sub(1 + kept)) {
                    (Some(first), Some(last)) => {
                        vec![f.compaction(&inv, first.timestamp, self.events[last].timestamp, "r")]
                    }
                    _ => vec![],
                }
            }
            Step::Window(from, to) => {
                let n = self.turns.len();
                match (n.checked_sub(1 + from), n.checked_sub(1 + to)) {
                    (Some(a), Some(b)) => {
                        vec![f.compaction(&inv, self.turns[a].0, self.turns[b].1, "w")]
                    }
                    _ => vec![],
                }
            }
            Step::Rewind(back) => {
                vec![f.rewind(&inv, &format!("inv{}", i.saturating_sub(back + 1)))]
            }
            Step::Scoped => vec![
                f.user(&inv, &format!("q{i}"))
                    .with_scope(format!("p{}", i % 2)),
            ],
            Step::Other => {
                append_other_session(path, i, 5_000);
                return;
            }
            Step::DropOther => {
                drop_other_sessions(path);
                return;
            }
            Step::Late => {
                // A copy of the last row under an id that sorts before its own: in
                // `DatabaseSessionService`'s order (timestamp, then id) it comes before the last
                // known row; in `SqliteSessionService`'s (timestamp, then insertion) after it.
                let conn = Connection::open(path).unwrap();
                conn.execute(
                    "INSERT INTO events (id, app_name, user_id, session_id, invocation_id, \
                     timestamp, event_data) SELECT ?1 || id, app_name, user_id, session_id, \
                     invocation_id, timestamp, event_data FROM events \
                     WHERE rowid = (SELECT max(rowid) FROM events)",
                    [format!("0late{i}-")],
                )
                .unwrap();
                return;
            }
        };
        if let (Some(a), Some(b)) = (new.first(), new.last())
            && matches!(s, Step::Turn | Step::Research)
        {
            self.turns.push((a.timestamp, b.timestamp));
        }
        for event in new {
            self.append(event);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// The store invariant on the incremental path: ADK's process appends between one-shot runs
    /// (each run a new store, continuing the checkpoint the last one left in the state
    /// directory); every run's live tail, gate snapshot and scope warning equal a whole read's
    /// and the core's functions of the whole history (as ADK orders it), rewinds, ADK's own
    /// overlapping summaries and rows inserted out of order included.
    #[test]
    fn one_shot_runs_continue_the_checkpoint_and_answer_as_the_whole_history(
        chunks in proptest::collection::vec(proptest::collection::vec(step(), 1..6), 1..6),
        database in proptest::bool::ANY,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let path = adk_file(dir.path(), "adk.db", if database { DATABASE_DDL } else { SQLITE_DDL });
        let store = open(&path, None);
        store.create_session(&key(), Map::new()).unwrap();
        let mut writer = Writer {
            store,
            factory: EventFactory::starting_at(now().ceil() + 1.0),
            events: Vec::new(),
            turns: Vec::new(),
            n: 0,
        };
        for chunk in &chunks {
            for s in chunk {
                writer.apply(s, &path);
            }
            let run = open(&path, Some(state.path()));
            let whole = open(&path, None);
            let all = whole.get_session(&key()).unwrap().events;
            let tail = run.load_live_tail(&key()).unwrap();
            let rolling: Vec<Event> = rolling_tail_positions(&all)
                .into_iter()
                .map(|i| all[i].clone())
                .collect();
            prop_assert_eq!(&tail.events, &rolling);
            prop_assert_eq!(&tail.events, &whole.load_live_tail(&key()).unwrap().events);
            let snapshot = run.gate_snapshot(&key()).unwrap();
            prop_assert_eq!(
                snapshot.input.coordinator_prompt_tokens,
                coordinator_prompt_tokens(coordinator_view(&all).into_iter())
            );
            prop_assert_eq!(snapshot, whole.gate_snapshot(&key()).unwrap());
            prop_assert_eq!(run.scoped_user_messages(&key()).unwrap(), scoped_user_messages(&all));
        }
    }
}

/// Deletes every session but [`key`]'s, with its rows, as ADK's `delete_session` does.
fn drop_other_sessions(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA foreign_keys = ON; \
         DELETE FROM events WHERE user_id = 'other'; \
         DELETE FROM sessions WHERE user_id = 'other';",
    )
    .unwrap();
}

/// Appends another session's `rows` rows to the file (copies of its newest row, ids tagged
/// `tag`).
fn append_other_session(path: &Path, tag: usize, rows: usize) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "INSERT OR IGNORE INTO sessions SELECT app_name, 'other', id, state, \
         create_time, update_time FROM sessions; \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows}) \
         INSERT INTO events (id, app_name, user_id, session_id, invocation_id, \
         timestamp, event_data) SELECT 'o{tag}-' || n.i, e.app_name, 'other', \
         e.session_id, e.invocation_id, e.timestamp, e.event_data FROM n, \
         (SELECT * FROM events WHERE rowid = (SELECT max(rowid) FROM events)) e;"
    ))
    .unwrap();
}

/// An ADK file of `ddl` with [`key`]'s session, appended to as ADK's process would, and a
/// state directory for the runs.
struct OneSession {
    _dir: tempfile::TempDir,
    state: tempfile::TempDir,
    path: PathBuf,
    writer: AdkStore,
    factory: EventFactory,
}

impl OneSession {
    fn new(ddl: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = adk_file(dir.path(), "adk.db", ddl);
        let writer = open(&path, None);
        writer.create_session(&key(), Map::new()).unwrap();
        OneSession {
            _dir: dir,
            state: tempfile::tempdir().unwrap(),
            path,
            writer,
            factory: EventFactory::starting_at(now().ceil() + 1.0),
        }
    }

    fn turn(&mut self, inv: &str) {
        let mut revision = self.writer.revision(&key()).unwrap();
        for e in self.factory.conversational_turn(inv, "q", "a") {
            revision = self.writer.append_event(&key(), revision, &e).unwrap();
        }
    }

    /// A run continuing the state directory's checkpoint reads the live tail a whole read does;
    /// returns how many events it holds.
    fn tail_as_whole(&self) -> usize {
        let continued = open(&self.path, Some(self.state.path()))
            .load_live_tail(&key())
            .unwrap();
        let whole = open(&self.path, None).load_live_tail(&key()).unwrap();
        assert_eq!(continued.events, whole.events);
        assert_eq!(continued.revision, whole.revision);
        continued.events.len()
    }
}

/// A read's checkpoint remembers the file's newest row (another session's), so that the next
/// read looks only above it. When that session is deleted, SQLite numbers the session's next
/// rows from its own greatest rowid again, below the remembered row: the next read sees that
/// the row is gone and looks above the session's own greatest rowid instead.
#[test]
fn rows_numbered_below_the_last_reads_newest_row_are_read() {
    for ddl in [DATABASE_DDL, SQLITE_DDL] {
        let mut adk = OneSession::new(ddl);
        adk.turn("inv1");
        append_other_session(&adk.path, 0, 10);
        assert_eq!(adk.tail_as_whole(), 2);
        drop_other_sessions(&adk.path);
        adk.turn("inv2");
        assert_eq!(adk.tail_as_whole(), 4);
    }
}

/// Once rowid `i64::MAX` is taken SQLite numbers new rows at random, so they may lie below the
/// last read's newest row (that one): a read then outlines the whole session.
#[test]
fn rows_numbered_at_random_after_the_greatest_rowid_are_read() {
    reads_answer_as_a_whole_read_under_a_newest_row_changed_by(
        "UPDATE events SET rowid = 9223372036854775807 WHERE user_id = 'other'",
    );
}

/// The file's newest row may be another program's with a value that is not text (here a blob
/// event id): the session's reads go on, as a whole read answers.
#[test]
fn a_newest_row_holding_no_text_does_not_stop_the_sessions_reads() {
    reads_answer_as_a_whole_read_under_a_newest_row_changed_by(
        "UPDATE events SET id = x'ff00' WHERE user_id = 'other'",
    );
}

/// In both layouts: a turn, another session's row on top of the file changed by `sql`, a run
/// (which keeps its checkpoint, that row its newest), another turn, a run: each run reads the
/// live tail a whole read does (two events, then four).
#[track_caller]
fn reads_answer_as_a_whole_read_under_a_newest_row_changed_by(sql: &str) {
    for ddl in [DATABASE_DDL, SQLITE_DDL] {
        let mut adk = OneSession::new(ddl);
        adk.turn("inv1");
        append_other_session(&adk.path, 0, 1);
        Connection::open(&adk.path)
            .unwrap()
            .execute(sql, [])
            .unwrap();
        assert_eq!(adk.tail_as_whole(), 2);
        adk.turn("inv2");
        assert_eq!(adk.tail_as_whole(), 4);
    }
}

/// `turns` research turns, an engine-style rolling compaction of all but the last two, then two
/// more turns, in a `DatabaseSessionService` file; the writer keeps nothing.
fn compacted_file(dir: &Path, turns: usize) -> PathBuf {
    let path = adk_file(dir, "adk.db", DATABASE_DDL);
    let store = open(&path, None);
    store.create_session(&key(), Map::new()).unwrap();
    let mut f = EventFactory::starting_at(now().ceil() + 1.0);
    let mut events = Vec::new();
    for i in 0..turns {
        events.extend(f.research_turn(&format!("inv{i}"), &"q".repeat(300), &"s".repeat(300)));
    }
    let (start, end) = (events[0].timestamp, events[events.len() - 13].timestamp);
    events.push(f.compaction("c1", start, end, "summary"));
    for i in turns..turns + 2 {
        events.extend(f.research_turn(&format!("inv{i}"), "q", "s"));
    }
    let mut revision = store.revision(&key()).unwrap();
    for e in &events {
        revision = store.append_event(&key(), revision, e).unwrap();
    }
    path
}

/// The page number of `table`'s first leaf (its oldest rows), or of its root, from SQLite's
/// `dbstat` table.
fn page_of(path: &Path, table: &str, first_leaf: bool) -> i64 {
    let conn = Connection::open(path).unwrap();
    let sql = if first_leaf {
        "SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = 'leaf' ORDER BY path LIMIT 1"
    } else {
        "SELECT rootpage FROM sqlite_master WHERE name = ?1"
    };
    conn.query_row(sql, [table], |r| r.get(0)).unwrap()
}

/// Overwrites page `page` (from 1) with 0xFF bytes, in place (the inode stays).
fn damage(path: &Path, page: i64) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let size = 4096;
    let at = (page as usize - 1) * size;
    bytes[at..at + size].fill(0xFF);
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// One more turn, as a run after ADK's: the gate snapshot (the session's read), then appends.
fn one_more_turn(store: &AdkStore, n: u32) -> Result<(), SessionStoreError> {
    let mut f = EventFactory::starting_at(now().ceil() + 5_000.0 * f64::from(n));
    let mut revision = store.gate_snapshot(&key())?.revision;
    for mut e in f.conversational_turn(&format!("more{n}"), "q", "a") {
        e.id = format!("more{n}-{}", e.id);
        revision = store.append_event(&key(), revision, &e)?;
    }
    Ok(())
}

/// Between whole-file checks (recorded in the state directory, a day by default), a run relies
/// on SQLite's own checks of the pages it touches. Damage in the oldest rows, which an
/// incremental run never reads, does not stop it: it reads the new rows and appends. The full
/// check (`inspect --check`) and the next interval's whole check find it and refuse.
#[test]
fn damage_in_pages_a_run_does_not_touch_is_found_by_the_next_whole_check() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let path = compacted_file(dir.path(), 60);
    // The first run checks the whole file, records it, and leaves the session's checkpoint.
    one_more_turn(&open(&path, Some(state.path())), 1).unwrap();
    damage(&path, page_of(&path, "events", true));
    let run = open(&path, Some(state.path()));
    one_more_turn(&run, 2).expect("an incremental run never reads the oldest rows");
    drop(run);
    let err = check_integrity(&path).unwrap_err();
    assert!(matches!(err, SessionStoreError::Damaged { .. }), "{err:?}");
    let every_time = OpenOptions::default().integrity(IntegrityCheck::Unchanged {
        max_age: Duration::ZERO,
    });
    let err = AdkStore::open_with_state_dir(&path, every_time, Some(state.path().to_owned()))
        .unwrap_err();
    assert!(matches!(err, SessionStoreError::Damaged { .. }), "{err:?}");
    // A refused check forgets the record: the next open checks again, and refuses.
    let err =
        AdkStore::open_with_state_dir(&path, OpenOptions::default(), Some(state.path().to_owned()))
            .unwrap_err();
    assert!(matches!(err, SessionStoreError::Damaged { .. }), "{err:?}");
}

/// Damage in a page the run touches (here the `sessions` row every run reads first) is refused
/// by SQLite as the run reads it, before any write: the file is left byte-identical.
#[test]
fn damage_in_pages_a_run_touches_is_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let path = compacted_file(dir.path(), 20);
    one_more_turn(&open(&path, Some(state.path())), 1).unwrap();
    let bytes = damage(&path, page_of(&path, "sessions", false));
    let run = open(&path, Some(state.path()));
    let err = one_more_turn(&run, 2).unwrap_err();
    assert!(matches!(err, SessionStoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("adk.db"), "{err}");
    drop(run);
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the file was written");
}

/// Without a state directory every writing open checks the whole file.
#[test]
fn without_a_state_directory_every_writing_open_checks_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = compacted_file(dir.path(), 20);
    damage(&path, page_of(&path, "events", true));
    let err = AdkStore::open_with_state_dir(&path, OpenOptions::default(), None).unwrap_err();
    assert!(matches!(err, SessionStoreError::Damaged { .. }), "{err:?}");
}
