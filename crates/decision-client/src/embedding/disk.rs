//! The vectors kept between processes: one file per embedded text in a cache directory
//! (`<user cache>/adaptive-compaction/vectors/all-MiniLM-L6-v2`), so a one-shot
//! `compaction evaluate` embeds only the turns no earlier process embedded, whatever store
//! (native, Google ADK's layouts, PostgreSQL) holds the session. See ARCHITECTURE.md,
//! "Embedding vectors".
//!
//! A file is named by a 128-bit hash of the text and the number of tokens embedded and holds
//! the vector's [`DIMENSIONS`] little-endian `f32`s. It is written to a temporary name and
//! renamed, so a reader never sees half a vector; a file of the wrong length is ignored (the
//! text is embedded again and the file replaced).
//!
//! # Bounded
//! The directory keeps at most [`MAX_KEPT_VECTORS`] vectors (about 200 MB on a file system of
//! 4 KB blocks): the first write of each process that finds more removes the oldest files
//! (by modification time) down to four fifths of it. A removed vector is embedded again
//! when a session needs it.
//!
//! # What it must never do
//! Fail a probe: a directory that cannot be read or written only costs an embedding.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::SystemTime;

use super::encoder::DIMENSIONS;
use super::files::{MODEL_DIR_NAME, user_cache_dir};

/// The directory of kept vectors under the platform's user cache directory, from the
/// environment (`None` without one).
pub(crate) fn default_dir(env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    user_cache_dir(env).map(|c| {
        c.join("adaptive-compaction")
            .join("vectors")
            .join(MODEL_DIR_NAME)
    })
}

/// FNV-1a over `bytes` from `basis`: stable across processes and Rust versions.
fn fnv1a(basis: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(basis, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The file name of `text`'s vector at `max_tokens`.
fn file_name(text: &str, max_tokens: usize) -> String {
    let a = fnv1a(0xcbf2_9ce4_8422_2325, text.as_bytes());
    let b = fnv1a(0x6c62_272e_07bb_0142, text.as_bytes());
    format!("{a:016x}{b:016x}-{}-{max_tokens}.f32", text.len())
}

/// The most vectors one directory keeps.
pub(crate) const MAX_KEPT_VECTORS: usize = 50_000;

/// Vectors kept in one directory.
#[derive(Debug, Clone)]
pub(crate) struct DiskVectors {
    dir: PathBuf,
    limit: usize,
    pruned: Arc<Once>,
}

impl DiskVectors {
    pub(crate) fn new(dir: PathBuf) -> DiskVectors {
        DiskVectors::with_limit(dir, MAX_KEPT_VECTORS)
    }

    fn with_limit(dir: PathBuf, limit: usize) -> DiskVectors {
        DiskVectors {
            dir,
            limit,
            pruned: Arc::new(Once::new()),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kept vector of `text`, if a complete one is there.
    pub(crate) fn get(&self, text: &str, max_tokens: usize) -> Option<Vec<f32>> {
        let bytes = std::fs::read(self.dir.join(file_name(text, max_tokens))).ok()?;
        if bytes.len() != DIMENSIONS * 4 {
            return None;
        }
        Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }

    /// Keeps `vector` for `text`; a failure is ignored (the next process embeds it again).
    pub(crate) fn put(&self, text: &str, max_tokens: usize, vector: &[f32]) {
        if vector.len() != DIMENSIONS || std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        self.pruned.call_once(|| prune(&self.dir, self.limit));
        // One temporary name per write, so two threads keeping the same text never share one.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let name = file_name(text, max_tokens);
        let temporary = self.dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
        let written = std::fs::write(&temporary, bytes)
            .and_then(|()| std::fs::rename(&temporary, self.dir.join(&name)));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
    }
}

/// Removes the oldest vector files of `dir` down to four fifths of `limit` when it holds
/// more than `limit`; a file that cannot be read or removed is left.
fn prune(dir: &Path, limit: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    // Names first (no stat per file): the common case, a directory under its limit, stops here.
    let vectors: Vec<std::fs::DirEntry> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".f32"))
        .collect();
    if vectors.len() <= limit {
        return;
    }
    let mut files: Vec<(SystemTime, PathBuf)> = vectors
        .iter()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort();
    let keep = limit / 5 * 4;
    for (_, path) in &files[..files.len().saturating_sub(keep)] {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differ_by_text_and_tokens_and_are_stable() {
        assert_ne!(file_name("kelp", 128), file_name("kelp", 256));
        assert_ne!(file_name("kelp", 128), file_name("kelq", 128));
        // FNV-1a's published test vector: stable whatever the Rust version.
        assert_eq!(fnv1a(0xcbf2_9ce4_8422_2325, b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_kept_vector_comes_back_and_a_short_file_is_ignored() {
        let dir = std::env::temp_dir().join(format!("ac-disk-vectors-{}", std::process::id()));
        let disk = DiskVectors::new(dir.clone());
        let v: Vec<f32> = (0..DIMENSIONS).map(|i| i as f32 / 7.0).collect();
        assert_eq!(disk.get("a query about kelp", 256), None);
        disk.put("a query about kelp", 256, &v);
        assert_eq!(disk.get("a query about kelp", 256), Some(v));
        assert_eq!(disk.get("a query about kelp", 128), None);
        std::fs::write(dir.join(file_name("short", 256)), [0u8; 12]).unwrap();
        assert_eq!(disk.get("short", 256), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_full_directory_loses_its_oldest_vectors_on_the_first_write() {
        let dir = std::env::temp_dir().join(format!("ac-disk-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let disk = DiskVectors::with_limit(dir.clone(), 10);
        let v: Vec<f32> = vec![0.5; DIMENSIONS];
        let epoch = SystemTime::UNIX_EPOCH;
        for i in 0..12u64 {
            let text = format!("turn {i}");
            disk.put(&text, 64, &v);
            let file = std::fs::File::options()
                .write(true)
                .open(dir.join(file_name(&text, 64)))
                .unwrap();
            file.set_modified(epoch + std::time::Duration::from_secs(1_000 + i))
                .unwrap();
        }
        // Written by this process after its first write: nothing was removed yet.
        assert!((0..12).all(|i| disk.get(&format!("turn {i}"), 64).is_some()));
        // The next process finds 12 > 10 and keeps the newest 8.
        let next = DiskVectors::with_limit(dir.clone(), 10);
        next.put("turn 12", 64, &v);
        let kept: Vec<u64> = (0..12)
            .filter(|i| next.get(&format!("turn {i}"), 64).is_some())
            .collect();
        assert_eq!(kept, (4..12).collect::<Vec<_>>());
        assert!(next.get("turn 12", 64).is_some());
        let _ = std::fs::remove_dir_all(dir);
    }
}
