//! The check stamp: when a writing open may skip SQLite's whole-file check.
//!
//! `PRAGMA quick_check` reads every page (about 1.2 ms per MB), so running it before every
//! post-turn evaluation would make each turn's cost grow with the database file. Instead, when
//! the last connection of a writing store closes (SQLite then checkpoints the WAL into the file
//! and removes it), the store records beside the file, in `<file>-compaction-check`, the file's
//! size and modification time as it left them and when the file was last checked whole. The
//! next writing open skips the whole-file check only when
//! - the stamp exists and names exactly the file's current size and modification time (nothing
//!   wrote the file since: not another program, not a copy or a restore, not a crash before the
//!   close),
//! - no `-wal` file is beside it (no other connection is open, none died mid-write), and
//! - the last whole-file check is younger than the interval ([`IntegrityCheck::Unchanged`]).
//!
//! Anything else runs `quick_check` first, as before. Every connection also sets
//! `cell_size_check`, and SQLite refuses any page a run reads that is malformed
//! (`SQLITE_CORRUPT`), so a run stops at damage it touches. What the stamp cannot see: a page
//! that decays on disk without its modification time changing (bit rot) in a part of the file
//! no run reads, until the interval passes or `compaction inspect --check` runs the full check.
//!
//! [`IntegrityCheck::Unchanged`]: crate::IntegrityCheck::Unchanged

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The stamp file beside `db`.
pub(crate) fn path_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-compaction-check");
    PathBuf::from(name)
}

/// The file's size and modification time (nanoseconds since the epoch).
fn fingerprint(db: &Path) -> Option<(u64, u128)> {
    let meta = std::fs::metadata(db).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some((meta.len(), mtime))
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// When the file at `db` was last checked whole, if it is unchanged since the stamp was written
/// and that check is younger than `max_age`; `None` means: check it now.
pub(crate) fn unchanged_since_check(db: &Path, max_age: Duration) -> Option<f64> {
    let text = std::fs::read_to_string(path_of(db)).ok()?;
    let mut fields = text.split_whitespace();
    let len: u64 = fields.next()?.parse().ok()?;
    let mtime: u128 = fields.next()?.parse().ok()?;
    let checked_at: f64 = fields.next()?.parse().ok()?;
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let wal_in_use = std::fs::metadata(PathBuf::from(wal)).is_ok_and(|m| m.len() > 0);
    let fresh = (now_seconds() - checked_at) < max_age.as_secs_f64() && checked_at.is_finite();
    (fingerprint(db) == Some((len, mtime)) && !wal_in_use && fresh).then_some(checked_at)
}

/// Records the file as it is now, last checked whole at `checked_at` (epoch seconds). Written
/// to a temporary file and renamed, so a stamp is whole or absent; a failure (a read-only
/// directory) leaves no stamp, and the next open checks the file.
pub(crate) fn record(db: &Path, checked_at: f64) {
    let Some((len, mtime)) = fingerprint(db) else {
        return;
    };
    let stamp = path_of(db);
    let mut tmp = stamp.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = std::fs::write(&tmp, format!("{len} {mtime} {checked_at}\n"))
        .and_then(|()| std::fs::rename(&tmp, &stamp));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!(path = %db.display(), "no check stamp written: {e}");
    }
}

/// Forgets the stamp (a damaged file, or one this process cannot vouch for).
pub(crate) fn forget(db: &Path) {
    let _ = std::fs::remove_file(path_of(db));
}

/// The current time, for a check that runs now.
pub(crate) fn now() -> f64 {
    now_seconds()
}
