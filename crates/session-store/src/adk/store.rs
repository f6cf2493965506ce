//! [`AdkStore`]: compaction-core's `SessionStore` port over an existing Google ADK sessions
//! database, read and written in ADK's own shapes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use compaction_core::{
    Event, GateSnapshot, Revision, ScopedUserMessages, Session, SessionKey, Timestamp, gate_input,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::{Map, Value};

use super::detect::{Layout, detect_layout};
use super::schema::{self, AdkFlavor};
use crate::adk_shape::RowProblem;
use crate::error::SessionStoreError;
use crate::options::OpenOptions;

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) path: PathBuf,
    pub(super) flavor: AdkFlavor,
    options: OpenOptions,
    conn: Mutex<Connection>,
    /// The last outline read's answer, by revision ([`crate::tail_memo`]).
    tail: crate::tail_memo::TailMemo,
    /// Where what this store knows about the file is kept ([`crate::state_dir`]).
    pub(super) state_dir: Option<PathBuf>,
    /// The outline checkpoints of the sessions read ([`super::outline`]).
    pub(super) checkpoints: Mutex<HashMap<SessionKey, super::outline::SqliteCheckpoint>>,
}

/// One row of the `events` table, borrowed from the statement.
pub(super) struct EventRow<'r> {
    /// Its place in ADK's order, from 0.
    pub(super) position: usize,
    pub(super) rowid: i64,
    pub(super) id: String,
    pub(super) invocation_id: String,
    pub(super) column_timestamp: rusqlite::types::ValueRef<'r>,
    pub(super) data: Option<&'r str>,
}

impl<'r> EventRow<'r> {
    /// The row of a statement selecting `id, invocation_id, timestamp, event_data, rowid`.
    pub(super) fn read(row: &'r rusqlite::Row<'r>, position: usize) -> rusqlite::Result<Self> {
        let data = row.get_ref(3).and_then(|v| {
            v.as_str_or_null().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(3, v.data_type(), Box::new(e))
            })
        })?;
        Ok(EventRow {
            position,
            id: row.get(0)?,
            invocation_id: row.get(1)?,
            column_timestamp: row.get_ref(2)?,
            data,
            rowid: row.get(4)?,
        })
    }
}

/// Whether a store may write.
#[derive(Debug, Clone, Copy)]
enum Access {
    ReadWrite,
    ReadOnly,
}

/// A Google ADK sessions database (written by `DatabaseSessionService` or
/// `SqliteSessionService`), operated on in place. Cheap to clone; safe to share.
///
/// - **Revision** = the session's `update_time` in microseconds since the epoch: exactly what
///   ADK's optimistic-concurrency check compares.
/// - **load** returns every event in ADK's own order (timestamp, then `id` for
///   `DatabaseSessionService`, insertion for `SqliteSessionService`) with the event JSON's
///   `timestamp` winning over the column, and the state merged as ADK merges it (`app:` and
///   `user:` prefixes). Rewinds and isolation scopes are then applied by compaction-core
///   exactly as ADK's prompt builder applies them (`_apply_rewinds`, `isolation_scope`
///   equality).
/// - **append** runs one `BEGIN IMMEDIATE` transaction: it checks `update_time` against the
///   expected revision, inserts the event in ADK's column encoding, and sets `update_time`
///   to the event's timestamp, so that an ADK process still holding the old session fails its
///   next append with `StaleSessionError` instead of silently diverging. A writer holding the
///   lock (ADK mid-append) is waited for up to the busy timeout.
///
/// It never changes the file's journal mode or schema, and never rewrites an existing event.
#[derive(Debug, Clone)]
pub struct AdkStore {
    pub(super) inner: Arc<Inner>,
}

impl AdkStore {
    /// Opens an existing ADK sessions database with the default [`OpenOptions`] (busy timeout
    /// 5 s; the durability setting is ignored: the file keeps ADK's own journal settings).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SessionStoreError> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens an existing ADK sessions database. Refuses, without writing, a file that is not
    /// one of ADK's two current layouts: a legacy v0 file names `adk migrate session`. What the
    /// store learns about the file (when it was last checked whole, each session's outline
    /// checkpoint) is kept in the platform's cache directory ([`AdkStore::open_with_state_dir`]).
    pub fn open_with(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        Self::open_as(
            path.as_ref(),
            options,
            Access::ReadWrite,
            crate::state_dir::platform(),
        )
    }

