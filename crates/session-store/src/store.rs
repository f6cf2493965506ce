//! [`SqliteStore`]: opening the file, the connection settings, and the session-level calls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use compaction_core::{Event, GateSnapshot, Revision, Session, SessionKey};

use crate::row::SessionHeader;
use rusqlite::{Connection, OptionalExtension, Transaction};
use serde_json::{Map, Value};

use crate::error::SessionStoreError;
use crate::integrity;
use crate::options::OpenOptions;
pub(crate) use crate::row::{LiveRef, SessionRow, now_seconds, tokens_to_sql};
use crate::schema::{self, Migration, SCHEMA_VERSION};
use compaction_core::store_support::{OpenTurn, TurnTracker};

fn tokens_from_sql(tokens: Option<i64>) -> Option<u64> {
    tokens.map(|t| t as u64)
}

const SESSION_ROW: &str = "SELECT pk, revision, closed_turns, open_turn, prompt_tokens, \
     live_seq, live_start, live_end FROM sessions \
     WHERE app_name = ?1 AND user_id = ?2 AND session_id = ?3";

/// Reads the session row of `key`, if the session exists.
pub(crate) fn session_row(
    conn: &Connection,
    key: &SessionKey,
) -> rusqlite::Result<Option<SessionRow>> {
    let mut stmt = conn.prepare_cached(SESSION_ROW)?;
    stmt.query_row((&key.app_name, &key.user_id, &key.session_id), |row| {
        let live_seq: Option<i64> = row.get(5)?;
        let live_start: Option<f64> = row.get(6)?;
        let live_end: Option<f64> = row.get(7)?;
        let live = match (live_seq, live_start, live_end) {
            (Some(seq), Some(start), Some(end)) => Some(LiveRef { seq, start, end }),
            _ => None,
        };
        Ok(SessionRow {
            pk: row.get(0)?,
            revision: row.get::<_, i64>(1)?.unsigned_abs(),
            tracker: TurnTracker {
                closed: row.get::<_, i64>(2)?.unsigned_abs(),
                open: OpenTurn::from_code(row.get(3)?),
            },
            prompt_tokens: tokens_from_sql(row.get(4)?),
            live,
        })
    })
    .optional()
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    options: OpenOptions,
    conn: Mutex<Connection>,
    /// A writing store: when its last handle goes, it closes the connection and records the
    /// check stamp (`crate::stamp`) with this time of the last whole-file check.
    stamp_on_close: Option<f64>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(checked_at) = self.stamp_on_close else {
            return;
        };
        // Close first: the last connection checkpoints the WAL into the file and removes it, so
        // the stamp records the file as it stays.
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner);
        let Ok(placeholder) = Connection::open_in_memory() else {
            return;
        };
        if std::mem::replace(conn, placeholder).close().is_ok() {
            crate::stamp::record(&self.path, checked_at);
        }
    }
}

