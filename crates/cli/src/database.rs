//! Where a command's sessions live: a SQLite file (`--db PATH`), or a PostgreSQL database
//! shared by any number of processes and replicas (`--db postgres://…`, or `--db-env VAR`
//! naming an environment variable that holds the connection string, for one with a password).
//!
//! Opening them lives here too: [`Store::open`] for the commands that start sessions,
//! [`open_existing`] (by the detected layout: native or Google ADK, SQLite or PostgreSQL) for
//! those that work on stored ones.
//!
//! A connection string is never shown: `Debug` prints it redacted, errors and banners name
//! the database by `PostgresStore::database` (user, hosts, ports, database: no password).
//!
//! PostgreSQL needs the `postgres` feature (on for the binary); a build without it still
//! recognizes a PostgreSQL URL, and refuses it naming the feature.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use compaction_core::{SessionKey, SessionStore};
#[cfg(feature = "postgres")]
use session_store::{
    AdkPostgresStore, PostgresAccess, PostgresOptions, PostgresStore,
    postgres::{ADK_DEFAULT_SCHEMA, ExistingPostgres},
};
use session_store::{
    AdkStore, IntegrityCheck, Layout, OpenOptions, SessionStoreError, SqliteStore, detect_layout,
};

use crate::error::{Cause, CliError};
use crate::wiring;

/// The value of `--db`: a file path, or a PostgreSQL URL (`postgres://` / `postgresql://`).
#[derive(Clone)]
pub(crate) enum DbArg {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL connection string, as typed.
    Postgres(ConnectionString),
}

impl std::fmt::Debug for DbArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbArg::File(path) => f.debug_tuple("File").field(path).finish(),
            DbArg::Postgres(url) => f.debug_tuple("Postgres").field(url).finish(),
        }
    }
}

/// clap's parser for `--db`: never fails (a URL is checked when connecting, by the store,
/// whose errors never repeat it), so clap never echoes a password in a usage error.
pub(crate) fn parse_db(value: &str) -> Result<DbArg, String> {
    Ok(if is_postgres_url(value) {
        DbArg::Postgres(ConnectionString(value.to_owned()))
    } else {
        DbArg::File(PathBuf::from(value))
    })
}

fn is_postgres_url(value: &str) -> bool {
    let lower = value.get(..13).unwrap_or(value).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A PostgreSQL connection string; its `Debug` never shows it.
#[derive(Clone)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) struct ConnectionString(String);

impl std::fmt::Debug for ConnectionString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnectionString(<redacted>)")
    }
}

/// Where the sessions live, with how the user named it (to tell them how to name it again).
#[derive(Debug, Clone)]
pub(crate) enum Database {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database.
    Postgres {
        /// The connection string.
        #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
        url: ConnectionString,
        /// `--db-env VAR`: the variable it was read from (`None`: `--db URL`).
        env: Option<String>,
    },
}

impl Database {
    /// `--db` or `--db-env` (clap lets only one through); `None` when neither was given. An
    /// unset, empty or non-UTF-8 variable is a configuration error naming the variable.
    pub(crate) fn from_args(
        db: Option<DbArg>,
        db_env: Option<String>,
    ) -> Result<Option<Database>, CliError> {
        if let Some(var) = db_env {
            let expected = "expected a PostgreSQL connection string such as \
                            postgres://user:password@host:5432/dbname";
            let url = match std::env::var(&var) {
                Ok(url) if !url.trim().is_empty() => url,
                Ok(_) => {
                    return Err(CliError::Config(Cause::new(format!(
                        "--db-env {var}: the variable is empty; {expected}"
                    ))));
                }
                Err(std::env::VarError::NotPresent) => {
                    return Err(CliError::Config(Cause::new(format!(
                        "--db-env {var}: the variable is not set; {expected}"
                    ))));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(CliError::Config(Cause::new(format!(
                        "--db-env {var}: the variable is not UTF-8; {expected}"
                    ))));
                }
            };
            return Ok(Some(Database::Postgres {
                url: ConnectionString(url),
                env: Some(var),
            }));
        }
        Ok(db.map(|db| match db {
            DbArg::File(path) => Database::File(path),
            DbArg::Postgres(url) => Database::Postgres { url, env: None },
        }))
    }

    /// `--db`/`--db-env` that must be there (clap's `required` group makes sure of it).
    pub(crate) fn required(db: Option<DbArg>, db_env: Option<String>) -> Result<Self, CliError> {
        Self::from_args(db, db_env)?.ok_or_else(|| {
            CliError::Config(Cause::new(
                "one of --db PATH|URL or --db-env VAR is required".to_owned(),
            ))
        })
    }

