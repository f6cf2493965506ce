//! [`PostgresStore`]: the native store's design on a shared PostgreSQL database, for chat
//! backends that run several replicas (feature `postgres`).
//!
//! The same port ([`compaction_core::SessionStore`]) and the same design as the SQLite store:
//! - a **session header row** (revision, the gate's turn count kept by compaction-core's
//!   [`TurnTracker`](compaction_core::store_support::TurnTracker), the latest coordinator prompt
//!   token count, the live compaction), so the gate reads one row;
//! - **indexed event columns** (`ts`, `in_view`, `is_compaction`, `comp_start`/`comp_end`,
//!   `subsumed`) with partial indexes for the coordinator view and the compactions, so the
//!   context, the live tail and the compaction history never read the rest of the history;
//! - an **append** that checks and bumps the revision in one statement
//!   (`UPDATE sessions SET revision = revision + 1 … WHERE revision = $read`) at the start of
//!   its transaction: the statement takes the row lock, so a concurrent appender that read the
//!   same revision waits, then finds the revision moved on and is refused as stale. Per-session
//!   ordering across replicas is this compare-and-set alone; no advisory lock is needed;
//! - **versioned migrations** (table `schema_version`, applied under a transaction-scoped
//!   advisory lock so that replicas starting together migrate once);
//! - **shadow decisions** in their own table;
//! - **lossless recall** (module `recall`, migration 2): each searchable event's words as a
//!   `tsvector` with a GIN index and a turn-start flag, written by the append's transaction, so
//!   search, expansion and turn counts never read the whole history.
//!
//! The tables live in their own PostgreSQL schema (default `compaction`, see
//! [`PostgresOptions::schema`]), so they never meet Google ADK's own `sessions`/`events` tables
//! in `public`. Events and states are stored as JSON *text*, not `jsonb`: `jsonb` reorders keys
//! and would not give timestamps back bit for bit.
//!
//! # Connection strings and secrets
//! The connection string comes from the caller (a `--db postgres://…` argument or an environment
//! variable). The store keeps only a display form of it (user, hosts, ports, database: never the
//! password), which is what errors, log lines and `Debug` show.
//!
//! # Connections
//! A deadpool pool of tokio-postgres connections. A connection the server closed (restart,
//! `pg_terminate_backend`) fails the call that was using it with
//! [`SessionStoreError::Postgres`] (kind `transport`; an open transaction is rolled back by the
//! server, so nothing is half-written) and is replaced on the next call.

mod adk;
mod adk_detect;
mod adk_outline;
mod adk_tail;
mod append;
mod column;
mod port;
mod read;
mod recall;
mod schema;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use compaction_core::{Event, FailureKind, SessionKey};
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod};
use serde_json::{Map, Value};
use tokio_postgres::NoTls;
use tokio_postgres::config::Host;

use crate::error::SessionStoreError;

pub use adk::{ADK_DEFAULT_SCHEMA, AdkPostgresStore};
pub use adk_detect::{
    ExistingPostgres, PostgresLayout, detect_postgres_layout, open_existing_postgres,
};
pub use schema::POSTGRES_SCHEMA_VERSION;

/// How to connect a [`PostgresStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The PostgreSQL schema that holds the store's tables (created if missing). Default
    /// `compaction`. A lowercase SQL identifier: letters, digits and `_`, not starting with a
    /// digit, at most 63 bytes.
    pub schema: String,
    /// The most connections the pool opens. Default 16.
    pub max_connections: usize,
    /// How long opening one connection may take. Default 10 s.
    pub connect_timeout: Duration,
    /// What connecting may do to the store's schema. Default [`PostgresAccess::Create`].
    pub access: PostgresAccess,
    /// How long a statement waits for a row or table lock another connection holds (an ADK
    /// transaction left open, say) before it fails as locked (exit 4). Default 5 s, as SQLite's
    /// busy timeout.
    pub lock_timeout: Duration,
    /// How long one statement may run before the server cancels it (a paused or overloaded
    /// database answers with a fast, named failure, not a hang). Default 30 s.
    pub statement_timeout: Duration,
    /// How long a call waits for a free pooled connection. Default 5 s.
    pub pool_wait_timeout: Duration,
}

