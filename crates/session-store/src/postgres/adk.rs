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
//! As on SQLite, ADK's layout has no gate header: the gate snapshot and the live tail read
//! every row of the session as an outline (the server drops `content` before sending), then
//! the tail's rows whole.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use compaction_core::{
    Event, GateSnapshot, Revision, ScopedUserMessages, Session, SessionKey, SessionStore,
    StoreError, Timestamp, coordinator_prompt_tokens, coordinator_view, gate_input,
    rolling_tail_positions, scoped_user_candidate_positions, scoped_user_messages,
};
use deadpool_postgres::{Object, Transaction};
use serde_json::{Map, Value};
use tokio_postgres::IsolationLevel;
use tokio_postgres::error::SqlState;

use crate::adk_shape::{
    self, RowProblem, format_datetime_micros, parse_datetime_micros, seconds_to_micros,
};
use crate::error::SessionStoreError;
use crate::postgres::{PostgresAccess, PostgresOptions, PostgresStore};

type Operation<'a> = &'a (dyn Fn() -> String + Sync);

/// A time column as `YYYY-MM-DD HH:MM:SS.ffffff` text, whatever the server's `DateStyle`.
macro_rules! time_text {
    ($column:literal) => {
        concat!("to_char(", $column, ", 'YYYY-MM-DD HH24:MI:SS.US')")
    };
}

/// The expected form of ADK's time columns on PostgreSQL, for error messages.
const EXPECTED_TIME: &str = "a naive UTC timestamp (ADK's PreciseTimestamp on PostgreSQL)";

/// The schema real ADK uses: its tables are created unqualified, in `public`.
pub const ADK_DEFAULT_SCHEMA: &str = "public";

/// What a PostgreSQL database holds, as [`detect_postgres_layout`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostgresLayout {
    /// Neither this crate's store nor ADK's tables: a native store may be created.
    Empty,
    /// This crate's native store ([`PostgresStore`]) in its schema.
    Native,
    /// Google ADK's `DatabaseSessionService` schema v1 ([`AdkPostgresStore`]).
    AdkDatabase,
}

impl PostgresLayout {
    /// A short human name, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            PostgresLayout::Empty => "no session store",
            PostgresLayout::Native => "native adaptive-compaction session store",
            PostgresLayout::AdkDatabase => {
                "Google ADK DatabaseSessionService database (schema v1) on PostgreSQL"
            }
        }
    }
}

/// Detects, without writing (every transaction is read-only), what the database at `url`
/// holds: the native store in `native_schema` (it wins when both are there), ADK's tables in
/// `adk_schema` (ADK itself uses [`ADK_DEFAULT_SCHEMA`]), or neither. ADK's legacy v0 layout
/// is [`SessionStoreError::AdkLegacySchema`] (ADK's `adk migrate session` converts it); ADK
/// tables of another version or shape are [`SessionStoreError::NotAdkDatabase`].
pub async fn detect_postgres_layout(
    url: &str,
    native_schema: &str,
    adk_schema: &str,
) -> Result<PostgresLayout, SessionStoreError> {
    let probe = PostgresStore::pool(
        url,
        &PostgresOptions::default()
            .schema(adk_schema)
            .access(PostgresAccess::ReadOnly)
            .max_connections(1),
    )?;
    let op = || "detecting the layout of the database".to_owned();
    let client = probe.client(&op).await?;
    let result = classify(&probe, &client, Some(native_schema), adk_schema).await;
    probe.release(client, &result);
    result
}

