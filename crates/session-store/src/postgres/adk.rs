//! [`AdkPostgresStore`]: Google ADK's own `DatabaseSessionService` layout on PostgreSQL
//! (`postgresql+asyncpg://…`, schema v1), as compaction-core's `SessionStore` port.
//!
//! The layout is the SQLAlchemy model of the SQLite "database" layout
//! ([`crate::blocking::AdkStore`]); on PostgreSQL its JSON columns are `jsonb` and its time
//! columns `timestamp without time zone` holding naive UTC (google-adk 2.13.0 strips the zone
//! on PostgreSQL). The fixture `tests/fixtures/adk-database-v1-postgres.sql` is the DDL real
//! ADK created.
//!
//! # ADK's rules this store follows (google-adk 2.13.0, `database_session_service.py`)
//! - **Revision.** ADK's stale check compares the stored `update_time` to the microsecond
//!   (`get_update_marker`); the [`Revision`] handed out here is that value in microseconds
//!   since the epoch. An append sets `update_time` to the event's timestamp (as ADK does), so
//!   it refuses an event not strictly later than the stored `update_time`.
//! - **Row lock.** ADK's `append_event` reads the session row `FOR UPDATE` on PostgreSQL; so
//!   does [`AdkPostgresStore::append_event`], in the transaction that inserts the event and
//!   moves `update_time`: an ADK writer and this store queue on the same lock, and the later
//!   one finds the marker moved and is refused as stale.
//! - **Order.** Events load by `timestamp`, ties by `id` (ADK's own `ORDER BY`, with the
//!   database's collation); the JSON `timestamp` wins over the column.
//! - **Event shape and state rows**: as on SQLite ([`crate::adk_shape::refusal`]; the
//!   `app_states` / `user_states` rows are written by `create_session`).
//!
//! Times cross the wire as text (`to_char(…, 'YYYY-MM-DD HH24:MI:SS.US')` out, an ISO literal
//! cast to `timestamp` in), so no time zone setting of the server or the session can shift
//! them.
//!
//! # Cost
//! As on SQLite, ADK's layout has no gate header: the gate snapshot and the live tail are
//! functions of every row's outline. A read outlines only the rows after the session's
//! checkpoint in ADK's order (module `adk_outline`; the server drops `content` before sending),
//! then reads the tail's rows whole in one batched statement (module `adk_tail`), once per
//! revision of the session ([`crate::tail_memo`]). An append waits for ADK's row lock at most 5 s
//! (`lock_timeout`), then fails `store_locked`.

use async_trait::async_trait;
use compaction_core::{
    Event, GateSnapshot, Revision, Session, SessionKey, SessionStore, StoreError,
};
use deadpool_postgres::Transaction;
use serde_json::{Map, Value};
use tokio_postgres::IsolationLevel;
use tokio_postgres::error::SqlState;

use crate::adk_append::AdkAppend;
use crate::adk_shape::{
    RowProblem, format_datetime_micros, parse_datetime_micros, seconds_to_micros,
};
use crate::error::SessionStoreError;
use crate::postgres::adk_detect::{PostgresLayout, classify};
use crate::postgres::{PostgresOptions, PostgresStore};

pub(crate) type Operation<'a> = &'a (dyn Fn() -> String + Sync);

/// A time column as `YYYY-MM-DD HH:MM:SS.ffffff` text, whatever the server's `DateStyle`.
macro_rules! time_text {
    ($column:literal) => {
        concat!("to_char(", $column, ", 'YYYY-MM-DD HH24:MI:SS.US')")
    };
}
pub(crate) use time_text;

/// The expected form of ADK's time columns on PostgreSQL, for error messages.
const EXPECTED_TIME: &str = "a naive UTC timestamp (ADK's PreciseTimestamp on PostgreSQL)";

/// The schema real ADK uses: its tables are created unqualified, in `public`.
pub const ADK_DEFAULT_SCHEMA: &str = "public";

/// One row of `events`, in ADK's order.
#[derive(Clone)]
pub(crate) struct EventRow {
    pub(crate) id: String,
    pub(crate) invocation_id: String,
    /// The `timestamp` column as text.
    pub(crate) column_timestamp: String,
    /// `event_data` as JSON text (the outline query drops `content`).
    pub(crate) data: Option<String>,
}