/// What [`PostgresStore::connect_with`] may do to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PostgresAccess {
    /// Create the store's schema when it is missing and migrate an older one (`replay`,
    /// `serve`: commands that start sessions).
    #[default]
    Create,
    /// The store must already be there (an older version is migrated); a database without it
    /// is refused with [`SessionStoreError::PostgresNoStore`] and left as it was (`evaluate`).
    Existing,
    /// The store must be there at this build's version, and nothing is ever written: every
    /// transaction of the pool's connections is read-only (`default_transaction_read_only`),
    /// so a write fails in the server (`inspect`).
    ReadOnly,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: "compaction".to_owned(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(10),
            access: PostgresAccess::Create,
            lock_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(30),
            pool_wait_timeout: Duration::from_secs(5),
        }
    }
}

impl PostgresOptions {
    /// Sets the schema (builder style).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets what connecting may do to the schema (builder style).
    pub fn access(mut self, access: PostgresAccess) -> Self {
        self.access = access;
        self
    }

    /// Sets the pool size (builder style).
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }
}

/// A session store on a PostgreSQL database, shared by any number of processes and replicas.
/// Cheap to clone (the clones share one pool). Implements compaction-core's
/// [`SessionStore`](compaction_core::SessionStore) port.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// The connection string without its password, plus the schema.
    database: String,
    /// The connection string without its password (nor the schema).
    url: String,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.database)
            .finish_non_exhaustive()
    }
}

/// The display form of a connection string: `postgres://user@host:port/dbname (schema …)`,
/// never the password (nor any other option).
fn display_target(config: &tokio_postgres::Config, schema: &str) -> String {
    format!("{} (schema {schema})", display_url(config))
}

/// `postgres://user@host:port/dbname`: the connection string without its password or options.
fn display_url(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("");
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(dir) => format!("[{}]:{port}", dir.display()),
            }
        })
        .collect();
    let dbname = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{}/{dbname}", hosts.join(","))
}

