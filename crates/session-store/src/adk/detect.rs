//! What an existing SQLite file is: this crate's native store, one of Google ADK's two
//! session layouts, ADK's legacy v0 layout, empty, or something else. Detection only reads.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::error::SessionStoreError;

/// The layout of a session database file, as [`detect_layout`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// No file, or a SQLite file with no tables: a native store may be created in it.
    Empty,
    /// This crate's native store ([`crate::SqliteStore`], `PRAGMA user_version` > 0).
    Native,
    /// ADK's `DatabaseSessionService` schema v1 (SQLAlchemy; `adk_internal_metadata`,
    /// TEXT `YYYY-MM-DD HH:MM:SS.ffffff` UTC time columns).
    AdkDatabase,
    /// ADK's `SqliteSessionService` (`adk web`'s `.adk/session.db`; REAL epoch time columns,
    /// no metadata table).
    AdkSqlite,
    /// ADK's legacy v0 schema (pickled `actions` column): refused, ADK's
    /// `adk migrate session` converts it.
    AdkLegacyV0,
}

impl Layout {
    /// A short human name, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Layout::Empty => "empty (no tables)",
            Layout::Native => "native adaptive-compaction session store",
            Layout::AdkDatabase => "Google ADK DatabaseSessionService database (schema v1)",
            Layout::AdkSqlite => "Google ADK SqliteSessionService database",
            Layout::AdkLegacyV0 => "Google ADK legacy v0 session database",
        }
    }

    /// True for the two ADK layouts [`crate::AdkStore`] operates on.
    pub fn is_adk(self) -> bool {
        matches!(self, Layout::AdkDatabase | Layout::AdkSqlite)
    }
}

/// ADK's `adk_internal_metadata` key and the v1 value.
const SCHEMA_VERSION_KEY: &str = "schema_version";
const ADK_SCHEMA_V1: &str = "1";
const ADK_SCHEMA_V0: &str = "0";

/// Detects the layout of the file at `path` without writing to it (a missing file is
/// [`Layout::Empty`] and is not created). A file that is neither empty, native nor ADK is a
/// [`SessionStoreError::ForeignDatabase`]; a non-SQLite file is [`SessionStoreError::Corrupt`].
pub fn detect_layout(path: impl AsRef<Path>) -> Result<Layout, SessionStoreError> {
    let path = path.as_ref();
    if !path.exists() {
        return Ok(Layout::Empty);
    }
    let fail = |what: &'static str| {
        move |e: rusqlite::Error| {
            SessionStoreError::sqlite(path, std::time::Duration::ZERO, || what.to_owned(), e)
        }
    };
    // Read-only in effect (`query_only`); see `read_connection` for why not SQLITE_OPEN_READONLY.
    let conn = crate::integrity::read_connection(path, std::time::Duration::from_secs(5))
        .map_err(fail("opening the database to detect its layout"))?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(fail("reading the schema version"))?;
    if version > 0 {
        return Ok(Layout::Native);
    }
    match classify(&conn).map_err(fail("inspecting the tables"))? {
        Found::Layout(layout) => Ok(layout),
        Found::Foreign(what) => Err(SessionStoreError::ForeignDatabase {
            path: path.to_path_buf(),
            what,
            hint: String::new(),
        }),
        Found::AdkUnknownVersion(v) => Err(SessionStoreError::NotAdkDatabase {
            path: path.to_path_buf(),
            detail: format!(
                "adk_internal_metadata says schema_version {v:?}; this build reads version 1"
            ),
        }),
    }
}

/// What the tables of a `user_version = 0` file say.
pub(crate) enum Found {
    /// A known layout.
    Layout(Layout),
    /// Tables nobody here created: a description.
    Foreign(String),
    /// An ADK metadata table with a schema version this build does not know.
    AdkUnknownVersion(String),
}

fn table_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let names = stmt.query_map([], |row| row.get::<_, String>(0))?;
    names.collect()
}

/// `(name, declared type)` of every column of `table`.
fn columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare("SELECT name, type FROM pragma_table_info(?1)")?;
    let cols = stmt.query_map([table], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    cols.collect()
}

/// Classifies a `user_version = 0` file by its tables (ADK's own rules: the metadata table's
/// `schema_version` first, then an `actions` column without `event_data` means v0).
pub(crate) fn classify(conn: &Connection) -> rusqlite::Result<Found> {
    let tables = table_names(conn)?;
    if tables.is_empty() {
        return Ok(Found::Layout(Layout::Empty));
    }
    let has = |t: &str| tables.iter().any(|n| n == t);
    if has("adk_internal_metadata") {
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM adk_internal_metadata WHERE key = ?1",
                [SCHEMA_VERSION_KEY],
                |row| row.get(0),
            )
            .optional()?;
        return Ok(match version.as_deref() {
            Some(ADK_SCHEMA_V1) => Found::Layout(Layout::AdkDatabase),
            Some(ADK_SCHEMA_V0) => Found::Layout(Layout::AdkLegacyV0),
            Some(other) => Found::AdkUnknownVersion(other.to_owned()),
            None => Found::AdkUnknownVersion("<missing>".to_owned()),
        });
    }
    if has("events") && has("sessions") {
        let event_cols = columns(conn, "events")?;
        let has_col = |c: &str| event_cols.iter().any(|(n, _)| n == c);
        if has_col("actions") && !has_col("event_data") {
            return Ok(Found::Layout(Layout::AdkLegacyV0));
        }
        if has_col("event_data") {
            let session_cols = columns(conn, "sessions")?;
            let update = session_cols
                .iter()
                .find(|(n, _)| n == "update_time")
                .map(|(_, t)| t.to_ascii_uppercase());
            match update.as_deref() {
                Some("REAL") => return Ok(Found::Layout(Layout::AdkSqlite)),
                Some(t) if t.contains("DATE") || t.contains("TIME") => {
                    return Ok(Found::Layout(Layout::AdkDatabase));
                }
                _ => {}
            }
        }
        return Ok(Found::Foreign(format!(
            "holds tables sessions and events that look like a Google ADK session database \
             of an unknown layout (tables: {})",
            tables.join(", ")
        )));
    }
    Ok(Found::Foreign(format!(
        "holds tables this store did not create ({}) and PRAGMA user_version is 0",
        tables.join(", ")
    )))
}

/// For [`crate::SqliteStore::open`]: `Some((what, hint))` when a `user_version = 0` file
/// already holds tables, so it must be refused instead of migrated.
pub(crate) fn foreign_schema(conn: &Connection) -> rusqlite::Result<Option<(String, String)>> {
    Ok(match classify(conn)? {
        Found::Layout(Layout::Empty | Layout::Native) => None,
        Found::Layout(layout @ (Layout::AdkDatabase | Layout::AdkSqlite)) => Some((
            format!(
                "looks like a Google ADK session database ({})",
                layout.describe()
            ),
            "; open it with session_store::AdkStore (the CLI detects this itself)".to_owned(),
        )),
        Found::Layout(Layout::AdkLegacyV0) => Some((
            "looks like a Google ADK session database in the legacy v0 schema".to_owned(),
            "; migrate it with `adk migrate session`, then open it with session_store::AdkStore"
                .to_owned(),
        )),
        Found::AdkUnknownVersion(v) => Some((
            format!("looks like a Google ADK session database (schema_version {v:?})"),
            String::new(),
        )),
        Found::Foreign(what) => Some((what, String::new())),
    })
}
