//! The schema, its migrations (`PRAGMA user_version`) and the connection settings.
//!
//! Migration `n` (1-based) takes a file from `user_version = n - 1` to `n`. A file whose
//! `user_version` is above [`SCHEMA_VERSION`] was written by a newer build: it is refused
//! before anything is written to it (not even the journal mode), so it is never rewritten.

use rusqlite::{Connection, TransactionBehavior};

/// Every migration, oldest first. Never edit a released entry; append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: sessions with their gate header, events with the indexed columns the queries need.
    r#"
    CREATE TABLE sessions (
        pk             INTEGER PRIMARY KEY,
        app_name       TEXT    NOT NULL,
        user_id        TEXT    NOT NULL,
        session_id     TEXT    NOT NULL,
        state          TEXT    NOT NULL,            -- JSON object
        revision       INTEGER NOT NULL,            -- = number of events appended
        created_at     REAL    NOT NULL,            -- epoch seconds
        updated_at     REAL    NOT NULL,            -- epoch seconds
        -- The gate header (see header.rs): completed turns since the live compaction are
        -- closed_turns + (open_turn = 2).
        closed_turns   INTEGER NOT NULL DEFAULT 0,
        open_turn      INTEGER NOT NULL DEFAULT 0,  -- 0 none, 1 open, 2 open and completed
        prompt_tokens  INTEGER,                     -- latest coordinator prompt token count
        live_seq       INTEGER,                     -- seq of the live compaction event
        live_start     REAL,
        live_end       REAL,
        UNIQUE (app_name, user_id, session_id)
    );

    CREATE TABLE events (
        session_pk     INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
        seq            INTEGER NOT NULL,            -- 1-based append order = revision after it
        event_id       TEXT    NOT NULL,
        invocation_id  TEXT    NOT NULL,
        ts             REAL    NOT NULL,
        scope          TEXT,                        -- isolation_scope; NULL for the coordinator
        is_compaction  INTEGER NOT NULL,
        comp_start     REAL,
        comp_end       REAL,
        is_rewind      INTEGER NOT NULL,
        in_view        INTEGER NOT NULL,            -- in the coordinator view (rewinds applied, unscoped)
        subsumed       INTEGER NOT NULL DEFAULT 0,  -- a compaction subsumed by another in the view
        body           TEXT    NOT NULL,            -- the whole event as JSON
        PRIMARY KEY (session_pk, seq),
        UNIQUE (session_pk, event_id)
    );

    -- load_context: coordinator events around the live compaction's range.
    CREATE INDEX events_view_ts ON events (session_pk, ts)
        WHERE in_view = 1 AND is_compaction = 0;

    -- Subsumption and the live compaction: the compactions of the view.
    CREATE INDEX events_view_compactions ON events (session_pk, comp_end, seq)
        WHERE in_view = 1 AND is_compaction = 1;
    "#,
    // 2: no schema change. Turn completion now passes over actions-only events (a callback's
    // state delta, `end_of_agent`) and thought parts, and an attachment alone opens a turn, so
    // every stored gate header is recounted from its history in the same transaction
    // (`recount_turn_headers`).
    "",
    // 3: shadow-mode decisions (compaction-core's `DecisionRecord` as JSON), kept beside the
    // session, never in its event history.
    r#"
    CREATE TABLE IF NOT EXISTS decisions (
        session_pk INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
        seq        INTEGER NOT NULL,                -- 1-based, in recording order
        body       TEXT    NOT NULL,
        PRIMARY KEY (session_pk, seq)
    );
    "#,
    // 4: lossless recall's index (module `recall`): the text of every searchable event in an
    // FTS5 external-content table, and each event's turn-start flag; built for the stored
    // events in the same transaction (`recall::backfill`).
    crate::recall_index::MIGRATION,
];

/// The first migration after which stored turn counts follow the current completion rule.
const TURN_RULE_VERSION: i64 = 2;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Reads `PRAGMA user_version`. This is also the first read of the file, so a file that is not
/// a database fails here.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// What [`migrate`] found.
pub(crate) enum Migration {
    /// The file is at [`SCHEMA_VERSION`] (after applying `applied` migrations).
    Current {
        /// Migrations applied now.
        applied: usize,
    },
    /// The file is newer than this build; nothing was written.
    Future(i64),
}

/// Brings the file to [`SCHEMA_VERSION`] in one immediate transaction, so that two processes
/// opening a new file at once migrate it exactly once.
pub(crate) fn migrate(conn: &mut Connection) -> rusqlite::Result<Migration> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = user_version(&tx)?;
    if found > SCHEMA_VERSION {
        return Ok(Migration::Future(found));
    }
    let start = usize::try_from(found).unwrap_or(0);
    for sql in &MIGRATIONS[start..] {
        tx.execute_batch(sql)?;
    }
    if found > 0 && found < TURN_RULE_VERSION {
        recount_turn_headers(&tx)?;
    }
    if found < crate::recall_index::RECALL_VERSION {
        crate::recall_index::backfill(&tx)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(Migration::Current {
        applied: MIGRATIONS.len() - start,
    })
}

/// Recounts every session's completed turns since its live compaction from its stored
/// history, with compaction-core's rules ([`crate::header::Recomputed`]). A body that does not
/// parse fails the migration (and so the open), naming the event; nothing is written then.
fn recount_turn_headers(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let sessions: Vec<i64> = tx
        .prepare("SELECT pk FROM sessions")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut read =
        tx.prepare("SELECT event_id, body FROM events WHERE session_pk = ?1 ORDER BY seq")?;
    let mut write =
        tx.prepare("UPDATE sessions SET closed_turns = ?2, open_turn = ?3 WHERE pk = ?1")?;
    for pk in sessions {
        let mut events = Vec::new();
        let mut rows = read.query([pk])?;
        while let Some(row) = rows.next()? {
            let id: String = row.get(0)?;
            let body: String = row.get(1)?;
            let event: compaction_core::Event = serde_json::from_str(&body).map_err(|e| {
                rusqlite::Error::ToSqlConversionFailure(
                    format!("event {id:?} of session row {pk} does not parse: {e}").into(),
                )
            })?;
            events.push(event);
        }
        let tracker = crate::header::Recomputed::from_history(&events).tracker;
        write.execute((
            pk,
            i64::try_from(tracker.closed).unwrap_or(i64::MAX),
            tracker.open.code(),
        ))?;
    }
    Ok(())
}