    /// [`AdkStore::open_with`], keeping what the store learns about the file in `state_dir`
    /// (`None`: nowhere, so every writing open checks the whole file under
    /// [`IntegrityCheck::Unchanged`](crate::IntegrityCheck::Unchanged) and every new store
    /// outlines each session whole once). Nothing is ever written beside ADK's file. See
    /// ARCHITECTURE.md, "ADK files".
    pub fn open_with_state_dir(
        path: impl AsRef<Path>,
        options: OpenOptions,
        state_dir: Option<PathBuf>,
    ) -> Result<Self, SessionStoreError> {
        Self::open_as(path.as_ref(), options, Access::ReadWrite, state_dir)
    }

    /// Opens an existing ADK sessions database for reading only (`compaction inspect`): every
    /// write is refused and no `-wal`/`-shm` file is left behind; otherwise as
    /// [`AdkStore::open_with`].
    pub fn open_read_only(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        Self::open_as(
            path.as_ref(),
            options,
            Access::ReadOnly,
            crate::state_dir::platform(),
        )
    }

    fn open_as(
        path: &Path,
        options: OpenOptions,
        access: Access,
        state_dir: Option<PathBuf>,
    ) -> Result<Self, SessionStoreError> {
        let path = path.to_path_buf();
        let flavor = match detect_layout(&path)? {
            Layout::AdkDatabase => AdkFlavor::Database,
            Layout::AdkSqlite => AdkFlavor::Sqlite,
            Layout::AdkLegacyV0 => return Err(SessionStoreError::AdkLegacySchema { path }),
            other => {
                return Err(SessionStoreError::NotAdkDatabase {
                    detail: format!("the file is a {}", other.describe()),
                    path,
                });
            }
        };
        let fail = |what: &'static str| {
            let path = path.clone();
            move |e: rusqlite::Error| {
                SessionStoreError::sqlite(&path, options.busy_timeout, || what.to_owned(), e)
            }
        };
        let conn = match access {
            Access::ReadWrite => Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .and_then(|conn| conn.busy_timeout(options.busy_timeout).map(|()| conn)),
            Access::ReadOnly => crate::integrity::read_connection(&path, options.busy_timeout),
        }
        .map_err(fail("opening the ADK database"))?;
        // Damage is found before anything is written: the whole file on the interval the state
        // directory records, every page a run touches by SQLite itself.
        match access {
            Access::ReadWrite => crate::integrity::verify_recorded(
                &conn,
                &path,
                options.integrity,
                options.busy_timeout,
                state_dir.as_deref(),
            )?,
            Access::ReadOnly => {
                crate::integrity::verify(&conn, &path, options.integrity, options.busy_timeout)
                    .map(|_| ())?
            }
        }
        // ADK turns foreign keys on for every connection; do the same.
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(fail("enabling foreign keys"))?;
        Ok(AdkStore {
            inner: Arc::new(Inner {
                path,
                flavor,
                options,
                conn: Mutex::new(conn),
                tail: Default::default(),
                state_dir,
                checkpoints: Default::default(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Which ADK service's layout the file has.
    pub fn flavor(&self) -> AdkFlavor {
        self.inner.flavor
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn sqlite_error<'a>(
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

    fn bad_time(
        &self,
        key: &SessionKey,
        table: &'static str,
        column: &'static str,
        value: String,
    ) -> SessionStoreError {
        SessionStoreError::AdkBadTime {
            path: self.inner.path.clone(),
            key: Box::new(key.clone()),
            table,
            column,
            value,
            expected: schema::expected_form(self.inner.flavor),
        }
    }

    /// Encodes microseconds for a time column of this flavor.
    fn time_value(&self, micros: i64, seconds: f64) -> rusqlite::types::Value {
        match self.inner.flavor {
            AdkFlavor::Database => {
                rusqlite::types::Value::Text(schema::format_datetime_micros(micros))
            }
            AdkFlavor::Sqlite => rusqlite::types::Value::Real(seconds),
        }
    }

    /// Creates an empty session the way ADK's `create_session` does, including (for
    /// `DatabaseSessionService`) the `app_states` and `user_states` rows ADK's next append
    /// requires. Returns it at its revision.
    pub fn create_session(
        &self,
        key: &SessionKey,
        state: Map<String, Value>,
    ) -> Result<Session, SessionStoreError> {
        let op = || format!("creating session {key}");
        let json =
            serde_json::to_string(&state).map_err(|source| SessionStoreError::Serialize {
                path: self.inner.path.clone(),
                key: Box::new(key.clone()),
                what: "state".to_owned(),
                source,
            })?;
        let now = crate::row::now_seconds();
        let micros = schema::seconds_to_micros(now).unwrap_or(0);
        let time = self.time_value(micros, now);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite_error(op))?;
        if self.inner.flavor == AdkFlavor::Database {
            tx.execute(
                "INSERT OR IGNORE INTO app_states (app_name, state, update_time) VALUES (?1, '{}', ?2)",
                params![key.app_name, time],
            )
            .and_then(|_| {
                tx.execute(
                    "INSERT OR IGNORE INTO user_states (app_name, user_id, state, update_time) \
                     VALUES (?1, ?2, '{}', ?3)",
                    params![key.app_name, key.user_id, time],
                )
            })
            .map_err(self.sqlite_error(op))?;
        }
        let inserted = tx.execute(
            "INSERT INTO sessions (app_name, user_id, id, state, create_time, update_time) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
            params![key.app_name, key.user_id, key.session_id, json, time],
        );
        match inserted {
            Ok(_) => {}
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                return Err(SessionStoreError::AlreadyExists {
                    path: self.inner.path.clone(),
                    key: key.clone(),
                });
            }
            Err(e) => return Err(self.sqlite_error(op)(e)),
        }
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(Session {
            key: key.clone(),
            state,
            events: Vec::new(),
            revision: Revision(micros.unsigned_abs()),
        })
    }

    /// The session's revision: its `update_time` in microseconds.
    pub fn revision(&self, key: &SessionKey) -> Result<Revision, SessionStoreError> {
        let conn = self.conn();
        self.read_revision(&conn, key)?
            .ok_or_else(|| self.not_found(key))
    }

    fn not_found(&self, key: &SessionKey) -> SessionStoreError {
        SessionStoreError::NotFound {
            path: self.inner.path.clone(),
            key: key.clone(),
        }
    }

    fn read_revision(
        &self,
        conn: &Connection,
        key: &SessionKey,
    ) -> Result<Option<Revision>, SessionStoreError> {
        let op = || format!("reading update_time of session {key}");
        let raw = conn
            .query_row(
                "SELECT update_time FROM sessions WHERE app_name = ?1 AND user_id = ?2 AND id = ?3",
                params![key.app_name, key.user_id, key.session_id],
                |row| row.get::<_, rusqlite::types::Value>(0),
            )
            .optional()
            .map_err(self.sqlite_error(op))?;
        let Some(raw) = raw else { return Ok(None) };
        let micros = schema::column_micros((&raw).into())
            .map_err(|v| self.bad_time(key, "sessions", "update_time", v))?;
        Ok(Some(Revision(micros.max(0).unsigned_abs())))
    }

    fn read_state(
        &self,
        conn: &Connection,
        key: &SessionKey,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
        what: &str,
    ) -> Result<Option<Map<String, Value>>, SessionStoreError> {
        let op = || format!("reading the {what} state of session {key}");
        let text: Option<Option<String>> = conn
            .query_row(sql, args, |row| row.get(0))
            .optional()
            .map_err(self.sqlite_error(op))?;
        match text.flatten() {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|source| {
                SessionStoreError::CorruptState {
                    path: self.inner.path.clone(),
                    key: key.clone(),
                    source,
                }
            }),
        }
    }

    /// The session's state merged as ADK's `_merge_state` merges it: session keys, then
    /// `app:` and `user:` prefixed ones.
    fn read_merged_state(
        &self,
        conn: &Connection,
        key: &SessionKey,
    ) -> Result<Map<String, Value>, SessionStoreError> {
        let mut state = self
            .read_state(
                conn,
                key,
                "SELECT state FROM sessions WHERE app_name = ?1 AND user_id = ?2 AND id = ?3",
                &[&key.app_name, &key.user_id, &key.session_id],
                "session",
            )?
            .unwrap_or_default();
        let app_state = self.read_state(
            conn,
            key,
            "SELECT state FROM app_states WHERE app_name = ?1",
            &[&key.app_name],
            "app",
        )?;
        let user_state = self.read_state(
            conn,
            key,
            "SELECT state FROM user_states WHERE app_name = ?1 AND user_id = ?2",
            &[&key.app_name, &key.user_id],
            "user",
        )?;
        for (k, v) in app_state.unwrap_or_default() {
            state.insert(format!("app:{k}"), v);
        }
        for (k, v) in user_state.unwrap_or_default() {
            state.insert(format!("user:{k}"), v);
        }
        Ok(state)
    }

    /// Runs `read` in one read transaction with the session's revision and merged state;
    /// a missing session is [`SessionStoreError::NotFound`].
    fn read_session<T>(
        &self,
        key: &SessionKey,
        read: impl FnOnce(&Connection, Revision, Map<String, Value>) -> Result<T, SessionStoreError>,
    ) -> Result<T, SessionStoreError> {
        let op = || format!("loading session {key}");
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(self.sqlite_error(op))?;
        let Some(revision) = self.read_revision(&tx, key)? else {
            return Err(self.not_found(key));
        };
        let state = self.read_merged_state(&tx, key)?;
        let out = read(&tx, revision, state)?;
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(out)
    }

    /// Selects `columns` of the session's events in ADK's order (timestamp, then `id` for
    /// `DatabaseSessionService`, insertion for `SqliteSessionService`).
    fn events_sql(&self, columns: &str) -> String {
        let order = match self.inner.flavor {
            AdkFlavor::Database => "timestamp ASC, id ASC",
            AdkFlavor::Sqlite => "timestamp ASC, rowid ASC",
        };
        format!(
            "SELECT {columns} FROM events \
             WHERE app_name = ?1 AND user_id = ?2 AND session_id = ?3 ORDER BY {order}"
        )
    }

    /// Loads a session with its whole history, as ADK's `get_session` would (one read
    /// transaction).
    pub fn get_session(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        self.read_session(key, |conn, revision, state| {
            let mut events = Vec::new();
            self.for_each_event_row(conn, key, |row| {
                let event = self.parse_event(
                    key,
                    row.position,
                    row.id,
                    row.invocation_id,
                    schema::column_seconds(row.column_timestamp),
                    row.data,
                )?;
                events.push(event);
                Ok(())
            })?;
            Ok(Session {
                key: key.clone(),
                state,
                events,
                revision,
            })
        })
    }

    /// Calls `each` with every event row of the session, in ADK's order.
    pub(super) fn for_each_event_row(
        &self,
        conn: &Connection,
        key: &SessionKey,
        mut each: impl FnMut(EventRow<'_>) -> Result<(), SessionStoreError>,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("reading the events of session {key}");
        let sql = self.events_sql("id, invocation_id, timestamp, event_data, rowid");
        let mut stmt = conn.prepare(&sql).map_err(self.sqlite_error(op))?;
        let mut rows = stmt
            .query(params![key.app_name, key.user_id, key.session_id])
            .map_err(self.sqlite_error(op))?;
        let mut position = 0;
        while let Some(row) = rows.next().map_err(self.sqlite_error(op))? {
            each(EventRow::read(row, position).map_err(self.sqlite_error(op))?)?;
            position += 1;
        }
        Ok(())
    }

    /// The session with only its rolling tail ([`compaction_core::rolling_tail_positions`]:
    /// the live tail plus every other summary ADK still renders and the uncovered events
    /// from the earliest one's start, so that the engine folds ADK's own overlapping
    /// summaries into one), in one read transaction, plus the coordinator prompt tokens of
    /// the whole history and the user messages filed inside a scope. ADK's layout has no
    /// index on compactions, so this outlines the rows appended since the session's checkpoint
    /// (all of them on the first read; module `outline`) as [`EventOutline`]s (timestamp,
    /// author, scope, prompt tokens, compaction range, rewind target; the content is skipped
    /// unread); the rows of the tail are then read whole by primary key. A row whose JSON does
    /// not parse is refused when it is outlined, as in [`AdkStore::get_session`]; one that
    /// outlines but would not parse whole is reported only when it is in the tail.
    fn read_live_tail(
        &self,
        key: &SessionKey,
    ) -> Result<(Session, Option<u64>, ScopedUserMessages), SessionStoreError> {
        self.read_session(key, |conn, revision, state| {
            let tail = self.tail_at(conn, key, revision)?;
            let session = Session {
                key: key.clone(),
                state,
                events: tail.events,
                revision,
            };
            Ok((session, tail.prompt_tokens, tail.scoped))
        })
    }

    /// The kept answer at `revision`, or a new read of it (then kept).
    fn tail_at(
        &self,
        conn: &Connection,
        key: &SessionKey,
        revision: Revision,
    ) -> Result<crate::tail_memo::Tail, SessionStoreError> {
        if let Some(tail) = self.inner.tail.get(key, revision) {
            return Ok(tail);
        }
        let tail = self.read_tail(conn, key, revision)?;
        self.inner.tail.put(tail.clone());
        Ok(tail)
    }

    /// Loads the session's state, revision and live tail (see
    /// [`compaction_core::SessionStore::load_live_tail`]) in one read transaction.
    pub fn load_live_tail(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        Ok(self.read_live_tail(key)?.0)
    }

    /// The user messages of the session that ADK's Runner filed inside a pipeline scope (see
    /// [`ScopedUserMessages`]: a scope no `finish_task` closed), from one outline read, or
    /// without one after this store's own append ([`crate::tail_memo`]).
    pub fn scoped_user_messages(
        &self,
        key: &SessionKey,
    ) -> Result<ScopedUserMessages, SessionStoreError> {
        self.read_session(key, |conn, revision, _state| {
            match self.inner.tail.scoped(key, revision) {
                Some(scoped) => Ok(scoped),
                None => Ok(self.tail_at(conn, key, revision)?.scoped),
            }
        })
    }

    /// The gate's figures and the revision they belong to, from one read of the live tail:
    /// the completed turns since the live compaction come from the tail, the coordinator
    /// prompt tokens from the outlines of the whole history. They equal
    /// [`compaction_core::gate_input`] of the whole history whenever timestamps follow
    /// append order.
    pub fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, SessionStoreError> {
        let (tail, prompt_tokens, _) = self.read_live_tail(key)?;
        let mut input = gate_input(&tail.events);
        input.coordinator_prompt_tokens = prompt_tokens;
        Ok(GateSnapshot::new(input, tail.revision))
    }

    /// The event at `position` (from 0, in ADK's order) does not parse.
    fn corrupt_event(
        &self,
        key: &SessionKey,
        position: usize,
        id: &str,
        source: serde_json::Error,
    ) -> SessionStoreError {
        SessionStoreError::CorruptEvent {
            path: self.inner.path.clone(),
            key: Box::new(key.clone()),
            revision: position as u64 + 1,
            event_id: id.to_owned(),
            source,
        }
    }

    /// Rebuilds an event as ADK's `StorageEvent.to_event` does
    /// ([`crate::adk_shape::event_from_row`]), naming the event in what goes wrong.
    pub(super) fn parse_event(
        &self,
        key: &SessionKey,
        index: usize,
        id: String,
        invocation: String,
        column_ts: Result<f64, String>,
        data: Option<&str>,
    ) -> Result<Event, SessionStoreError> {
        crate::adk_shape::event_from_row(&id, invocation, data, || column_ts)
            .map_err(|problem| self.row_problem(key, index, &id, problem))
    }

    /// What went wrong rebuilding the event at `position` (from 0), as this store's error.
    pub(super) fn row_problem(
        &self,
        key: &SessionKey,
        position: usize,
        id: &str,
        problem: RowProblem,
    ) -> SessionStoreError {
        match problem {
            RowProblem::Json(e) => self.corrupt_event(key, position, id, e),
            RowProblem::Time(value) => self.bad_time(key, "events", "timestamp", value),
            RowProblem::BackwardsCompaction { start, end } => {
                SessionStoreError::BackwardsCompaction {
                    path: self.inner.path.clone(),
                    key: Box::new(key.clone()),
                    revision: position as u64 + 1,
                    event_id: id.to_owned(),
                    start,
                    end,
                }
            }
        }
    }

    /// Refuses an event ADK would not load, or whose effects ADK applies but this store does
    /// not (state deltas): [`crate::adk_shape::refusal`].
    fn check_event(&self, key: &SessionKey, event: &Event) -> Result<(), SessionStoreError> {
        match crate::adk_shape::refusal(event) {
            None => Ok(()),
            Some(reason) => Err(SessionStoreError::AdkUnsupportedEvent {
                path: self.inner.path.clone(),
                key: Box::new(key.clone()),
                event_id: event.id.clone(),
                reason,
            }),
        }
    }

    /// Appends `event` if the session's `update_time` is still `expected` (microseconds),
    /// then sets `update_time` to the event's timestamp, all in one `BEGIN IMMEDIATE`
    /// transaction. Returns the new revision. The event's timestamp must be later than the
    /// stored `update_time`, or ADK could not see that the session moved on.
    pub fn append_event(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: &Event,
    ) -> Result<Revision, SessionStoreError> {
        self.check_event(key, event)?;
        let op = || format!("appending event {:?} to session {key}", event.id);
        let seconds = event.timestamp.seconds();
        let new_micros = schema::seconds_to_micros(seconds).ok_or_else(|| {
            SessionStoreError::AdkUnsupportedEvent {
                path: self.inner.path.clone(),
                key: Box::new(key.clone()),
                event_id: event.id.clone(),
                reason: format!("timestamp {seconds} is out of range"),
            }
        })?;
        let body = serde_json::to_string(event).map_err(|source| SessionStoreError::Serialize {
            path: self.inner.path.clone(),
            key: Box::new(key.clone()),
            what: format!("event {:?}", event.id),
            source,
        })?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite_error(op))?;
        let Some(actual) = self.read_revision(&tx, key)? else {
            return Err(self.not_found(key));
        };
        if actual != expected {
            return Err(SessionStoreError::Stale {
                path: self.inner.path.clone(),
                key: key.clone(),
                expected,
                actual,
            });
        }
        // ADK's update_time is its latest event's timestamp, so this is the port's rule
        // (timestamps strictly increase), applied to every event as ADK needs it.
        if new_micros <= 0 || new_micros.unsigned_abs() <= actual.0 {
            return Err(SessionStoreError::NonIncreasingTimestamp {
                path: self.inner.path.clone(),
                key: Box::new(key.clone()),
                event_id: event.id.clone(),
                latest: Timestamp::new(actual.0 as f64 / 1e6).unwrap_or(Timestamp::EPOCH),
                offered: event.timestamp,
            });
        }
        let time = self.time_value(new_micros, seconds);
        let inserted = tx.execute(
            "INSERT INTO events (id, app_name, user_id, session_id, invocation_id, timestamp, event_data) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                event.id,
                key.app_name,
                key.user_id,
                key.session_id,
                event.invocation_id,
                time,
                body
            ],
        );
        match inserted {
            Ok(_) => {}
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                return Err(SessionStoreError::DuplicateEvent {
                    path: self.inner.path.clone(),
                    key: key.clone(),
                    event_id: event.id.clone(),
                });
            }
            Err(e) => return Err(self.sqlite_error(op)(e)),
        }
        tx.execute(
            "UPDATE sessions SET update_time = ?1 WHERE app_name = ?2 AND user_id = ?3 AND id = ?4",
            params![time, key.app_name, key.user_id, key.session_id],
        )
        .map_err(self.sqlite_error(op))?;
        tx.commit().map_err(self.sqlite_error(op))?;
        let to = Revision(new_micros.unsigned_abs());
        self.inner.tail.advance(key, expected, to, event);
        Ok(to)
    }
}
