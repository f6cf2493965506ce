//! The databases `bench-hook` measures, written through session-store's own stores (so every
//! row is what a real run writes), except the 10,000 other sessions of the large native file,
//! copied with SQL from one written by the store.
//!
//! Every fixture holds two sessions of one size: `fast` ends in a fast exit (the history of
//! `benches/common/history.rs`: a rolling compaction every eight turns, then four turns), and
//! `force` is the same history plus one turn whose prompt tokens pass the token ceiling, so
//! `evaluate` compresses it.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use compaction_core::testing::EventFactory;
use compaction_core::{Event, Revision, SessionKey};
use serde_json::Map;
use session_store::blocking::{AdkStore, SqliteStore};

#[path = "../../../crates/session-store/benches/common/history.rs"]
mod history;

/// The app and user of every benchmark session.
pub(crate) const APP: &str = "bench";
pub(crate) const USER: &str = "u";

/// Prompt tokens of the forcing turn: above the default token ceiling.
const FORCING_TOKENS: u64 = 190_000;

const ADK_SQLITE_DDL: &str =
    include_str!("../../../crates/session-store/tests/fixtures/adk-database-v1.sql");
const ADK_POSTGRES_DDL: &str =
    include_str!("../../../crates/session-store/tests/fixtures/adk-database-v1-postgres.sql");

