//! The single source of truth for the compaction settings: the JSON file
//! `<zotero-data-dir>/zocrates-data/zocrates_config.json` (spec sections 1 and 10), shared
//! safely by the engine, the `compaction` CLI and a preferences UI in other processes.
//!
//! - [`ConfigPath`] resolves where the file lives.
//! - [`ConfigStore::load`] creates a missing file with the defaults, backfills missing keys to
//!   disk, keeps every other key and every key's place, and validates the values with
//!   compaction-core's settings rules ([`compaction_core::Settings::effective`]).
//! - [`ConfigStore::update`] and [`ConfigStore::set`] are read-modify-writes under an exclusive
//!   lock on the sibling `zocrates_config.json.lock`, compatible with Python's `filelock`, and
//!   replace the file atomically (temporary file, fsync, rename, directory fsync).
//! - [`Watcher`] polls for changes made by other processes and only ever reports fully parsed,
//!   validated settings (or the reason the new content is unusable).
//!
//! # What this crate must never do
//! It never "repairs" a file it cannot parse or validate: such a file is left byte-identical
//! and the caller gets a [`ConfigError`] naming the file, key, value and expected type (and
//! can fall back with [`ConfigStore::load_or_last_good`]). It never rewrites a file that needs
//! no backfill, never writes without holding the lock, never writes in place, never restates
//! a settings rule (those live in compaction-core) and never prints.
//!
//! # Example
//! ```
//! use config_ssot::{ConfigPath, ConfigStore, Origin};
//!
//! let dir = tempfile::tempdir()?;
//! let env = |name: &str| (name == "ZOTERO_DATA_DIR").then(|| dir.path().as_os_str().to_owned());
//! let path = ConfigPath::resolve(None, env)?;
//! assert!(path.file().ends_with("zocrates-data/zocrates_config.json"));
//!
//! let store = ConfigStore::open(path);
//! let first = store.load()?; // creates the file with the spec's defaults
//! assert_eq!(first.origin(), Origin::Created);
//! assert_eq!(first.effective().retention_turns, 2);
//!
//! let updated = store.update(|s| s.adaptive_compaction_threshold = 0.9)?;
//! assert_eq!(updated.effective().threshold, 0.9);
//! let err = store.set("adaptive_compaction_min_turns", "four").unwrap_err();
//! assert!(err.to_string().contains("expected an integer"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod document;
mod error;
mod fsio;
mod path;
mod store;
mod strict_json;
mod watch;

pub use compaction_core::KEYS;
pub use document::{ConfigFile, Origin};
pub use error::ConfigError;
pub use fsio::MAX_FILE_BYTES;
pub use path::{ConfigPath, DATA_SUBDIR, FILE_NAME, LOCK_SUFFIX, ZOTERO_DATA_DIR};
pub use store::{ConfigStore, Loaded, READ_LOCK_WAIT};
pub use strict_json::reject_duplicate_keys;
pub use watch::{DEFAULT_POLL_INTERVAL, WatchEvent, WatchHandle, Watcher};