/// A schema name the store can put in `search_path` without quoting.
fn valid_schema(schema: &str) -> bool {
    let mut chars = schema.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && schema.len() <= 63
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/dbname` or
    /// libpq's `key=value` form) with the default [`PostgresOptions`], and creates or migrates
    /// the store's tables. A database whose schema is newer than this build is refused with
    /// [`SessionStoreError::FutureSchema`] before anything is written.
    pub async fn connect(url: &str) -> Result<Self, SessionStoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// The pool of connections to `url` whose `search_path` is `options.schema` (read-only
    /// transactions for [`PostgresAccess::ReadOnly`]), without touching the database: no
    /// connection is opened until the first call.
    pub(crate) fn pool(url: &str, options: &PostgresOptions) -> Result<Self, SessionStoreError> {
        let mut config = tokio_postgres::Config::from_str(url).map_err(|source| {
            SessionStoreError::PostgresConfig {
                // The string did not parse, so no part of it is shown.
                database: "the PostgreSQL connection string".to_owned(),
                detail: source.to_string(),
            }
        })?;
        let database = display_target(&config, &options.schema);
        let url = display_url(&config);
        if !valid_schema(&options.schema) {
            return Err(SessionStoreError::PostgresConfig {
                database,
                detail: format!(
                    "schema {:?} is not a lowercase SQL identifier (letters, digits, `_`, \
                     not starting with a digit, at most 63 bytes)",
                    options.schema
                ),
            });
        }
        if options.max_connections == 0 {
            return Err(SessionStoreError::PostgresConfig {
                database,
                detail: "max_connections must be at least 1".to_owned(),
            });
        }
        // Only the store's schema is searched: its unqualified table names can never resolve
        // to someone else's `sessions` in `public`.
        // Generic plans for the store's prepared statements: every one is a keyed lookup on
        // one session through its indexes. A custom plan estimates `session_pk = $1` and
        // `ts > $2` as independent, so for an old session (whose live end is early in the
        // column's histogram) it expects most of the table and reads the session's whole
        // history instead of the live tail's rows (measured: 4.8 ms instead of 1 ms at
        // 10,000 events; docs/BENCHMARKS.md).
        let mut search_path = format!(
            "-c search_path={} -c plan_cache_mode=force_generic_plan -c lock_timeout={} \
             -c statement_timeout={}",
            options.schema,
            options.lock_timeout.as_millis().max(1),
            options.statement_timeout.as_millis().max(1),
        );
        if options.access == PostgresAccess::ReadOnly {
            search_path.push_str(" -c default_transaction_read_only=on");
        }
        let merged = match config.get_options() {
            Some(existing) if !existing.is_empty() => format!("{existing} {search_path}"),
            _ => search_path,
        };
        config.options(&merged);
        if config.get_application_name().is_none() {
            config.application_name("compaction-session-store");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections)
            .wait_timeout(Some(options.pool_wait_timeout))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| SessionStoreError::PostgresConfig {
                database: database.clone(),
                detail: e.to_string(),
            })?;
        Ok(PostgresStore {
            pool,
            database,
            url,
        })
    }

    /// Connects to `url` with `options`.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<Self, SessionStoreError> {
        let store = Self::pool(url, &options)?;
        if options.access != PostgresAccess::Create {
            schema::require_store(&store, &options.schema, options.access).await?;
        }
        if options.access == PostgresAccess::ReadOnly {
            return Ok(store);
        }
        let applied = schema::migrate(&store, &options.schema).await?;
        if applied > 0 {
            tracing::info!(database = %store.database, applied, version = POSTGRES_SCHEMA_VERSION, "migrated session store");
        }
        Ok(store)
    }

    /// The database this store is connected to, without the password:
    /// `postgres://user@host:port/dbname (schema compaction)`.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The connection string without its password or options, `postgres://user@host:port/dbname`
    /// (to name the database to a person, or to connect again with a password-less login).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The gate header of the session: one indexed row read.
    pub async fn header(
        &self,
        key: &SessionKey,
    ) -> Result<crate::row::SessionHeader, SessionStoreError> {
        let op = || format!("reading the header of session {key}");
        let client = self.client(&op).await?;
        let result = async {
            let stmt = client
                .prepare_cached(SESSION_ROW)
                .await
                .map_err(self.pg(&op))?;
            let row = client
                .query_opt(&stmt, &[&key.app_name, &key.user_id, &key.session_id])
                .await
                .map_err(self.pg(&op))?
                .ok_or_else(|| self.not_found(key))?;
            Ok(self
                .session_row(&row, &op as column::Operation<'_>)?
                .header())
        }
        .await;
        self.release(client, &result);
        result
    }

    /// Deletes a session with its events and decisions (`replay` rolls back a session it
    /// could not finish); false when there was none.
    pub async fn delete_session(&self, key: &SessionKey) -> Result<bool, SessionStoreError> {
        let op = || format!("deleting session {key}");
        let client = self.client(&op).await?;
        let result = client
            .execute(
                "DELETE FROM sessions WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
                &[&key.app_name, &key.user_id, &key.session_id],
            )
            .await
            .map(|deleted| deleted > 0)
            .map_err(self.pg(&op));
        self.release(client, &result);
        result
    }

    /// Gives a connection back to the pool after a call, or drops it when the call found it
    /// broken (a `transport` failure: the server closed it), so the next call opens a new one
    /// instead of finding the dead one.
    pub(crate) fn release<T>(
        &self,
        client: deadpool_postgres::Object,
        result: &Result<T, SessionStoreError>,
    ) {
        if let Err(e) = result
            && e.failure_kind() == FailureKind::Transport
        {
            tracing::warn!(database = %self.database, error = %e, "dropping a broken PostgreSQL connection");
            drop(deadpool_postgres::Object::take(client));
        }
    }

    /// A pooled connection; a failure names `operation`.
    pub(crate) async fn client(
        &self,
        operation: &(dyn Fn() -> String + Sync),
    ) -> Result<deadpool_postgres::Object, SessionStoreError> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(source) => self.pg(operation)(source),
            other => SessionStoreError::PostgresPool {
                database: self.database.clone(),
                operation: operation(),
                kind: match other {
                    PoolError::Timeout(_) => FailureKind::Timeout,
                    _ => FailureKind::Transport,
                },
                detail: other.to_string(),
            },
        })
    }

    /// Wraps a PostgreSQL error with the database and `operation`, classified.
    pub(crate) fn pg<'a>(
        &'a self,
        operation: &'a (dyn Fn() -> String + Sync),
    ) -> impl FnOnce(tokio_postgres::Error) -> SessionStoreError + 'a {
        move |source| SessionStoreError::postgres(&self.database, operation(), source)
    }

    /// [`PostgresStore::pg`] for an operation already named.
    pub(crate) fn pg_named<'a>(
        &'a self,
        operation: &'a str,
    ) -> impl FnOnce(tokio_postgres::Error) -> SessionStoreError + 'a {
        move |source| SessionStoreError::postgres(&self.database, operation.to_owned(), source)
    }

    /// The database, in the `path` field the shared variants carry.
    pub(crate) fn path(&self) -> PathBuf {
        PathBuf::from(&self.database)
    }

    pub(crate) fn not_found(&self, key: &SessionKey) -> SessionStoreError {
        SessionStoreError::NotFound {
            path: self.path(),
            key: key.clone(),
        }
    }

    pub(crate) fn parse_event(
        &self,
        key: &SessionKey,
        seq: i64,
        event_id: &str,
        body: &str,
    ) -> Result<Event, SessionStoreError> {
        serde_json::from_str(body).map_err(|source| SessionStoreError::CorruptEvent {
            path: self.path(),
            key: Box::new(key.clone()),
            revision: seq.unsigned_abs(),
            event_id: event_id.to_owned(),
            source,
        })
    }

    pub(crate) fn parse_state(
        &self,
        key: &SessionKey,
        state: &str,
    ) -> Result<Map<String, Value>, SessionStoreError> {
        serde_json::from_str(state).map_err(|source| SessionStoreError::CorruptState {
            path: self.path(),
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
            path: self.path(),
            key: Box::new(key.clone()),
            what: what.into(),
            source,
        }
    }
}