/// Google ADK's `DatabaseSessionService` database on PostgreSQL, operated on in place. Cheap
/// to clone (one shared pool). Implements compaction-core's
/// [`SessionStore`](compaction_core::SessionStore) port.
///
/// - **Revision** = the session's `update_time` in microseconds since the epoch.
/// - **load** returns every event in ADK's order with the state merged as ADK merges it
///   (`app:` and `user:` prefixes), in one repeatable-read transaction.
/// - **append** locks the session row (`SELECT … FOR UPDATE`, ADK's own lock), checks
///   `update_time` against the expected revision, inserts the event and sets `update_time` to
///   the event's timestamp, in one transaction.
///
/// It never creates or alters ADK's tables and never rewrites an existing event.
#[derive(Debug, Clone)]
pub struct AdkPostgresStore {
    pub(crate) db: PostgresStore,
    /// The last outline read's answer, by revision (module `adk_tail`).
    pub(crate) tail: std::sync::Arc<crate::tail_memo::TailMemo>,
    /// Where the sessions' outline checkpoints are kept between processes (module `adk_outline`).
    pub(crate) state_dir: Option<std::path::PathBuf>,
    /// The outline checkpoints of the sessions read.
    pub(crate) checkpoints: crate::postgres::adk_outline::Kept,
}

use crate::row::now_seconds;

impl AdkPostgresStore {
    /// Connects to an ADK database at `url` whose tables are in [`ADK_DEFAULT_SCHEMA`].
    pub async fn connect(url: &str) -> Result<Self, SessionStoreError> {
        Self::connect_with(url, PostgresOptions::default().schema(ADK_DEFAULT_SCHEMA)).await
    }