/// Classifies the database: the native store in `native_schema` (when given) first, then ADK's
/// tables in `adk_schema`.
async fn classify(
    probe: &PostgresStore,
    client: &Object,
    native_schema: Option<&str>,
    adk_schema: &str,
) -> Result<PostgresLayout, SessionStoreError> {
    let op = || "detecting the layout of the database".to_owned();
    let op: Operation<'_> = &op;
    if let Some(native_schema) = native_schema {
        let native: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM information_schema.tables \
                 WHERE table_schema = $1 AND table_name = 'schema_version')",
                &[&native_schema],
            )
            .await
            .map_err(probe.pg(op))?
            .get(0);
        if native {
            return Ok(PostgresLayout::Native);
        }
    }
    // (table, column, data type) of ADK's tables.
    let columns: Vec<(String, String, String)> = client
        .query(
            "SELECT table_name::text, column_name::text, data_type::text \
             FROM information_schema.columns WHERE table_schema = $1 \
             AND table_name IN ('adk_internal_metadata', 'sessions', 'events')",
            &[&adk_schema],
        )
        .await
        .map_err(probe.pg(op))?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let column = |table: &str, name: &str| {
        columns
            .iter()
            .find(|(t, c, _)| t == table && c == name)
            .map(|(_, _, ty)| ty.as_str())
    };
    let has_table = |table: &str| columns.iter().any(|(t, _, _)| t == table);
    let not_adk = |detail: String| SessionStoreError::NotAdkDatabase {
        path: probe.path(),
        detail,
    };
    if has_table("adk_internal_metadata") {
        let version: Option<String> = client
            .query_opt(
                "SELECT value::text FROM adk_internal_metadata WHERE key = 'schema_version'",
                &[],
            )
            .await
            .map_err(probe.pg(op))?
            .map(|r| r.get(0));
        match version.as_deref() {
            Some("1") => {}
            Some("0") => return Err(SessionStoreError::AdkLegacySchema { path: probe.path() }),
            other => {
                return Err(not_adk(format!(
                    "adk_internal_metadata says schema_version {other:?}; this build reads version 1"
                )));
            }
        }
    } else if has_table("sessions") && has_table("events") {
        if column("events", "actions").is_some() && column("events", "event_data").is_none() {
            return Err(SessionStoreError::AdkLegacySchema { path: probe.path() });
        }
        return Err(not_adk(format!(
            "schema {adk_schema} holds tables sessions and events but no adk_internal_metadata"
        )));
    } else {
        return Ok(PostgresLayout::Empty);
    }
    for (table, name, wanted) in [
        ("sessions", "update_time", "timestamp without time zone"),
        ("sessions", "state", "jsonb"),
        ("events", "timestamp", "timestamp without time zone"),
        ("events", "event_data", "jsonb"),
    ] {
        match column(table, name) {
            Some(ty) if ty == wanted => {}
            found => {
                return Err(not_adk(format!(
                    "{table}.{name} is {}, expected {wanted} as ADK's DatabaseSessionService \
                     creates it on PostgreSQL",
                    found.unwrap_or("missing")
                )));
            }
        }
    }
    Ok(PostgresLayout::AdkDatabase)
}

