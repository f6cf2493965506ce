//! Change watching by polling: the file's metadata (size, modification and change times, inode)
//! is compared with the last poll, and only when it differs (or the last change was too recent
//! for coarse timestamps to be trusted) is the file read and its content hash compared.
//!
//! Latency: a change is reported by the first poll after the writer releases the lock, so at
//! most one poll interval ([`DEFAULT_POLL_INTERVAL`], 250 ms, with [`Watcher::spawn`]) plus one
//! small read. A poll whose metadata is unchanged costs one `stat`.
//!
//! Never a half-written state: this crate's writers replace the file by rename, so a lock-free
//! read sees whole files; a writer that rewrites in place (Python's `json.dump` under
//! `filelock`) can be caught mid-write, so any read that does not parse and validate is retried
//! under a shared lock, which waits for that writer to finish. Only the result read under the
//! lock is ever reported as an error.

use std::fs::Metadata;
use std::io::ErrorKind;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crate::document::{self, ConfigFile, Origin, content_hash};
use crate::fsio::{lock_all_shared, read_bounded};
use crate::{ConfigError, ConfigPath};

/// The poll interval [`Watcher::spawn`] is meant to be used with.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Modification times closer to "now" than this may hide a second write in the same timestamp
/// tick, so the content is re-read on every poll until the file is older than this.
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// What a poll found.
#[derive(Debug)]
#[non_exhaustive]
pub enum WatchEvent {
    /// The file changed and its new content is valid (missing keys are filled with defaults in
    /// memory; a watcher never writes).
    Changed(Box<ConfigFile>),
    /// The file changed into something unusable (or disappeared); keep the last good settings.
    Rejected(ConfigError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    inode: (u64, u64, i64, i64),
}

impl Fingerprint {
    fn of(meta: &Metadata) -> Fingerprint {
        Fingerprint {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            inode: {
                use std::os::unix::fs::MetadataExt;
                (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
            },
        }
    }
}

/// The last state reported.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Content(u64),
    Failed(String),
}

/// Polls the settings file for changes made by anyone (this process or another). Drive it with
/// [`Watcher::poll`] from your own loop, or hand it to a thread with [`Watcher::spawn`].
#[derive(Debug)]
pub struct Watcher {
    path: ConfigPath,
    seen: Option<Seen>,
    fingerprint: Option<Fingerprint>,
    racy: bool,
}

impl Watcher {
    /// A watcher whose first poll reports the file's current state.
    pub fn new(path: ConfigPath) -> Watcher {
        Watcher {
            path,
            seen: None,
            fingerprint: None,
            racy: false,
        }
    }

    pub(crate) fn with_baseline(path: ConfigPath, hash: u64) -> Watcher {
        Watcher {
            seen: Some(Seen::Content(hash)),
            ..Watcher::new(path)
        }
    }

    /// Checks the file once. Returns an event only when its state differs from the last one
    /// reported: new valid settings, or a new reason it cannot be used.
    pub fn poll(&mut self) -> Option<WatchEvent> {
        let file = self.path.file();
        let fingerprint = match std::fs::metadata(file) {
            Ok(meta) => Some(Fingerprint::of(&meta)),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(_) => None,
        };
        if fingerprint.is_some() && fingerprint == self.fingerprint && !self.racy {
            return None;
        }
        self.racy = fingerprint
            .as_ref()
            .and_then(|f| f.modified)
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_none_or(|age| age < RACY_WINDOW);
        self.fingerprint = fingerprint;

        let mut observed = self.observe();
        if !matches!(observed, (_, Ok(_))) {
            observed = match lock_all_shared(&self.path.lock_files()) {
                Ok(_lock) => self.observe(),
                Err(e) => (Seen::Failed(e.to_string()), Err(e)),
            };
        }
        let (state, result) = observed;
        if self.seen.as_ref() == Some(&state) {
            return None;
        }
        self.seen = Some(state);
        Some(match result {
            Ok(file) => WatchEvent::Changed(Box::new(file)),
            Err(e) => WatchEvent::Rejected(e),
        })
    }

    /// Reads and parses the file once, without locking.
    fn observe(&self) -> (Seen, Result<ConfigFile, ConfigError>) {
        let path = self.path.file();
        match read_bounded(path) {
            Ok(Some((bytes, _))) => {
                let hash = content_hash(&bytes);
                (
                    Seen::Content(hash),
                    document::parse(path, &bytes, Origin::Read),
                )
            }
            Ok(None) => {
                let e = ConfigError::Io {
                    path: path.to_owned(),
                    action: "find the settings file",
                    source: std::io::Error::from(ErrorKind::NotFound),
                };
                (Seen::Failed(e.to_string()), Err(e))
            }
            Err(e) => (Seen::Failed(e.to_string()), Err(e)),
        }
    }

    /// Polls on a background thread every `interval`, sending events to the returned handle.
    /// The thread stops when the handle is dropped.
    pub fn spawn(mut self, interval: Duration) -> Result<WatchHandle, ConfigError> {
        let (events_tx, events) = mpsc::channel();
        let (stop, stop_rx) = mpsc::channel::<()>();
        let path = self.path.file().to_owned();
        let thread = std::thread::Builder::new()
            .name("config-ssot-watch".to_owned())
            .spawn(move || {
                loop {
                    if let Some(event) = self.poll()
                        && events_tx.send(event).is_err()
                    {
                        return;
                    }
                    match stop_rx.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .map_err(|source| ConfigError::Io {
                path,
                action: "start the watcher thread",
                source,
            })?;
        Ok(WatchHandle {
            events,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// A watcher running on its own thread; dropping the handle stops and joins it.
#[derive(Debug)]
pub struct WatchHandle {
    events: Receiver<WatchEvent>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl WatchHandle {
    /// The events, in the order they were seen.
    pub fn events(&self) -> &Receiver<WatchEvent> {
        &self.events
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // The thread only polls and sends; a panic there has already been reported.
            let _ = thread.join();
        }
    }
}
