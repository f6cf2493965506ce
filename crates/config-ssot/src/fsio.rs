//! The file-system primitives: the sibling lock file (compatible with Python's `filelock`),
//! a bounded read that refuses directories and huge files, and atomic replacement.
//!
//! Lock compatibility: Python's `filelock.FileLock` on Unix calls `fcntl.flock(fd, LOCK_EX)` on
//! `zocrates_config.json.lock` and never deletes that file; std's `File::lock` is `flock(fd,
//! LOCK_EX)` on Linux and macOS, so the two exclude each other (the cross-language test checks
//! this). On Windows both take `LockFileEx`-style byte-range locks on the same file.
//!
//! A settings file named through a symbolic link is locked by the resolved file's lock too
//! (see [`crate::ConfigPath::lock_files`] for the order and what a Python writer must name).

use std::fs::{File, OpenOptions, Permissions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ConfigError;

/// Files larger than this are refused: a settings file is a few hundred bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

fn io_error(path: &Path, action: &'static str, source: std::io::Error) -> ConfigError {
    if source.kind() == ErrorKind::PermissionDenied {
        ConfigError::PermissionDenied {
            path: path.to_owned(),
            action,
        }
    } else {
        ConfigError::Io {
            path: path.to_owned(),
            action,
            source,
        }
    }
}

fn create_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o
}

/// Creates the file's directory (mode 0700 on Unix) if it is missing.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), ConfigError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)
        .map_err(|e| io_error(dir, "create the settings directory", e))
}

/// A held lock on the sibling lock file; released when dropped (closing the descriptor).
#[derive(Debug)]
pub(crate) struct LockGuard {
    _file: File,
}

/// Opens (creating with mode 0600 if needed) the lock file. An existing lock file that we may
/// not write is opened read-only: `flock` does not need write access.
fn open_lock(path: &Path) -> Result<File, ConfigError> {
    let mut o = create_options();
    match o.read(true).write(true).create(true).open(path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == ErrorKind::PermissionDenied && path.is_file() => {
            File::open(path).map_err(|e| io_error(path, "open the lock file", e))
        }
        Err(e) => Err(io_error(path, "open the lock file", e)),
    }
}

/// Blocks until the exclusive lock is held.
pub(crate) fn lock_exclusive(path: &Path) -> Result<LockGuard, ConfigError> {
    let file = open_lock(path)?;
    file.lock()
        .map_err(|e| io_error(path, "lock the lock file", e))?;
    Ok(LockGuard { _file: file })
}

/// Takes every lock in `paths`, in order ([`crate::ConfigPath::lock_files`]); all are
/// released when the guards drop.
pub(crate) fn lock_all_exclusive(paths: &[PathBuf]) -> Result<Vec<LockGuard>, ConfigError> {
    paths.iter().map(|p| lock_exclusive(p)).collect()
}

/// Takes every lock in `paths` shared, in order (a reader's [`lock_all_exclusive`]).
pub(crate) fn lock_all_shared(paths: &[PathBuf]) -> Result<Vec<LockGuard>, ConfigError> {
    paths.iter().map(|p| lock_shared(p)).collect()
}

/// How a reader's attempt on the lock files ended.
#[derive(Debug)]
pub(crate) enum ReadLock {
    /// Every lock file that exists is held shared (until this value is dropped).
    Held(#[allow(dead_code, reason = "held for its Drop")] Vec<LockGuard>),
    /// A lock file could not be opened (none exists yet, or it is not readable): the read goes
    /// ahead without it. Writers replace the file atomically, so a lock-free read still sees
    /// whole contents.
    Unavailable,
    /// Another process held a lock for longer than the bound.
    TimedOut(PathBuf),
}

/// Takes every existing lock file in `paths` shared, never creating one, waiting at most
/// `max_wait` in all; `waiting` is called once, with the lock file, if a writer holds one.
pub(crate) fn try_lock_all_shared(
    paths: &[PathBuf],
    max_wait: std::time::Duration,
    mut waiting: impl FnMut(&Path),
) -> ReadLock {
    let deadline = std::time::Instant::now() + max_wait;
    let mut told = false;
    let mut guards = Vec::new();
    for path in paths {
        let Ok(file) = File::open(path) else {
            return ReadLock::Unavailable;
        };
        loop {
            match file.try_lock_shared() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    if !told {
                        waiting(path);
                        told = true;
                    }
                    if std::time::Instant::now() >= deadline {
                        return ReadLock::TimedOut(path.clone());
                    }
                    // Polling: std has no timed lock; 20 ms keeps a waiting reader cheap.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::Error(_)) => return ReadLock::Unavailable,
            }
        }
        guards.push(LockGuard { _file: file });
    }
    ReadLock::Held(guards)
}

