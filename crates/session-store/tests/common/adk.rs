//! ADK's own SQLite files for the ADK tests: the layouts google-adk 2.13.0 creates (DDL dumped
//! from files ADK itself created), a file made from one, the session key and ADK's wall clock.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use compaction_core::SessionKey;
use rusqlite::Connection;

/// `DatabaseSessionService` schema v1, as SQLAlchemy creates it on SQLite (ADK 2.13.0).
pub const DATABASE_DDL: &str = include_str!("../fixtures/adk-database-v1.sql");

/// `SqliteSessionService`'s schema (ADK 2.13.0, `CREATE_SCHEMA_SQL`).
pub const SQLITE_DDL: &str = include_str!("../fixtures/adk-sqlite.sql");

/// A file `name` in `dir` holding the tables of `ddl`.
pub fn adk_file(dir: &Path, name: &str, ddl: &str) -> PathBuf {
    let path = dir.join(name);
    Connection::open(&path).unwrap().execute_batch(ddl).unwrap();
    path
}

pub fn key() -> SessionKey {
    SessionKey::new("zocrates", "u1", "s1")
}

/// Now, in seconds (ADK stamps a new session with the wall clock).
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}