/// One row of `events`, in ADK's order.
struct EventRow {
    id: String,
    invocation_id: String,
    /// The `timestamp` column as text.
    column_timestamp: String,
    /// `event_data` as JSON text (the outline query drops `content`).
    data: Option<String>,
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
    db: PostgresStore,
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl AdkPostgresStore {
    /// Connects to an ADK database at `url` whose tables are in [`ADK_DEFAULT_SCHEMA`].
    pub async fn connect(url: &str) -> Result<Self, SessionStoreError> {
        Self::connect_with(url, PostgresOptions::default().schema(ADK_DEFAULT_SCHEMA)).await
    }

    /// Connects with `options`: `options.schema` names the schema holding ADK's tables;
    /// [`PostgresAccess::ReadOnly`] makes every transaction read-only (the other modes are
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
            PostgresLayout::AdkDatabase => Ok(AdkPostgresStore { db }),
            other => Err(SessionStoreError::NotAdkDatabase {
                path: db.path(),
                detail: format!("schema {} holds {}", options.schema, other.describe()),
            }),
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

    /// Reads `update_time` (locking the row `FOR UPDATE` when `lock`); `None`: no session.
    async fn read_revision(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        lock: bool,
        op: Operation<'_>,
    ) -> Result<Option<Revision>, SessionStoreError> {
        let sql = format!(
            "SELECT {} FROM sessions WHERE app_name = $1 AND user_id = $2 AND id = $3{}",
            time_text!("update_time"),
            if lock { " FOR UPDATE" } else { "" }
        );
        let stmt = tx.prepare_cached(&sql).await.map_err(self.db.pg(op))?;
        let Some(row) = tx
            .query_opt(&stmt, &[&key.app_name, &key.user_id, &key.session_id])
            .await
            .map_err(self.db.pg(op))?
        else {
            return Ok(None);
        };
        let text: Option<String> = row.get(0);
        let text = text.unwrap_or_else(|| "NULL".to_owned());
        let micros = parse_datetime_micros(&text)
            .ok_or_else(|| self.bad_time(key, "sessions", "update_time", text))?;
        Ok(Some(Revision(micros.max(0).unsigned_abs())))
    }

    /// The session's state merged as ADK's `_merge_state` merges it.
    async fn read_merged_state(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        op: Operation<'_>,
    ) -> Result<Map<String, Value>, SessionStoreError> {
        let row = tx
            .query_one(
                "SELECT s.state::text, \
                   (SELECT a.state::text FROM app_states a WHERE a.app_name = $1), \
                   (SELECT u.state::text FROM user_states u WHERE u.app_name = $1 AND u.user_id = $2) \
                 FROM sessions s WHERE s.app_name = $1 AND s.user_id = $2 AND s.id = $3",
                &[&key.app_name, &key.user_id, &key.session_id],
            )
            .await
            .map_err(self.db.pg(op))?;
        let parse = |i: usize| -> Result<Map<String, Value>, SessionStoreError> {
            match row.get::<_, Option<String>>(i) {
                None => Ok(Map::new()),
                Some(text) => self.db.parse_state(key, &text),
            }
        };
        let mut state = parse(0)?;
        for (k, v) in parse(1)? {
            state.insert(format!("app:{k}"), v);
        }
        for (k, v) in parse(2)? {
            state.insert(format!("user:{k}"), v);
        }
        Ok(state)
    }

    /// Runs `read` in one repeatable-read, read-only transaction with the session's revision
    /// and merged state; a missing session is [`SessionStoreError::NotFound`].
    async fn read<T>(
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
            let Some(revision) = self.read_revision(&tx, key, false, op).await? else {
                return Err(self.db.not_found(key));
            };
            let state = self.read_merged_state(&tx, key, op).await?;
            let value = read(&tx, revision, state).await?;
            tx.commit().await.map_err(self.db.pg(op))?;
            Ok(value)
        }
        .await;
        self.db.release(client, &result);
        result
    }

    /// Every event row of the session in ADK's order; `outline` drops `content` in the server.
    async fn event_rows(
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
        Ok(rows
            .iter()
            .map(|r| EventRow {
                id: r.get(0),
                invocation_id: r.get(1),
                column_timestamp: r.get(2),
                data: r.get(3),
            })
            .collect())
    }

