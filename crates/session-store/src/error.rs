//! The store's error: every variant names the database file and, where there is one, the
//! session and event it concerns.

use std::path::PathBuf;
#[cfg(feature = "sqlite")]
use std::time::Duration;

use compaction_core::{FailureKind, Revision, SessionKey, StoreError, Timestamp, classified};

/// A session-store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionStoreError {
    /// An unscoped event's timestamp does not increase over the session's latest in-view
    /// event (compaction-core's `history::timestamp_may_follow`); nothing was written.
    #[error(
        "{}: session {key}: event {event_id:?} has timestamp {offered}, not after the latest \
         event's {latest}; a session's event timestamps must strictly increase (nothing written)",
        path.display()
    )]
    NonIncreasingTimestamp {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: Box<SessionKey>,
        /// The refused event.
        event_id: String,
        /// The latest in-view event's timestamp.
        latest: Timestamp,
        /// The refused event's timestamp.
        offered: Timestamp,
    },
    /// The file is not a SQLite database, or SQLite found it corrupt.
    #[cfg(feature = "sqlite")]
    #[error(
        "{}: not a SQLite database, or corrupt, while {operation}: {source}",
        path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What the store was doing (names the session when there is one).
        operation: String,
        /// SQLite's report.
        #[source]
        source: Box<rusqlite::Error>,
    },
    /// SQLite's `quick_check` or `integrity_check` found damage; nothing was written.
    #[error(
        "{}: the database is damaged (PRAGMA {check} found: {report}); it was not written to. \
         Restore it from a backup, or salvage it with `sqlite3 FILE .recover`",
        path.display()
    )]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// The check that found it (`quick_check`, `integrity_check`).
        check: &'static str,
        /// What the check reported (at most a few problems).
        report: String,
    },
    /// The file is a SQLite database without this store's schema, and the caller only reads.
    #[error(
        "{}: not a session store yet (schema version 0); a writing command creates one there",
        path.display()
    )]
    NoSchema {
        /// The database file.
        path: PathBuf,
    },
    /// Another connection held the database lock for longer than the busy timeout.
    #[cfg(feature = "sqlite")]
    #[error(
        "{}: database locked for longer than the busy timeout ({timeout:?}) while {operation}",
        path.display()
    )]
    Locked {
        /// The database file.
        path: PathBuf,
        /// What the store was doing (names the session when there is one).
        operation: String,
        /// The busy timeout that ran out.
        timeout: Duration,
        /// SQLite's report.
        #[source]
        source: Box<rusqlite::Error>,
    },
    /// The file was written by a newer schema version; it is refused and left untouched.
    #[error(
        "{}: schema version {found} is newer than version {supported} this build understands; \
         refusing to open it (the file was not modified)",
        path.display()
    )]
    FutureSchema {
        /// The database file.
        path: PathBuf,
        /// `PRAGMA user_version` found in the file.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// SQLite refused the WAL journal mode the store requires.
    #[error("{}: could not switch to WAL journal mode (SQLite answered {mode:?})", path.display())]
    JournalMode {
        /// The database file.
        path: PathBuf,
        /// The journal mode SQLite reported.
        mode: String,
    },
    /// No session with this key exists.
    #[error("{}: session {key} not found", path.display())]
    NotFound {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: SessionKey,
    },
    /// A recall expansion named a compaction or turns the session does not have.
    #[error("{}: session {key}: {error}", path.display())]
    Expand {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: Box<SessionKey>,
        /// What was missing.
        #[source]
        error: compaction_core::ExpandError,
    },
    /// A session with this key already exists.
    #[error("{}: session {key} already exists", path.display())]
    AlreadyExists {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: SessionKey,
    },
    /// Another writer moved the session on since the caller read it.
    #[error(
        "{}: session {key} is stale: expected revision {expected}, found {actual}",
        path.display()
    )]
    Stale {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: SessionKey,
        /// The revision the writer read.
        expected: Revision,
        /// The revision now stored.
        actual: Revision,
    },
    /// The session already holds an event with this id (event ids are unique per session).
    #[error("{}: session {key} already holds an event with id {event_id:?}", path.display())]
    DuplicateEvent {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: SessionKey,
        /// The duplicated event id.
        event_id: String,
    },
    /// A stored event is not valid event JSON.
    #[error(
        "{}: session {key}, event {event_id:?} at revision {revision}: stored JSON is not a valid \
         event: {source}",
        path.display()
    )]
    CorruptEvent {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: Box<SessionKey>,
        /// The revision the event was appended at (its sequence number, from 1).
        revision: u64,
        /// The event id column.
        event_id: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A stored compaction event covers a range that starts after it ends. ADK never writes
    /// one; taken as the live summary it would hide the history, so every read refuses it.
    #[error(
        "{}: session {key}, event {event_id:?} at revision {revision}: a compaction that starts \
         after it ends (start_timestamp {start}, end_timestamp {end}); the database is corrupt: \
         remove or correct this event",
        path.display()
    )]
    BackwardsCompaction {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: Box<SessionKey>,
        /// The event's position in the session, from 1.
        revision: u64,
        /// The event id.
        event_id: String,
        /// The stored start timestamp (epoch seconds).
        start: f64,
        /// The stored end timestamp (epoch seconds).
        end: f64,
    },
    /// A stored session state is not a JSON object.
    #[error("{}: session {key}: stored state is not a JSON object: {source}", path.display())]
    CorruptState {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: SessionKey,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// An event or state could not be written as JSON.
    #[error("{}: session {key}: could not serialize {what}: {source}", path.display())]
    Serialize {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: Box<SessionKey>,
        /// What failed (`event "e1"`, `state`).
        what: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// Any other SQLite failure (I/O error, disk full, cannot open the file, …).
    #[cfg(feature = "sqlite")]
    #[error("{}: SQLite failed while {operation}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What the store was doing (names the session when there is one).
        operation: String,
        /// SQLite's report.
        #[source]
        source: Box<rusqlite::Error>,
    },
    /// The blocking task that ran a store call panicked or was cancelled.
    #[error("{}: store task failed while {operation}: {message}", path.display())]
    Task {
        /// The database file.
        path: PathBuf,
        /// What the store was doing.
        operation: String,
        /// The runtime's report.
        message: String,
    },
    /// The file already holds tables this store did not create (for example a Google ADK
    /// session database); it is refused and left untouched.
    #[error(
        "{}: {what}; refusing to open it as a native session store (the file was not modified){hint}",
        path.display()
    )]
    ForeignDatabase {
        /// The database file.
        path: PathBuf,
        /// What the file looks like (`looks like a Google ADK session database (tables sessions, events)`).
        what: String,
        /// What to use instead, with a leading separator, or empty.
        hint: String,
    },
    /// The file is a Google ADK session database in the legacy v0 layout (pickled `actions`
    /// column), which this store does not read.
    #[error(
        "{}: a Google ADK session database in the legacy v0 schema (pickled event actions); \
         migrate it with ADK's `adk migrate session` command first (the file was not modified)",
        path.display()
    )]
    AdkLegacySchema {
        /// The database file.
        path: PathBuf,
    },
    /// The file is not a Google ADK session database this build understands.
    #[error("{}: not a Google ADK session database: {detail} (the file was not modified)", path.display())]
    NotAdkDatabase {
        /// The database file.
        path: PathBuf,
        /// What was found instead.
        detail: String,
    },
    /// A time column of an ADK database holds a value that is not a time.
    #[error(
        "{}: {table}.{column} of session {key} holds {value:?}, expected {expected}",
        path.display()
    )]
    AdkBadTime {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: Box<SessionKey>,
        /// The table (`sessions`, `events`).
        table: &'static str,
        /// The column (`update_time`, `timestamp`).
        column: &'static str,
        /// The stored value, as text.
        value: String,
        /// The expected form.
        expected: &'static str,
    },
    /// An event cannot be appended to an ADK database in a shape ADK would load.
    #[error("{}: session {key}, event {event_id:?}: {reason}", path.display())]
    AdkUnsupportedEvent {
        /// The database file.
        path: PathBuf,
        /// The session.
        key: Box<SessionKey>,
        /// The event id.
        event_id: String,
        /// Why ADK would refuse it or silently lose part of it.
        reason: String,
    },
    /// A PostgreSQL failure (connection lost, server error, …). `database` is the connection
    /// string without its password.
    #[cfg(feature = "postgres")]
    #[error("{database}: PostgreSQL failed while {operation}: {detail}")]
    Postgres {
        /// The database, without the password.
        database: String,
        /// What the store was doing (names the session when there is one).
        operation: String,
        /// What kind of failure it is (`transport` for a lost connection, `store_locked` for a
        /// lock or serialization conflict, `store_corrupt` for damaged data, `timeout`).
        kind: FailureKind,
        /// The server's message (severity, text, SQLSTATE) or the driver's report.
        detail: String,
        /// The driver's report.
        #[source]
        source: Box<tokio_postgres::Error>,
    },
    /// No PostgreSQL connection could be had from the pool.
    #[cfg(feature = "postgres")]
    #[error("{database}: no PostgreSQL connection while {operation}: {detail}")]
    PostgresPool {
        /// The database, without the password.
        database: String,
        /// What the store was doing.
        operation: String,
        /// `timeout` when the pool's wait ran out, otherwise `transport`.
        kind: FailureKind,
        /// The pool's report.
        detail: String,
    },
    /// The database holds no session store (or an older one, opened read-only): nothing was
    /// written to it.
    #[cfg(feature = "postgres")]
    #[error("{database}: {detail}")]
    PostgresNoStore {
        /// The database, without the password.
        database: String,
        /// What was found and how to create the store.
        detail: String,
    },
    /// A column holds a value this build cannot read as the type its schema gives the column
    /// (the column was altered, or holds an unexpected NULL): the call fails, and a
    /// transaction it had open is rolled back.
    #[cfg(feature = "postgres")]
    #[error(
        "{database}: column {column} (PostgreSQL type {found}) does not hold the {expected} \
         this build reads there, while {operation}: {source}"
    )]
    PostgresColumn {
        /// The database, without the password.
        database: String,
        /// What the store was doing (names the session when there is one).
        operation: String,
        /// The column's name.
        column: String,
        /// The column's PostgreSQL type (`int4`, `text`).
        found: Box<str>,
        /// The Rust type this build reads the column as (`i64`, `Option<f64>`).
        expected: Box<str>,
        /// The driver's report (a type mismatch, or a NULL).
        #[source]
        source: Box<tokio_postgres::Error>,
    },
    /// The PostgreSQL connection string or options are not usable.
    #[cfg(feature = "postgres")]
    #[error("{database}: {detail}")]
    PostgresConfig {
        /// The database, without the password (or a placeholder when the string did not parse).
        database: String,
        /// What is wrong and the expected form.
        detail: String,
    },
}

