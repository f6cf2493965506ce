//! Damage detection and the reading connection.
//!
//! A writing store checks a file before its first write, so a damaged file is refused
//! ([`SessionStoreError::Damaged`]) instead of being appended to. SQLite's `PRAGMA quick_check`
//! reads every page once (its cost grows with the file, see docs/BENCHMARKS.md) and reports at
//! most [`MAX_REPORTED`] problems; the default, [`IntegrityCheck::Unchanged`], runs it only when
//! the file changed since this store last closed it or the last check is older than a day
//! (`crate::stamp` says how and what that cannot see), so the post-turn hook's cost does not
//! grow with the file; ADK's files, which this crate may not write beside, record their last
//! whole check in the state directory instead (`verify_recorded`). [`check_integrity`] runs
//! the full `PRAGMA integrity_check` (which also checks every index against its table) for
//! `compaction inspect --check`.
//!
//! Reading commands use [`read_connection`]: it never creates the file, never changes the
//! journal mode or the schema, and refuses every write (`PRAGMA query_only`).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::SessionStoreError;

/// The most problems a check reports (SQLite stops looking after that many).
pub const MAX_REPORTED: usize = 3;

/// Which of SQLite's checks a store runs when it opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IntegrityCheck {
    /// No check (for callers that checked the file themselves).
    Skip,
    /// `PRAGMA quick_check`: every page and b-tree, not the indexes' contents.
    Quick,
    /// [`IntegrityCheck::Quick`] unless the file is exactly as this store left it when its last
    /// writing connection closed (size and modification time, no `-wal` file) and its last
    /// whole-file check is younger than `max_age` (the default for a writing store, with a day).
    /// On ADK's files, which change between runs: unless the state directory records a whole
    /// check of this file younger than `max_age` (`AdkStore::open_with_state_dir`).
    Unchanged {
        /// How old the last whole-file check may be.
        max_age: Duration,
    },
    /// `PRAGMA integrity_check`: [`IntegrityCheck::Quick`] plus every index against its table.
    Full,
}

impl Default for IntegrityCheck {
    fn default() -> Self {
        IntegrityCheck::Unchanged {
            max_age: Duration::from_secs(24 * 3600),
        }
    }
}

impl IntegrityCheck {
    fn pragma(self) -> Option<&'static str> {
        match self {
            IntegrityCheck::Skip => None,
            IntegrityCheck::Quick | IntegrityCheck::Unchanged { .. } => Some("quick_check"),
            IntegrityCheck::Full => Some("integrity_check"),
        }
    }
}

/// What [`verify`] did: when the file was last checked whole (now, or as the stamp recorded),
/// or `None` when no check ran or was vouched for.
pub(crate) type LastCheck = Option<f64>;

/// Runs `check` on `conn`; a damaged file is [`SessionStoreError::Damaged`] naming `path`, the
/// check and what it found.
pub(crate) fn verify(
    conn: &Connection,
    path: &Path,
    check: IntegrityCheck,
    timeout: Duration,
) -> Result<LastCheck, SessionStoreError> {
    conn.pragma_update(None, "cell_size_check", "ON")
        .map_err(|e| {
            SessionStoreError::sqlite(path, timeout, || "setting cell_size_check".to_owned(), e)
        })?;
    if let IntegrityCheck::Unchanged { max_age } = check
        && let Some(checked_at) = crate::stamp::unchanged_since_check(path, max_age)
    {
        return Ok(Some(checked_at));
    }
    let Some(pragma) = check.pragma() else {
        return Ok(None);
    };
    let started = crate::stamp::now();
    let damaged = |report: String| SessionStoreError::Damaged {
        path: path.to_owned(),
        check: pragma,
        report,
    };
    let rows: rusqlite::Result<Vec<String>> = conn
        .prepare(&format!("PRAGMA {pragma}({MAX_REPORTED})"))
        .and_then(|mut stmt| stmt.query_map([], |row| row.get::<_, String>(0))?.collect());
    match rows {
        Ok(rows) if rows.len() == 1 && rows[0] == "ok" => Ok(Some(started)),
        Ok(rows) => Err(damaged(rows.join("; "))),
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
            ) =>
        {
            Err(damaged(e.to_string()))
        }
        Err(e) => Err(SessionStoreError::sqlite(
            path,
            timeout,
            || format!("running PRAGMA {pragma}"),
            e,
        )),
    }
}

/// The identity of a database file for its check record: its canonical path, and (on Unix) its
/// device, inode and birth time, so that a file replaced at the same path (a new inode, or a
/// reused inode born later) is checked again.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct FileIdentity {
    path: String,
    device: u64,
    inode: u64,
    born: Option<u128>,
}

impl FileIdentity {
    fn of(path: &Path) -> Option<Self> {
        let canonical = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&canonical).ok()?;
        let born = meta
            .created()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos());
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt as _;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        Some(FileIdentity {
            path: canonical.to_string_lossy().into_owned(),
            device,
            inode,
            born,
        })
    }
}

/// When a file was last checked whole, as the state directory records it.
#[derive(serde::Serialize, serde::Deserialize)]
struct CheckRecord {
    identity: FileIdentity,
    checked_at: f64,
}