    /// Rebuilds an event as ADK's `StorageEvent.to_event` does
    /// ([`crate::adk_shape::event_from_row`]), naming the event in what goes wrong.
    fn parse_event(
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
    fn row_problem(
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

    /// The rolling tail ([`compaction_core::rolling_tail_positions`]), the coordinator prompt
    /// tokens of the whole history and the user messages filed inside a scope, in one read
    /// transaction: every row as an outline, then the rows of the tail (and the few
    /// scoped-user candidates) whole, by primary key. Mirrors the SQLite `AdkStore`.
    async fn read_live_tail(
        &self,
        key: &SessionKey,
    ) -> Result<(Session, Option<u64>, ScopedUserMessages), SessionStoreError> {
        self.read(key, async |tx, revision, state| {
            let op = || format!("reading the live tail of session {key}");
            let op: Operation<'_> = &op;
            let rows = self.event_rows(tx, key, true, op).await?;
            let mut outlines = Vec::with_capacity(rows.len());
            for (position, row) in rows.into_iter().enumerate() {
                let id = row.id.clone();
                let column = row.column_timestamp;
                let event = crate::adk_shape::outline_from_row(
                    row.id,
                    row.invocation_id,
                    row.data.as_deref(),
                    || column_seconds(&column),
                )
                .map_err(|problem| self.row_problem(key, position, &id, problem))?;
                outlines.push(event);
            }
            let prompt_tokens = coordinator_prompt_tokens(coordinator_view(&outlines).into_iter());
            let stmt = tx
                .prepare_cached(&format!(
                    "SELECT id::text, invocation_id::text, {}, event_data::text FROM events \
                     WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND id = $4",
                    time_text!("timestamp")
                ))
                .await
                .map_err(self.db.pg(op))?;
            let read_whole =
                async |positions: Vec<usize>| -> Result<Vec<Event>, SessionStoreError> {
                    let mut events = Vec::with_capacity(positions.len());
                    for position in positions {
                        let id = &outlines[position].id;
                        let r = tx
                            .query_one(&stmt, &[&key.app_name, &key.user_id, &key.session_id, id])
                            .await
                            .map_err(self.db.pg(op))?;
                        let row = EventRow {
                            id: r.get(0),
                            invocation_id: r.get(1),
                            column_timestamp: r.get(2),
                            data: r.get(3),
                        };
                        events.push(self.parse_event(key, position, row)?);
                    }
                    Ok(events)
                };
            let events = read_whole(rolling_tail_positions(&outlines)).await?;
            let scoped = scoped_user_messages(
                &read_whole(scoped_user_candidate_positions(&outlines)).await?,
            );
            let session = Session {
                key: key.clone(),
                state,
                events,
                revision,
            };
            Ok((session, prompt_tokens, scoped))
        })
        .await
    }

    /// Loads the session's state, revision and live tail (see
    /// [`compaction_core::SessionStore::load_live_tail`]) in one read transaction.
    pub async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        Ok(self.read_live_tail(key).await?.0)
    }

    /// The user messages ADK's Runner filed inside a pipeline scope no `finish_task` closed.
    pub async fn scoped_user_messages(
        &self,
        key: &SessionKey,
    ) -> Result<ScopedUserMessages, SessionStoreError> {
        Ok(self.read_live_tail(key).await?.2)
    }

    /// The gate's figures and their revision, from one read of the live tail (as the SQLite
    /// `AdkStore` computes them).
    pub async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, SessionStoreError> {
        let (tail, prompt_tokens, _) = self.read_live_tail(key).await?;
        let mut input = gate_input(&tail.events);
        input.coordinator_prompt_tokens = prompt_tokens;
        Ok(GateSnapshot::new(input, tail.revision))
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
        if let Some(reason) = adk_shape::refusal(event) {
            return Err(SessionStoreError::AdkUnsupportedEvent {
                path: self.db.path(),
                key: Box::new(key.clone()),
                event_id: event.id.clone(),
                reason,
            });
        }
        let seconds = event.timestamp.seconds();
        let new_micros =
            seconds_to_micros(seconds).ok_or_else(|| SessionStoreError::AdkUnsupportedEvent {
                path: self.db.path(),
                key: Box::new(key.clone()),
                event_id: event.id.clone(),
                reason: format!("timestamp {seconds} is out of range"),
            })?;
        let body = serde_json::to_string(event).map_err(|e| {
            self.db
                .serialize_error(key, format!("event {:?}", event.id), e)
        })?;
        let op = || format!("appending event {:?} to session {key}", event.id);
        let op: Operation<'_> = &op;
        let mut client = self.db.client(op).await?;
        let result = async {
            let tx = client.transaction().await.map_err(self.db.pg(op))?;
            let Some(actual) = self.read_revision(&tx, key, true, op).await? else {
                return Err(self.db.not_found(key));
            };
            if actual != expected {
                return Err(SessionStoreError::Stale {
                    path: self.db.path(),
                    key: key.clone(),
                    expected,
                    actual,
                });
            }
            // ADK's update_time is its latest event's timestamp: timestamps strictly increase.
            if new_micros <= 0 || new_micros.unsigned_abs() <= actual.0 {
                return Err(SessionStoreError::NonIncreasingTimestamp {
                    path: self.db.path(),
                    key: Box::new(key.clone()),
                    event_id: event.id.clone(),
                    latest: Timestamp::new(actual.0 as f64 / 1e6).unwrap_or(Timestamp::EPOCH),
                    offered: event.timestamp,
                });
            }
            let time = format_datetime_micros(new_micros);
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
                        &body,
                    ],
                )
                .await;
            match inserted {
                Ok(_) => {}
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    return Err(SessionStoreError::DuplicateEvent {
                        path: self.db.path(),
                        key: key.clone(),
                        event_id: event.id.clone(),
                    });
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
            Ok(Revision(new_micros.unsigned_abs()))
        }
        .await;
        self.db.release(client, &result);
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
fn column_seconds(text: &str) -> Result<f64, String> {
    parse_datetime_micros(text)
        .map(|us| us as f64 / 1e6)
        .ok_or_else(|| text.to_owned())
}