/// Takes a shared lock (readers only, excludes every writer), blocking.
fn lock_shared(path: &Path) -> Result<LockGuard, ConfigError> {
    let file = open_lock(path)?;
    file.lock_shared()
        .map_err(|e| io_error(path, "lock the lock file", e))?;
    Ok(LockGuard { _file: file })
}

/// The file's bytes and permissions, or `None` if it does not exist. Refuses anything that is
/// not a regular file and anything over [`MAX_FILE_BYTES`], before reading it.
pub(crate) fn read_bounded(path: &Path) -> Result<Option<(Vec<u8>, Permissions)>, ConfigError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, "inspect the settings file", e)),
    };
    if !meta.is_file() {
        return Err(ConfigError::NotAFile {
            path: path.to_owned(),
            found: if meta.is_dir() {
                "a directory"
            } else {
                "something that is not a regular file"
            },
        });
    }
    let too_large = |size| ConfigError::TooLarge {
        path: path.to_owned(),
        size,
        limit: MAX_FILE_BYTES,
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, "read the settings file", e)),
    };
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow between stat and read; read at most one byte past the limit.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, "read the settings file", e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some((bytes, meta.permissions())))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory (mode 0600,
/// or `keep` — the replaced file's permissions), written and fsynced, renamed over the file,
/// then the directory fsynced. A reader sees the old bytes or the new ones, never a mix.
///
/// If `path` is a symbolic link (a dotfiles setup), the file it points to is replaced and the
/// link is kept.
pub(crate) fn replace_atomically(
    path: &Path,
    bytes: &[u8],
    keep: Option<Permissions>,
) -> Result<(), ConfigError> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path)
            .map_err(|e| io_error(path, "follow the settings file's symbolic link", e))?,
        _ => path.to_owned(),
    };
    let path = target.as_path();
    remove_stale_temp_files(path);
    let tmp = temp_path(path);
    let result = write_then_rename(path, &tmp, bytes, keep);
    if result.is_err() {
        // Best effort: a leftover temporary file is harmless (it is never read).
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes the temporary files a killed writer of `path` left behind
/// (`.<name>.<pid>.<n>.tmp`). The caller holds the exclusive lock, which every writer of this
/// file holds while its temporary file exists, so any such file is stale. Best effort: a file
/// that cannot be removed is left (it is never read).
fn remove_stale_temp_files(path: &Path) {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in entries.filter_map(Result::ok) {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let is_ours = file_name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(pid, n)| {
                !pid.is_empty()
                    && !n.is_empty()
                    && pid.bytes().all(|b| b.is_ascii_digit())
                    && n.bytes().all(|b| b.is_ascii_digit())
            });
        if is_ours {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn write_then_rename(
    path: &Path,
    tmp: &Path,
    bytes: &[u8],
    keep: Option<Permissions>,
) -> Result<(), ConfigError> {
    let action = "write a temporary settings file";
    let dir = tmp.parent().unwrap_or(Path::new("."));
    let mut file = create_options()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| io_error(dir, "create a temporary file in the settings directory", e))?;
    if let Some(perm) = keep {
        file.set_permissions(perm)
            .map_err(|e| io_error(tmp, action, e))?;
    }
    file.write_all(bytes)
        .map_err(|e| io_error(tmp, action, e))?;
    file.sync_all().map_err(|e| io_error(tmp, action, e))?;
    drop(file);
    std::fs::rename(tmp, path).map_err(|e| io_error(path, "replace the settings file", e))?;
    sync_dir(path)
}

#[cfg(unix)]
fn sync_dir(path: &Path) -> Result<(), ConfigError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, "sync the settings directory", e))
}

#[cfg(not(unix))]
fn sync_dir(_path: &Path) -> Result<(), ConfigError> {
    // Windows cannot open a directory as a file to flush it; the rename is durable on NTFS.
    Ok(())
}