/// [`verify`] for a file this crate may not write beside (ADK's own file). ADK's process appends
/// to it between runs, so the stamp's "unchanged since the last check" can never be asked;
/// instead, under [`IntegrityCheck::Unchanged`] with a `state_dir`, the whole-file check runs
/// when the state directory holds no record of one for this very file (path, device, inode,
/// birth time) younger than `max_age`, and is recorded there when it passes (forgotten when it
/// fails). Between whole checks a run relies on what SQLite checks as it reads and writes:
/// `cell_size_check` and `SQLITE_CORRUPT` on every page the run touches (the session row, the
/// rows appended since its last read, the b-tree path of its insert). Other checks, or no
/// `state_dir`, behave as [`verify`].
pub(crate) fn verify_recorded(
    conn: &Connection,
    path: &Path,
    check: IntegrityCheck,
    timeout: Duration,
    state_dir: Option<&Path>,
) -> Result<(), SessionStoreError> {
    let (IntegrityCheck::Unchanged { max_age }, Some(dir), Some(identity)) =
        (check, state_dir, FileIdentity::of(path))
    else {
        let check = match check {
            IntegrityCheck::Unchanged { .. } => IntegrityCheck::Quick,
            other => other,
        };
        return verify(conn, path, check, timeout).map(|_| ());
    };
    let key = identity.path.clone();
    let entry = crate::state_dir::entry(dir, "checked", &key);
    let recorded = crate::state_dir::read::<CheckRecord>(&entry, &key).filter(|r| {
        let age = crate::stamp::now() - r.checked_at;
        r.identity == identity && (0.0..max_age.as_secs_f64()).contains(&age)
    });
    if recorded.is_some() {
        return verify(conn, path, IntegrityCheck::Skip, timeout).map(|_| ());
    }
    match verify(conn, path, IntegrityCheck::Quick, timeout) {
        Ok(Some(checked_at)) => {
            let record = CheckRecord {
                identity,
                checked_at,
            };
            crate::state_dir::write(&entry, &key, &record);
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => {
            crate::state_dir::forget(&entry);
            Err(e)
        }
    }
}

/// Opens an existing database for reading only: the file is never created, its journal mode
/// and schema are never changed, and every write is refused (`PRAGMA query_only`).
///
/// The connection is opened read-write at the file level, not with `SQLITE_OPEN_READONLY`, on
/// purpose: SQLite lets only a connection that may write delete the `-wal` and `-shm` files
/// when it closes last, so a read-only open of a WAL database would leave them behind. SQLite
/// opens a write-protected file read-only by itself.
///
/// A WAL file that this user may not write beside (a read-only directory, another user's
/// database, a backup volume) cannot get the `-shm` file SQLite's WAL reader needs. Then, when no
/// `-wal` file is beside it (no writer is open and none left changes behind), it is opened
/// `immutable`: SQLite reads the file as it is, creating nothing. With a `-wal` file beside it the
/// file is being written, or a writer died with changes only there; reading it without that
/// writer's shared memory could show a torn view, so it is refused, saying so.
pub(crate) fn read_connection(path: &Path, timeout: Duration) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(timeout)?;
    conn.pragma_update(None, "query_only", "ON")?;
    match conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())) {
        Err(e) if cannot_write_beside(&e) => {
            drop(conn);
            immutable_connection(path, e)
        }
        _ => Ok(conn),
    }
}

/// The errors of a WAL reader that may not create or write the `-shm` file.
fn cannot_write_beside(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied)
    )
}

/// `path` opened read-only and `immutable` (creating nothing), when no `-wal` file is beside
/// it; otherwise `refused` with the reason added.
fn immutable_connection(path: &Path, refused: rusqlite::Error) -> rusqlite::Result<Connection> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if std::fs::metadata(std::path::PathBuf::from(wal)).is_ok_and(|m| m.len() > 0) {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
            Some(format!(
                "{refused}: the database is being written (a -wal file is beside it) and this \
                 user cannot create its -shm file; read it as the writer's user, or copy the \
                 file with its -wal file to a directory you can write"
            )),
        ));
    }
    let uri = format!("file:{}?mode=ro&immutable=1", uri_path(path));
    Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// `path` for a `file:` URI: absolute, with `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for c in absolute.to_string_lossy().chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

/// Runs SQLite's full `PRAGMA integrity_check` on the database at `path`, read-only. `Ok` means
/// SQLite found nothing wrong; a damaged file is [`SessionStoreError::Damaged`].
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("sessions.db");
/// drop(session_store::SqliteStore::open(&path)?);
/// session_store::check_integrity(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_integrity(path: impl AsRef<Path>) -> Result<(), SessionStoreError> {
    let path = path.as_ref();
    let timeout = Duration::from_secs(5);
    let conn = read_connection(path, timeout).map_err(|e| {
        SessionStoreError::sqlite(path, timeout, || "opening the database".to_owned(), e)
    })?;
    verify(&conn, path, IntegrityCheck::Full, timeout).map(|_| ())
}