/// The header columns, in the order `PostgresStore::session_row` (module `column`) reads them.
pub(crate) const HEADER_COLUMNS: &str =
    "pk, revision, closed_turns, open_turn, prompt_tokens, live_seq, live_start, live_end";

/// The session row of a key.
pub(crate) const SESSION_ROW: &str = "SELECT pk, revision, closed_turns, open_turn, prompt_tokens, \
     live_seq, live_start, live_end FROM sessions \
     WHERE app_name = $1 AND user_id = $2 AND session_id = $3";

impl SessionStoreError {
    /// A driver error, classified: a lost or refused connection is `transport`, a lock or
    /// serialization conflict `store_locked`, a cancelled statement `timeout`, damaged data
    /// `store_corrupt`, anything else `other`.
    pub(crate) fn postgres(
        database: &str,
        operation: String,
        source: tokio_postgres::Error,
    ) -> Self {
        SessionStoreError::Postgres {
            database: database.to_owned(),
            operation,
            kind: classify(&source),
            detail: match source.as_db_error() {
                Some(db) => format!(
                    "{}: {} (SQLSTATE {})",
                    db.severity(),
                    db.message(),
                    db.code().code()
                ),
                None => source.to_string(),
            },
            source: Box::new(source),
        }
    }
}

fn classify(error: &tokio_postgres::Error) -> FailureKind {
    use tokio_postgres::error::SqlState;
    if error.is_closed() {
        return FailureKind::Transport;
    }
    if let Some(code) = error.code() {
        let class = &code.code()[..2];
        return if class == "08"
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(code)
        {
            FailureKind::Transport
        } else if [
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
        ]
        .contains(code)
        {
            FailureKind::StoreLocked
        } else if *code == SqlState::QUERY_CANCELED {
            FailureKind::Timeout
        } else if class == "XX" {
            FailureKind::StoreCorrupt
        } else {
            FailureKind::Other
        };
    }
    // No server code: an I/O failure on the socket (refused, reset, timed out) is transport.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = cause {
        if e.is::<std::io::Error>() {
            return FailureKind::Transport;
        }
        cause = e.source();
    }
    FailureKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_display_form_never_holds_the_password() {
        for url in [
            "postgres://alice:s3cr3t-pw@db.example:6543/sessions?sslmode=disable",
            "host=db.example port=6543 user=alice password=s3cr3t-pw dbname=sessions",
        ] {
            let config = tokio_postgres::Config::from_str(url).unwrap();
            let shown = display_target(&config, "compaction");
            assert_eq!(
                shown,
                "postgres://alice@db.example:6543/sessions (schema compaction)"
            );
        }
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(valid_schema("compaction"));
        assert!(valid_schema("t_oracle_12"));
        for bad in ["", "1abc", "Caps", "a;drop table x", "a b", &"x".repeat(64)] {
            assert!(!valid_schema(bad), "{bad:?}");
        }
    }
}
