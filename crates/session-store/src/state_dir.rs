//! The state directory: where the ADK stores keep what they know about a database they may not
//! write beside (ADK's own file, ADK's tables on PostgreSQL).
//!
//! ADK's files belong to ADK: this crate creates nothing in their directory and no object in
//! their schema. What lets the post-turn hook's cost stay independent of the database's size
//! there is kept in the user's cache directory instead (`$XDG_CACHE_HOME/adaptive-compaction`,
//! else `$HOME/.cache/adaptive-compaction`), one small file per database (when its whole-file
//! check last ran) and per session (the outline checkpoint, `crate::adk_outline`). Everything
//! here is a cache: a missing, unreadable, foreign or stale entry only costs the whole read it
//! would have saved, and every entry is checked against the database before it is trusted.
//! Nothing here is ever needed to read or write a session correctly.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The directory name under the platform's cache directory.
const NAME: &str = "adaptive-compaction";

/// The platform's cache directory for this crate, when the environment names one.
pub(crate) fn platform() -> Option<PathBuf> {
    let from = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    from("XDG_CACHE_HOME")
        .or_else(|| from("HOME").map(|home| home.join(".cache")))
        .map(|cache| cache.join(NAME))
}

/// FNV-1a, 64 bits: a file name for a key that is stable across builds (std's hasher is not).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The entry of kind `kind` for `key` under `dir`. The key itself is stored in the entry and
/// compared on reading, so two keys with one hash never read each other's entry.
pub(crate) fn entry(dir: &Path, kind: &str, key: &str) -> PathBuf {
    dir.join(kind).join(format!("{:016x}.json", fnv1a(key)))
}

/// An entry as stored: the key it belongs to, and the value.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored<K, T> {
    key: K,
    value: T,
}

/// The value stored for `key` at `path`, if there is one that reads whole.
pub(crate) fn read<T: DeserializeOwned>(path: &Path, key: &str) -> Option<T> {
    let text = std::fs::read(path).ok()?;
    let stored: Stored<String, T> = serde_json::from_slice(&text).ok()?;
    (stored.key == key).then_some(stored.value)
}

/// Stores `value` for `key` at `path`: written to a temporary file and renamed, so that an
/// entry is whole or absent. A failure (no cache directory, a read-only home) is logged and
/// otherwise ignored: the next run does the whole read again.
pub(crate) fn write<T: Serialize>(path: &Path, key: &str, value: &T) {
    let stored = Stored { key, value };
    let written = serde_json::to_vec(&stored)
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            let dir = path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)?;
            let mut tmp = path.as_os_str().to_owned();
            tmp.push(format!(".{}.tmp", std::process::id()));
            let tmp = PathBuf::from(tmp);
            std::fs::write(&tmp, bytes)
                .and_then(|()| std::fs::rename(&tmp, path))
                .inspect_err(|_| {
                    let _ = std::fs::remove_file(&tmp);
                })
        });
    if let Err(e) = written {
        tracing::debug!(path = %path.display(), "no state entry written: {e}");
    }
}

/// Removes the entry at `path` (a damaged file's check record).
#[cfg(feature = "sqlite")]
pub(crate) fn forget(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_only_under_its_own_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = entry(dir.path(), "kind", "a key");
        assert_eq!(read::<u32>(&path, "a key"), None);
        write(&path, "a key", &7_u32);
        assert_eq!(read::<u32>(&path, "a key"), Some(7));
        assert_eq!(read::<u32>(&path, "another key"), None);
        std::fs::write(&path, b"{not json").unwrap();
        assert_eq!(read::<u32>(&path, "a key"), None);
        forget(&path);
        assert!(!path.exists());
        assert_ne!(fnv1a("a"), fnv1a("b"));
    }
}
