//! [`AdkStore`]'s reads: the session's revision and state as ADK merges it, its events in ADK's
//! order (whole, or as the rolling tail and gate figures the outline read gives), in one read
//! transaction each.

use compaction_core::{
    Event, GateSnapshot, Revision, ScopedUserMessages, Session, SessionKey, gate_input,
};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};

use super::schema::{self, AdkFlavor};
use super::store::AdkStore;
use crate::error::SessionStoreError;

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

impl AdkStore {
    /// The session's revision: its `update_time` in microseconds.
    pub fn revision(&self, key: &SessionKey) -> Result<Revision, SessionStoreError> {
        let conn = self.conn();
        self.read_revision(&conn, key)?
            .ok_or_else(|| self.not_found(key))
    }

    pub(super) fn read_revision(
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
            Ok(self.tail_at(conn, key, revision)?.into_session(state))
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
    /// without one after this store's own append (`crate::tail_memo`).
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
}