    /// Connects to a PostgreSQL database with `access`.
    #[cfg(feature = "postgres")]
    pub(crate) async fn connect(
        url: &ConnectionString,
        access: PostgresAccess,
    ) -> Result<Arc<PostgresStore>, CliError> {
        PostgresStore::connect_with(&url.0, PostgresOptions::default().access(access))
            .await
            .map(Arc::new)
            .map_err(CliError::database)
    }
}

/// What a PostgreSQL URL gets from a build without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
fn no_postgres() -> CliError {
    CliError::Config(Cause::new(
        "a PostgreSQL database was given, but this build of compaction has no PostgreSQL \
         support (cargo feature `postgres`): use a SQLite file, or build with the feature"
            .to_owned(),
    ))
}

/// Opens an existing PostgreSQL session database with `access`: the native store (schema
/// `compaction`) or Google ADK's `DatabaseSessionService` tables (schema `public`), detected
/// once; a database with neither is refused naming the tables looked for.
#[cfg(feature = "postgres")]
async fn open_existing_postgres(
    url: &ConnectionString,
    access: PostgresAccess,
) -> Result<ExistingStore, CliError> {
    let native = PostgresOptions::default().access(access);
    match session_store::postgres::open_existing_postgres(&url.0, native, ADK_DEFAULT_SCHEMA)
        .await
        .map_err(CliError::database)?
    {
        ExistingPostgres::Native(store) => Ok(ExistingStore::Postgres(Arc::new(store))),
        ExistingPostgres::Adk(store) => Ok(ExistingStore::AdkPostgres(Arc::new(store))),
        _ => Err(CliError::Database(Cause::new(
            "the database holds a layout this command does not open".to_owned(),
        ))),
    }
}

/// An open store that commands start sessions in (`replay`, `serve`).
#[derive(Clone)]
pub(crate) enum Store {
    /// This project's SQLite store.
    Sqlite(Arc<SqliteStore>),
    /// The same design on PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(Arc<PostgresStore>),
}

impl Store {
    /// Opens (creating when missing) the store at `db`.
    pub(crate) async fn open(db: &Database) -> Result<Store, CliError> {
        match db {
            Database::File(path) => open_store(path).map(Store::Sqlite),
            #[cfg(feature = "postgres")]
            Database::Postgres { url, .. } => Database::connect(url, PostgresAccess::Create)
                .await
                .map(Store::Postgres),
            #[cfg(not(feature = "postgres"))]
            Database::Postgres { .. } => Err(no_postgres()),
        }
    }

    /// The engine's port.
    pub(crate) fn port(&self) -> Arc<dyn SessionStore> {
        match self {
            Store::Sqlite(s) => s.clone(),
            #[cfg(feature = "postgres")]
            Store::Postgres(s) => s.clone(),
        }
    }

    /// Deletes a session (rolls back one that could not be finished).
    pub(crate) async fn delete_session(&self, key: &SessionKey) -> Result<bool, SessionStoreError> {
        match self {
            Store::Sqlite(s) => {
                let key = key.clone();
                s.spawn_blocking(move |s| s.delete_session(&key)).await
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(s) => s.delete_session(key).await,
        }
    }

    /// The database as a person reads it: the file's path, or the PostgreSQL database without
    /// its password.
    pub(crate) fn shown(&self, db: &Database) -> String {
        match (self, db) {
            #[cfg(feature = "postgres")]
            (Store::Postgres(s), _) => s.database().to_owned(),
            (Store::Sqlite(_), Database::File(path)) => wiring::shown(path),
            (Store::Sqlite(_), Database::Postgres { .. }) => String::new(),
        }
    }

    /// The `--db …` / `--db-env …` words that name this database again in a command line
    /// (shell-quoted): the path, the variable, or the URL without its password.
    pub(crate) fn reopen_args(&self, db: &Database) -> String {
        match (self, db) {
            (_, Database::Postgres { env: Some(var), .. }) => {
                format!("--db-env {}", crate::render::shell_word(var))
            }
            #[cfg(feature = "postgres")]
            (Store::Postgres(s), _) => format!("--db {}", crate::render::shell_word(s.url())),
            (_, Database::File(path)) => {
                format!("--db {}", crate::render::shell_word(&wiring::shown(path)))
            }
            (Store::Sqlite(_), Database::Postgres { .. }) => String::new(),
        }
    }
}

/// Opens (creating or migrating when needed) the native SQLite store at `db`.
fn open_store(db: &Path) -> Result<Arc<SqliteStore>, CliError> {
    SqliteStore::open(db)
        .map(Arc::new)
        .map_err(CliError::database)
}

/// An existing session database, opened by its detected layout.
pub(crate) enum ExistingStore {
    /// This project's native store.
    Native(Arc<SqliteStore>),
    /// A Google ADK sessions database, operated on in place.
    Adk(Arc<AdkStore>),
    /// The native store's design on PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(Arc<PostgresStore>),
    /// Google ADK's `DatabaseSessionService` tables on PostgreSQL, operated on in place.
    #[cfg(feature = "postgres")]
    AdkPostgres(Arc<AdkPostgresStore>),
}

impl ExistingStore {
    /// The engine's port.
    pub(crate) fn port(&self) -> Arc<dyn SessionStore> {
        match self {
            ExistingStore::Native(s) => s.clone(),
            ExistingStore::Adk(s) => s.clone(),
            #[cfg(feature = "postgres")]
            ExistingStore::Postgres(s) => s.clone(),
            #[cfg(feature = "postgres")]
            ExistingStore::AdkPostgres(s) => s.clone(),
        }
    }

