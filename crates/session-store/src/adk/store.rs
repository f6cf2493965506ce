//! [`AdkStore`]: compaction-core's `SessionStore` port over an existing Google ADK sessions
//! database, read and written in ADK's own shapes. This module opens the file (layout, damage
//! check, connection) and names what goes wrong; the reads are `read` and `outline`, the writes
//! `write`. It never changes ADK's schema or journal mode.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use compaction_core::SessionKey;
use rusqlite::Connection;

use super::detect::{Layout, detect_layout};
use super::schema::{self, AdkFlavor};
use crate::adk_shape::RowProblem;
use crate::error::SessionStoreError;
use crate::options::OpenOptions;

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) path: PathBuf,
    pub(super) flavor: AdkFlavor,
    pub(super) options: OpenOptions,
    pub(super) conn: Mutex<Connection>,
    /// The last outline read's answer, by revision ([`crate::tail_memo`]).
    pub(super) tail: crate::tail_memo::TailMemo,
    /// Where what this store knows about the file is kept ([`crate::state_dir`]).
    pub(super) state_dir: Option<PathBuf>,
    /// The outline checkpoints of the sessions read ([`super::outline`]).
    pub(super) checkpoints: Mutex<HashMap<SessionKey, super::outline::SqliteCheckpoint>>,
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

    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
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

    pub(super) fn bad_time(
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

    pub(super) fn not_found(&self, key: &SessionKey) -> SessionStoreError {
        SessionStoreError::NotFound {
            path: self.inner.path.clone(),
            key: key.clone(),
        }
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
}