pub(crate) fn key(session: &str) -> SessionKey {
    SessionKey::new(APP, USER, session)
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The history of a session of about `events` events: `fast`'s, or (`force`) the same plus
/// one turn whose prompt tokens pass the ceiling.
/// The events start at `start` (see [`start_of`]).
fn history(events: usize, force: bool, start: f64) -> Vec<Event> {
    let mut all = Vec::with_capacity(events + 2);
    history::fill(EventFactory::starting_at(start), events, |e| {
        all.push(e.clone());
    });
    if force {
        let last = all.last().map_or(now_seconds(), |e| e.timestamp.seconds());
        let mut f = EventFactory::starting_at(last.ceil() + 1.0);
        let mut turn = f.conversational_turn("forcing", "One more question?", "An answer.");
        turn[1] = turn[1].clone().with_prompt_tokens(FORCING_TOKENS);
        for (i, mut e) in turn.into_iter().enumerate() {
            e.id = format!("forcing-{i}");
            all.push(e);
        }
    }
    all
}

/// When a history of about `events` events starts: in the past, one second an event, so that
/// it ends an hour before now and the engine's compaction event (timestamped now) comes after
/// it, as ADK's layouts require.
fn start_of(events: usize) -> f64 {
    (now_seconds() - 3_600.0 - 2.0 * events as f64).floor()
}

/// A native store file at `path` with `fast` and `force` of about `events` events each, and
/// (when `other` is some) a session `other` of that many events.
pub(crate) fn native(path: &Path, events: usize, other: Option<usize>) -> Result<(), String> {
    let store = SqliteStore::open(path).map_err(|e| e.to_string())?;
    let mut sessions = vec![("fast", events, false), ("force", events, true)];
    if let Some(other) = other {
        sessions.push(("other", other, false));
    }
    for (name, size, force) in sessions {
        let key = key(name);
        store
            .create_session(&key, Map::new())
            .map_err(|e| e.to_string())?;
        let mut revision = Revision(0);
        for e in &history(size, force, start_of(size)) {
            revision = store
                .append_event(&key, revision, e)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Copies session `other` of the native file at `path` `copies` times (sessions
/// `other-1`…), in one transaction.
pub(crate) fn clone_other(path: &Path, copies: usize) -> Result<(), String> {
    let mut conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
    let columns = |table: &str, skip: &[&str]| -> Result<Vec<String>, String> {
        let mut stmt = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .map_err(|e| e.to_string())?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(Iterator::collect::<Result<Vec<String>, _>>)
            .map_err(|e| e.to_string())?;
        Ok(names
            .into_iter()
            .filter(|n| !skip.contains(&n.as_str()))
            .collect())
    };
    let session_cols = columns("sessions", &["pk", "session_id"])?.join(", ");
    let event_cols = columns("events", &["session_pk"])?;
    let event_list = event_cols.join(", ");
    let event_select: Vec<String> = event_cols.iter().map(|c| format!("e.{c}")).collect();
    let sql = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {copies}) \
         INSERT INTO sessions (session_id, {session_cols}) \
         SELECT 'other-' || n.i, {session_cols} FROM sessions, n WHERE session_id = 'other'; \
         INSERT INTO events (session_pk, {event_list}) \
         SELECT c.pk, {} FROM events e \
         JOIN sessions o ON o.pk = e.session_pk AND o.session_id = 'other' \
         JOIN sessions c ON c.session_id LIKE 'other-%';",
        event_select.join(", ")
    );
    let tx = conn.transaction().map_err(|e| e.to_string())?;
    tx.execute_batch(&sql).map_err(|e| e.to_string())?;
    tx.commit().map_err(|e| e.to_string())
}

/// An ADK `DatabaseSessionService` SQLite file at `path` (the DDL google-adk 2.13 creates)
/// with `fast` and `force` of about `events` events each.
pub(crate) fn adk_sqlite(path: &Path, events: usize) -> Result<(), String> {
    rusqlite::Connection::open(path)
        .and_then(|c| c.execute_batch(ADK_SQLITE_DDL))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let store = AdkStore::open(path).map_err(|e| e.to_string())?;
    for (name, force) in [("fast", false), ("force", true)] {
        let key = key(name);
        store
            .create_session(&key, Map::new())
            .map_err(|e| e.to_string())?;
        // ADK's session is created now; moved back before its history's first event.
        let start = start_of(events);
        rusqlite::Connection::open(path)
            .and_then(|c| {
                c.execute(
                    "UPDATE sessions SET create_time = ?1, update_time = ?1 WHERE id = ?2",
                    rusqlite::params![backdated(start), key.session_id],
                )
            })
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut revision = store.revision(&key).map_err(|e| e.to_string())?;
        for e in &history(events, force, start) {
            revision = store
                .append_event(&key, revision, e)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Sessions `fast-N` and `force-N` of about N events for each N of `sizes` in ADK's tables
/// on the (fresh) PostgreSQL database at `url`, 10,000 other (empty) sessions beside them,
/// and the table `bench_reset` that [`POSTGRES_RESET`] restores the `force-N` sessions from.
pub(crate) async fn adk_postgres(url: &str, sizes: &[usize]) -> Result<(), String> {
    psql(url, ADK_POSTGRES_DDL)?;
    let store = session_store::AdkPostgresStore::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    for &size in sizes {
        for (name, force) in [("fast", false), ("force", true)] {
            let key = key(&format!("{name}-{size}"));
            store
                .create_session(&key, Map::new())
                .await
                .map_err(|e| e.to_string())?;
            let start = start_of(size);
            psql(
                url,
                &format!(
                    "UPDATE sessions SET create_time = '{0}', update_time = '{0}' \
                     WHERE id = '{1}'",
                    backdated(start),
                    key.session_id
                ),
            )?;
            let mut revision = store.revision(&key).await.map_err(|e| e.to_string())?;
            for e in &history(size, force, start) {
                revision = store
                    .append_event(&key, revision, e)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    psql(
        url,
        &format!(
            "INSERT INTO sessions (app_name, user_id, id, state, create_time, update_time) \
             SELECT '{APP}', 'other', 'o' || g, '{{}}', now(), now() \
             FROM generate_series(1, 10000) g; \
             CREATE TABLE bench_reset AS SELECT id AS session_id, update_time FROM sessions \
             WHERE app_name = '{APP}' AND user_id = '{USER}' AND id LIKE 'force-%';"
        ),
    )
}

/// Restores every `force-N` session of the PostgreSQL fixture to its state before `evaluate`
/// compressed it.
pub(crate) const POSTGRES_RESET: &str = "DELETE FROM events e USING bench_reset r \
     WHERE e.app_name = 'bench' AND e.user_id = 'u' AND e.session_id = r.session_id \
     AND e.timestamp > r.update_time; \
     UPDATE sessions s SET update_time = r.update_time FROM bench_reset r \
     WHERE s.app_name = 'bench' AND s.user_id = 'u' AND s.id = r.session_id;";

/// Runs `sql` on the database at `url` with `psql`.
pub(crate) fn psql(url: &str, sql: &str) -> Result<(), String> {
    let out = std::process::Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        .output()
        .map_err(|e| format!("could not run psql: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// ADK's naive UTC time text for a second before `start`.
fn backdated(start: f64) -> String {
    let seconds = start as i64 - 1;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = compaction_core::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.000000",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

/// `path` with `suffix` appended to its file name.
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    /// The civil date of a second, as Python's `datetime.utcfromtimestamp` gives it.
    #[test]
    fn backdated_is_adks_time_text_a_second_before() {
        assert_eq!(
            super::backdated(1_796_364_131.0),
            "2026-12-04 06:02:10.000000"
        );
        assert_eq!(
            super::backdated(951_782_401.0),
            "2000-02-29 00:00:00.000000"
        );
    }
}