    /// A PostgreSQL database as a person reads it (no password); `None` for a file.
    pub(crate) fn postgres_database(&self) -> Option<&str> {
        match self {
            #[cfg(feature = "postgres")]
            ExistingStore::Postgres(s) => Some(s.database()),
            #[cfg(feature = "postgres")]
            ExistingStore::AdkPostgres(s) => Some(s.database()),
            _ => None,
        }
    }
}

/// How a command uses an existing database.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    /// `evaluate`: may append (and migrate an older native file); damage is checked first.
    Write,
    /// `inspect`: read-only, never migrates, leaves no `-wal`/`-shm` behind.
    Read,
}

/// Opens an existing database: a SQLite file (see [`open_existing_file`]) or the store on
/// PostgreSQL (refused, untouched, when the database holds none; read-only for `inspect`).
pub(crate) async fn open_existing(
    db: &Database,
    access: Access,
) -> Result<ExistingStore, CliError> {
    match db {
        Database::File(path) => {
            if !path.exists() {
                return Err(CliError::Database(Cause::new(format!(
                    "{}: no such database file",
                    wiring::shown(path)
                ))));
            }
            open_existing_file(path, access)
        }
        #[cfg(feature = "postgres")]
        Database::Postgres { url, .. } => {
            // The native store, or ADK's own tables: detected once, on the pool that serves.
            let access = match access {
                Access::Write => PostgresAccess::Existing,
                Access::Read => PostgresAccess::ReadOnly,
            };
            open_existing_postgres(url, access).await
        }
        #[cfg(not(feature = "postgres"))]
        Database::Postgres { .. } => Err(no_postgres()),
    }
}

/// Opens an existing database file: the native store, or ADK's `DatabaseSessionService` /
/// `SqliteSessionService` layout; ADK's legacy v0 layout is refused naming `adk migrate session`.
pub(crate) fn open_existing_file(db: &Path, access: Access) -> Result<ExistingStore, CliError> {
    let database = |e: SessionStoreError| CliError::database(e);
    let options = OpenOptions::default();
    let read = options.integrity(IntegrityCheck::Skip);
    match detect_layout(db).map_err(database)? {
        Layout::AdkDatabase | Layout::AdkSqlite | Layout::AdkLegacyV0 => match access {
            Access::Write => AdkStore::open_with(db, options),
            Access::Read => AdkStore::open_read_only(db, read),
        }
        .map(|s| ExistingStore::Adk(Arc::new(s)))
        .map_err(database),
        Layout::Native => match access {
            Access::Write => open_store(db).map(ExistingStore::Native),
            Access::Read => SqliteStore::open_read_only(db, read)
                .map(|s| ExistingStore::Native(Arc::new(s)))
                .map_err(database),
        },
        // Reading commands never write: an empty file is not turned into a store.
        layout => Err(CliError::Database(Cause::new(format!(
            "{}: not a session database (it is {}); `compaction replay --db` creates one",
            wiring::shown(db),
            layout.describe()
        )))),
    }
}

/// The file a `Database::File` names (`None` for PostgreSQL).
pub(crate) fn file_of(db: &Database) -> Option<&Path> {
    match db {
        Database::File(path) => Some(path),
        Database::Postgres { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_and_anything_else_a_file() {
        for url in [
            "postgres://u:pw@h/db",
            "postgresql://h/db",
            "POSTGRES://h/db",
        ] {
            assert!(matches!(parse_db(url), Ok(DbArg::Postgres(_))), "{url}");
        }
        for path in ["sessions.db", "./postgres://x", "/tmp/postgres", "-"] {
            assert!(matches!(parse_db(path), Ok(DbArg::File(_))), "{path}");
        }
    }

    #[test]
    fn debug_never_shows_a_connection_string() {
        let arg = parse_db("postgres://alice:s3cr3t@h/db").unwrap();
        let db = Database::from_args(Some(arg.clone()), None).unwrap();
        for shown in [format!("{arg:?}"), format!("{db:?}")] {
            assert!(!shown.contains("s3cr3t"), "{shown}");
            assert!(shown.contains("redacted"), "{shown}");
        }
    }
}