/// A durable session store in one SQLite file. Cheap to clone (the clones share one
/// connection); safe to share between threads and tasks; several processes may open the same
/// file at once.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` with the default [`OpenOptions`]:
    /// migrates an older or empty file, refuses a newer one.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SessionStoreError> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens the store at `path` with `options`.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        let path = path.as_ref().to_path_buf();
        let fail = |what: &'static str| {
            let path = path.clone();
            move |e: rusqlite::Error| {
                SessionStoreError::sqlite(&path, options.busy_timeout, || what.to_owned(), e)
            }
        };
        let mut conn = Connection::open(&path).map_err(fail("opening the database"))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(fail("setting the busy timeout"))?;
        // The first read: a file that is not a database fails here, before anything is written.
        let found = schema::user_version(&conn).map_err(fail("reading the schema version"))?;
        if found > SCHEMA_VERSION {
            return Err(SessionStoreError::FutureSchema {
                path,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        // Damage is found before anything is written (the journal mode included). The stamp is
        // forgotten while this store may write: only its clean close records a new one.
        let last_check = integrity::verify(&conn, &path, options.integrity, options.busy_timeout)
            .inspect_err(|_| crate::stamp::forget(&path))?;
        crate::stamp::forget(&path);
        // A file with user_version 0 that already holds tables (a Google ADK database has
        // tables `sessions` and `events` too) is someone else's: refuse it untouched, before
        // the journal mode or the schema is changed.
        if found == 0
            && let Some((what, hint)) =
                crate::adk::foreign_schema(&conn).map_err(fail("inspecting the tables"))?
        {
            return Err(SessionStoreError::ForeignDatabase { path, what, hint });
        }
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(fail("switching to the WAL journal"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(SessionStoreError::JournalMode { path, mode });
        }
        conn.pragma_update(None, "synchronous", options.durability.pragma())
            .map_err(fail("setting synchronous"))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(fail("enabling foreign keys"))?;
        match schema::migrate(&mut conn).map_err(fail("migrating the schema"))? {
            Migration::Future(found) => {
                return Err(SessionStoreError::FutureSchema {
                    path,
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            Migration::Current { applied } if applied > 0 => {
                tracing::info!(path = %path.display(), applied, version = SCHEMA_VERSION, "migrated session store");
            }
            Migration::Current { .. } => {}
        }
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                options,
                conn: Mutex::new(conn),
                stamp_on_close: last_check,
            }),
        })
    }

    /// Opens an existing store for reading only (`compaction inspect`): the file is never
    /// created, migrated or switched to another journal mode, every write is refused, and no
    /// `-wal`/`-shm` file is left behind. A file from a newer schema, or without this store's
    /// schema, is refused. `options.integrity` is run first (default quick check).
    pub fn open_read_only(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        let path = path.as_ref().to_path_buf();
        let fail = |what: &'static str| {
            let path = path.clone();
            move |e: rusqlite::Error| {
                SessionStoreError::sqlite(&path, options.busy_timeout, || what.to_owned(), e)
            }
        };
        let conn = integrity::read_connection(&path, options.busy_timeout)
            .map_err(fail("opening the database to read it"))?;
        let found = schema::user_version(&conn).map_err(fail("reading the schema version"))?;
        if found > SCHEMA_VERSION {
            return Err(SessionStoreError::FutureSchema {
                path,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found == 0 {
            return Err(SessionStoreError::NoSchema { path });
        }
        integrity::verify(&conn, &path, options.integrity, options.busy_timeout)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                options,
                conn: Mutex::new(conn),
                stamp_on_close: None,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options the store was opened with.
    pub fn options(&self) -> OpenOptions {
        self.inner.options
    }

    /// The connection. A panic while it was held leaves no open transaction behind (rusqlite
    /// rolls back on drop), so a poisoned lock is safe to take over.
    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Wraps a SQLite error with the file and `operation`.
    pub(crate) fn sqlite_error<'a>(
        &'a self,
        operation: impl FnOnce() -> String + 'a,
    ) -> impl FnOnce(rusqlite::Error) -> SessionStoreError + 'a {
        move |e| {
            SessionStoreError::sqlite(
                &self.inner.path,
                self.inner.options.busy_timeout,
                operation,
                e,
            )
        }
    }

    pub(crate) fn not_found(&self, key: &SessionKey) -> SessionStoreError {
        SessionStoreError::NotFound {
            path: self.inner.path.clone(),
            key: key.clone(),
        }
    }

    /// Parses a stored event, naming the file, session, revision and event id on failure.
    pub(crate) fn parse_event(
        &self,
        key: &SessionKey,
        seq: i64,
        event_id: &str,
        body: &str,
    ) -> Result<Event, SessionStoreError> {
        serde_json::from_str(body).map_err(|source| SessionStoreError::CorruptEvent {
            path: self.inner.path.clone(),
            key: Box::new(key.clone()),
            revision: seq.unsigned_abs(),
            event_id: event_id.to_owned(),
            source,
        })
    }

    /// Parses a stored state.
    pub(crate) fn parse_state(
        &self,
        key: &SessionKey,
        state: &str,
    ) -> Result<Map<String, Value>, SessionStoreError> {
        serde_json::from_str(state).map_err(|source| SessionStoreError::CorruptState {
            path: self.inner.path.clone(),
            key: key.clone(),
            source,
        })
    }

    pub(crate) fn serialize_error(
        &self,
        key: &SessionKey,
        what: impl Into<String>,
        source: serde_json::Error,
    ) -> SessionStoreError {
        SessionStoreError::Serialize {
            path: self.inner.path.clone(),
            key: Box::new(key.clone()),
            what: what.into(),
            source,
        }
    }

    /// Creates an empty session at revision 0 with `state`.
    pub fn create_session(
        &self,
        key: &SessionKey,
        state: Map<String, Value>,
    ) -> Result<Session, SessionStoreError> {
        let json =
            serde_json::to_string(&state).map_err(|e| self.serialize_error(key, "state", e))?;
        let now = now_seconds();
        let conn = self.conn();
        let inserted = conn
            .prepare_cached(
                "INSERT INTO sessions (app_name, user_id, session_id, state, revision, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5)",
            )
            .and_then(|mut stmt| stmt.execute((&key.app_name, &key.user_id, &key.session_id, &json, now)));
        match inserted {
            Ok(_) => Ok(Session {
                key: key.clone(),
                state,
                events: Vec::new(),
                revision: Revision(0),
            }),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                Err(SessionStoreError::AlreadyExists {
                    path: self.inner.path.clone(),
                    key: key.clone(),
                })
            }
            Err(e) => Err(self.sqlite_error(|| format!("creating session {key}"))(e)),
        }
    }

    /// Deletes a session and all its events in one transaction (a run that could not finish
    /// a session it created rolls it back, so that its id can be used again). Returns whether
    /// the session existed.
    pub fn delete_session(&self, key: &SessionKey) -> Result<bool, SessionStoreError> {
        let deleted = self
            .conn()
            .prepare_cached(
                "DELETE FROM sessions WHERE app_name = ?1 AND user_id = ?2 AND session_id = ?3",
            )
            .and_then(|mut stmt| stmt.execute((&key.app_name, &key.user_id, &key.session_id)))
            .map_err(self.sqlite_error(|| format!("deleting session {key}")))?;
        Ok(deleted > 0)
    }

    /// Loads a session with its whole history, in append order (one read transaction).
    pub fn get_session(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        let op = || format!("loading session {key}");
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(self.sqlite_error(op))?;
        let Some((pk, revision, state)) = tx
            .prepare_cached(
                "SELECT pk, revision, state FROM sessions \
                 WHERE app_name = ?1 AND user_id = ?2 AND session_id = ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_row((&key.app_name, &key.user_id, &key.session_id), |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })
                .optional()
            })
            .map_err(self.sqlite_error(op))?
        else {
            return Err(self.not_found(key));
        };
        let state = self.parse_state(key, &state)?;
        let events = self.events_of(&tx, key, pk)?;
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(Session {
            key: key.clone(),
            state,
            events,
            revision: Revision(revision.unsigned_abs()),
        })
    }

    /// Every event of the session `pk`, in append order.
    pub(crate) fn events_of(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
    ) -> Result<Vec<Event>, SessionStoreError> {
        let op = || format!("reading the events of session {key}");
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 ORDER BY seq",
            )
            .map_err(self.sqlite_error(op))?;
        let mut rows = stmt.query([pk]).map_err(self.sqlite_error(op))?;
        let mut events = Vec::new();
        while let Some(row) = rows.next().map_err(self.sqlite_error(op))? {
            let (seq, id, body) = read_body(row).map_err(self.sqlite_error(op))?;
            events.push(self.parse_event(key, seq, &id, &body)?);
        }
        Ok(events)
    }

    /// The gate header: one indexed row read.
    pub fn header(&self, key: &SessionKey) -> Result<SessionHeader, SessionStoreError> {
        let conn = self.conn();
        session_row(&conn, key)
            .map_err(self.sqlite_error(|| format!("reading the header of session {key}")))?
            .map(|row| row.header())
            .ok_or_else(|| self.not_found(key))
    }

    /// The gate's figures and the revision they belong to, from the header (what the port's
    /// `gate_snapshot` answers).
    pub fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, SessionStoreError> {
        let header = self.header(key)?;
        Ok(GateSnapshot::new(header.gate, header.revision))
    }

    /// Runs SQLite's `PRAGMA integrity_check`: `Ok(vec!["ok"])` when the file is sound,
    /// otherwise SQLite's list of problems.
    pub fn integrity_check(&self) -> Result<Vec<String>, SessionStoreError> {
        let conn = self.conn();
        let op = || "checking integrity".to_owned();
        let mut stmt = conn
            .prepare("PRAGMA integrity_check")
            .map_err(self.sqlite_error(op))?;
        let rows = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(self.sqlite_error(op))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(self.sqlite_error(op))
    }
}

/// `(seq, event_id, body)` of an events row selected in that order.
pub(crate) fn read_body(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, String, String)> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
}