impl SessionStoreError {
    /// What kind of failure this is, for the engine's outcome.
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            #[cfg(feature = "sqlite")]
            SessionStoreError::Locked { .. } => FailureKind::StoreLocked,
            #[cfg(feature = "sqlite")]
            SessionStoreError::Corrupt { .. } => FailureKind::StoreCorrupt,
            SessionStoreError::CorruptEvent { .. }
            | SessionStoreError::CorruptState { .. }
            | SessionStoreError::FutureSchema { .. }
            | SessionStoreError::ForeignDatabase { .. }
            | SessionStoreError::NotAdkDatabase { .. }
            | SessionStoreError::AdkLegacySchema { .. }
            | SessionStoreError::AdkBadTime { .. } => FailureKind::StoreCorrupt,
            SessionStoreError::Stale { .. } => FailureKind::Stale,
            SessionStoreError::NotFound { .. } | SessionStoreError::Expand { .. } => {
                FailureKind::NotFound
            }
            #[cfg(feature = "postgres")]
            SessionStoreError::PostgresNoStore { .. } => FailureKind::NotFound,
            #[cfg(feature = "postgres")]
            SessionStoreError::PostgresColumn { .. } => FailureKind::StoreCorrupt,
            SessionStoreError::AlreadyExists { .. } | SessionStoreError::DuplicateEvent { .. } => {
                FailureKind::AlreadyExists
            }
            SessionStoreError::NonIncreasingTimestamp { .. } => FailureKind::NonIncreasingTimestamp,
            #[cfg(feature = "postgres")]
            SessionStoreError::Postgres { kind, .. }
            | SessionStoreError::PostgresPool { kind, .. } => *kind,
            _ => FailureKind::Other,
        }
    }

    /// Classifies a SQLite error: busy/locked, corrupt/not-a-database, or other.
    #[cfg(feature = "sqlite")]
    pub(crate) fn sqlite(
        path: &std::path::Path,
        timeout: Duration,
        operation: impl FnOnce() -> String,
        source: rusqlite::Error,
    ) -> Self {
        use rusqlite::ErrorCode;
        let path = path.to_path_buf();
        let operation = operation();
        match source.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                SessionStoreError::Locked {
                    path,
                    operation,
                    timeout,
                    source: Box::new(source),
                }
            }
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
                SessionStoreError::Corrupt {
                    path,
                    operation,
                    source: Box::new(source),
                }
            }
            _ => SessionStoreError::Sqlite {
                path,
                operation,
                source: Box::new(source),
            },
        }
    }
}

impl From<SessionStoreError> for StoreError {
    /// Stale and not-found map onto the port's own variants; everything else is a backend error.
    fn from(error: SessionStoreError) -> Self {
        match error {
            SessionStoreError::Stale {
                key,
                expected,
                actual,
                ..
            } => StoreError::Stale {
                key,
                expected,
                actual,
            },
            SessionStoreError::NotFound { key, .. } => StoreError::NotFound(key),
            SessionStoreError::Expand { key, error, .. } => StoreError::Expand { key: *key, error },
            SessionStoreError::AlreadyExists { key, .. } => StoreError::AlreadyExists(key),
            SessionStoreError::NonIncreasingTimestamp {
                key,
                event_id,
                latest,
                offered,
                ..
            } => StoreError::NonIncreasingTimestamp {
                key: *key,
                event_id,
                latest,
                offered,
            },
            other => StoreError::Backend(classified(other.failure_kind(), other)),
        }
    }
}