    /// Connects with `options`: `options.schema` names the schema holding ADK's tables;
    /// [`PostgresAccess::ReadOnly`](crate::postgres::PostgresAccess::ReadOnly) makes every transaction read-only (the other modes are
    /// the same here: this store never creates anything). A database without ADK's schema v1
    /// tables there is refused before anything is written.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<Self, SessionStoreError> {
        let db = PostgresStore::pool(url, &options)?;
        let op = || "checking Google ADK's tables".to_owned();
        let client = db.client(&op).await?;
        let result = classify(&db, &client, None, &options.schema).await;
        db.release(client, &result);
        match result? {
            PostgresLayout::AdkDatabase => Ok(AdkPostgresStore::over(db)),
            other => Err(SessionStoreError::NotAdkDatabase {
                path: db.path(),
                detail: format!("schema {} holds {}", options.schema, other.describe()),
            }),
        }
    }

    /// The store over a pool whose database was found to hold ADK's tables.
    pub(crate) fn over(db: PostgresStore) -> Self {
        AdkPostgresStore {
            db,
            tail: Default::default(),
            state_dir: crate::state_dir::platform(),
            checkpoints: Default::default(),
        }
    }

    /// The database, without the password: `postgres://user@host:port/dbname (schema public)`.
    pub fn database(&self) -> &str {
        self.db.database()
    }

    fn bad_time(
        &self,
        key: &SessionKey,
        table: &'static str,
        column: &'static str,
        value: String,
    ) -> SessionStoreError {
        SessionStoreError::AdkBadTime {
            path: self.db.path(),
            key: Box::new(key.clone()),
            table,
            column,
            value,
            expected: EXPECTED_TIME,
        }
    }

    fn corrupt_event(
        &self,
        key: &SessionKey,
        position: usize,
        id: &str,
        source: serde_json::Error,
    ) -> SessionStoreError {
        SessionStoreError::CorruptEvent {
            path: self.db.path(),
            key: Box::new(key.clone()),
            revision: position as u64 + 1,
            event_id: id.to_owned(),
            source,
        }
    }

    /// Creates an empty session as ADK's `create_session` does, with the `app_states` and
    /// `user_states` rows ADK's next append requires. Returns it at its revision.
    pub async fn create_session(
        &self,
        key: &SessionKey,
        state: Map<String, Value>,
    ) -> Result<Session, SessionStoreError> {
        let json =
            serde_json::to_string(&state).map_err(|e| self.db.serialize_error(key, "state", e))?;
        let micros = seconds_to_micros(now_seconds()).unwrap_or(0);
        let time = format_datetime_micros(micros);
        let op = || format!("creating session {key}");
        let op: Operation<'_> = &op;
        let mut client = self.db.client(op).await?;
        let result = async {
            let tx = client.transaction().await.map_err(self.db.pg(op))?;
            tx.execute(
                "INSERT INTO app_states (app_name, state, update_time) \
                 VALUES ($1, '{}'::jsonb, $2::text::timestamp) ON CONFLICT DO NOTHING",
                &[&key.app_name, &time],
            )
            .await
            .map_err(self.db.pg(op))?;
            tx.execute(
                "INSERT INTO user_states (app_name, user_id, state, update_time) \
                 VALUES ($1, $2, '{}'::jsonb, $3::text::timestamp) ON CONFLICT DO NOTHING",
                &[&key.app_name, &key.user_id, &time],
            )
            .await
            .map_err(self.db.pg(op))?;
            let inserted = tx
                .execute(
                    "INSERT INTO sessions (app_name, user_id, id, state, create_time, update_time) \
                     VALUES ($1, $2, $3, $4::text::jsonb, $5::text::timestamp, $5::text::timestamp)",
                    &[&key.app_name, &key.user_id, &key.session_id, &json, &time],
                )
                .await;
            match inserted {
                Ok(_) => {}
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    return Err(SessionStoreError::AlreadyExists {
                        path: self.db.path(),
                        key: key.clone(),
                    });
                }
                Err(e) => return Err(self.db.pg(op)(e)),
            }
            tx.commit().await.map_err(self.db.pg(op))
        }
        .await;
        self.db.release(client, &result);
        result?;
        Ok(Session {
            key: key.clone(),
            state,
            events: Vec::new(),
            revision: Revision(micros.unsigned_abs()),
        })
    }

    /// The session's revision: its `update_time` in microseconds.
    pub async fn revision(&self, key: &SessionKey) -> Result<Revision, SessionStoreError> {
        self.read(key, async |_, revision, _| Ok(revision)).await
    }

    /// Reads `update_time` of the row locked `FOR UPDATE` (ADK's own lock); `None`: no session.
    async fn lock_revision(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        op: Operation<'_>,
    ) -> Result<Option<Revision>, SessionStoreError> {
        let sql = format!(
            "SELECT {} FROM sessions WHERE app_name = $1 AND user_id = $2 AND id = $3 FOR UPDATE",
            time_text!("update_time"),
        );
        let stmt = tx.prepare_cached(&sql).await.map_err(self.db.pg(op))?;
        let row = tx
            .query_opt(&stmt, &[&key.app_name, &key.user_id, &key.session_id])
            .await
            .map_err(self.db.pg(op))?;
        row.map(|row| self.revision_of(key, self.db.column(&row, 0, op)?))
            .transpose()
    }

    /// The revision an `update_time` (as text) stands for.
    fn revision_of(
        &self,
        key: &SessionKey,
        text: Option<String>,
    ) -> Result<Revision, SessionStoreError> {
        let text = text.unwrap_or_else(|| "NULL".to_owned());
        let micros = parse_datetime_micros(&text)
            .ok_or_else(|| self.bad_time(key, "sessions", "update_time", text))?;
        Ok(Revision(micros.max(0).unsigned_abs()))
    }

    /// The session's revision and its state merged as ADK's `_merge_state` merges it, in one
    /// statement; `None`: no session.
    async fn read_header(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        op: Operation<'_>,
    ) -> Result<Option<(Revision, Map<String, Value>)>, SessionStoreError> {
        let sql = format!(
            "SELECT {}, s.state::text, \
               (SELECT a.state::text FROM app_states a WHERE a.app_name = $1), \
               (SELECT u.state::text FROM user_states u WHERE u.app_name = $1 AND u.user_id = $2) \
             FROM sessions s WHERE s.app_name = $1 AND s.user_id = $2 AND s.id = $3",
            time_text!("s.update_time")
        );
        let stmt = tx.prepare_cached(&sql).await.map_err(self.db.pg(op))?;
        let Some(row) = tx
            .query_opt(&stmt, &[&key.app_name, &key.user_id, &key.session_id])
            .await
            .map_err(self.db.pg(op))?
        else {
            return Ok(None);
        };
        let revision = self.revision_of(key, self.db.column(&row, 0, op)?)?;
        let parse = |i: usize| -> Result<Map<String, Value>, SessionStoreError> {
            match self.db.column::<Option<String>>(&row, i, op)? {
                None => Ok(Map::new()),
                Some(text) => self.db.parse_state(key, &text),
            }
        };
        let mut state = parse(1)?;
        for (k, v) in parse(2)? {
            state.insert(format!("app:{k}"), v);
        }
        for (k, v) in parse(3)? {
            state.insert(format!("user:{k}"), v);
        }
        Ok(Some((revision, state)))
    }

    /// Runs `read` in one repeatable-read, read-only transaction with the session's revision
    /// and merged state; a missing session is [`SessionStoreError::NotFound`].
    pub(crate) async fn read<T>(
        &self,
        key: &SessionKey,
        read: impl AsyncFnOnce(
            &Transaction<'_>,
            Revision,
            Map<String, Value>,
        ) -> Result<T, SessionStoreError>,
    ) -> Result<T, SessionStoreError> {
        let op = || format!("loading session {key}");
        let op: Operation<'_> = &op;
        let mut client = self.db.client(op).await?;
        let result = async {
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(self.db.pg(op))?;
            let Some((revision, state)) = self.read_header(&tx, key, op).await? else {
                return Err(self.db.not_found(key));
            };
            let value = read(&tx, revision, state).await?;
            tx.commit().await.map_err(self.db.pg(op))?;
            Ok(value)
        }
        .await;
        self.db.release(client, &result);
        result
    }

    /// Every event row of the session in ADK's order; `outline` drops `content` in the server.
    pub(crate) async fn event_rows(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        outline: bool,
        op: Operation<'_>,
    ) -> Result<Vec<EventRow>, SessionStoreError> {
        let data = if outline {
            "CASE WHEN jsonb_typeof(event_data) = 'object' \
             THEN (event_data - 'content')::text ELSE event_data::text END"
        } else {
            "event_data::text"
        };
        let sql = format!(
            "SELECT id::text, invocation_id::text, {}, {data} FROM events \
             WHERE app_name = $1 AND user_id = $2 AND session_id = $3 \
             ORDER BY timestamp ASC, id ASC",
            time_text!("timestamp")
        );
        let stmt = tx.prepare_cached(&sql).await.map_err(self.db.pg(op))?;
        let rows = tx
            .query(&stmt, &[&key.app_name, &key.user_id, &key.session_id])
            .await
            .map_err(self.db.pg(op))?;
        rows.iter()
            .map(|r| {
                Ok(EventRow {
                    id: self.db.column(r, 0, op)?,
                    invocation_id: self.db.column(r, 1, op)?,
                    column_timestamp: self.db.column(r, 2, op)?,
                    data: self.db.column(r, 3, op)?,
                })
            })
            .collect()
    }

    /// Rebuilds an event as ADK's `StorageEvent.to_event` does
    /// ([`crate::adk_shape::event_from_row`]), naming the event in what goes wrong.
    pub(crate) fn parse_event(
        &self,
        key: &SessionKey,
        position: usize,
        row: EventRow,
    ) -> Result<Event, SessionStoreError> {
        let EventRow {
            id,
            invocation_id,
            column_timestamp,
            data,
        } = row;
        crate::adk_shape::event_from_row(&id, invocation_id, data.as_deref(), || {
            column_seconds(&column_timestamp)
        })
        .map_err(|problem| self.row_problem(key, position, &id, problem))
    }

    /// What went wrong rebuilding the event at `position` (from 0), as this store's error.
    pub(crate) fn row_problem(
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
                    path: self.db.path(),
                    key: Box::new(key.clone()),
                    revision: position as u64 + 1,
                    event_id: id.to_owned(),
                    start,
                    end,
                }
            }
        }
    }

    /// Loads a session with its whole history, as ADK's `get_session` would.
    pub async fn get_session(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        self.read(key, async |tx, revision, state| {
            let op = || format!("reading the events of session {key}");
            let rows = self.event_rows(tx, key, false, &op).await?;
            let events = rows
                .into_iter()
                .enumerate()
                .map(|(position, row)| self.parse_event(key, position, row))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Session {
                key: key.clone(),
                state,
                events,
                revision,
            })
        })
        .await
    }

    /// Appends `event` if the session's `update_time` is still `expected` (microseconds),
    /// then sets `update_time` to the event's timestamp, in one transaction that holds ADK's
    /// row lock (`SELECT … FOR UPDATE`) from the check to the commit. Returns the new
    /// revision. The event's timestamp must be later than the stored `update_time`.
    pub async fn append_event(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: &Event,
    ) -> Result<Revision, SessionStoreError> {
        let plan = AdkAppend::new(self.db.path(), key, event)?;
        let op = || format!("appending event {:?} to session {key}", event.id);
        let op: Operation<'_> = &op;
        let mut client = self.db.client(op).await?;
        let result = async {
            let tx = client.transaction().await.map_err(self.db.pg(op))?;
            // A row lock held by another transaction (ADK mid-append) is waited for at most
            // the pool's `lock_timeout` (`PostgresOptions`, 5 s as SQLite's busy timeout):
            // then the run ends `store_locked`.
            plan.check(self.lock_revision(&tx, key, op).await?, expected)?;
            let time = format_datetime_micros(plan.micros);
            let inserted = tx
                .execute(
                    "INSERT INTO events \
                     (id, app_name, user_id, session_id, invocation_id, timestamp, event_data) \
                     VALUES ($1, $2, $3, $4, $5, $6::text::timestamp, $7::text::jsonb)",
                    &[
                        &event.id,
                        &key.app_name,
                        &key.user_id,
                        &key.session_id,
                        &event.invocation_id,
                        &time,
                        &plan.body,
                    ],
                )
                .await;
            match inserted {
                Ok(_) => {}
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    return Err(plan.duplicate());
                }
                Err(e) => return Err(self.db.pg(op)(e)),
            }
            tx.execute(
                "UPDATE sessions SET update_time = $1::text::timestamp \
                 WHERE app_name = $2 AND user_id = $3 AND id = $4",
                &[&time, &key.app_name, &key.user_id, &key.session_id],
            )
            .await
            .map_err(self.db.pg(op))?;
            tx.commit().await.map_err(self.db.pg(op))?;
            Ok(plan.revision())
        }
        .await;
        self.db.release(client, &result);
        if let Ok(to) = result {
            self.tail.advance(key, expected, to, event);
        }
        result
    }
}

// ADK's tables may not be given indexes of ours, so the context and the compaction history
// come from the port's defaults (the whole session, read once), as for the SQLite `AdkStore`.
#[async_trait]
impl SessionStore for AdkPostgresStore {
    async fn create_session(
        &self,
        key: &SessionKey,
        state: Map<String, Value>,
    ) -> Result<Session, StoreError> {
        Ok(AdkPostgresStore::create_session(self, key, state).await?)
    }

    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError> {
        Ok(self.get_session(key).await?)
    }

    async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
        Ok(AdkPostgresStore::load_live_tail(self, key).await?)
    }

    async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
        Ok(AdkPostgresStore::gate_snapshot(self, key).await?)
    }

    async fn append(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: Event,
    ) -> Result<Revision, StoreError> {
        Ok(self.append_event(key, expected, &event).await?)
    }
}

/// The `timestamp` column (text, as the reads select it) in epoch seconds; the text itself
/// when it is not a time.
pub(crate) fn column_seconds(text: &str) -> Result<f64, String> {
    parse_datetime_micros(text)
        .map(|us| us as f64 / 1e6)
        .ok_or_else(|| text.to_owned())
}
