//! [`ConfigStore`]: load (create, backfill, validate), read-modify-write updates under the lock,
//! and the fall-back-to-last-good API.

use std::fs::Permissions;
use std::path::Path;
use std::time::Duration;

use compaction_core::KEYS;
use compaction_core::Settings;
use serde_json::{Map, Value};

use crate::document::{self, ConfigFile, Origin, content_hash, render};
use crate::fsio::{
    ReadLock, ensure_dir, lock_all_exclusive, read_bounded, replace_atomically, try_lock_all_shared,
};
use crate::watch::Watcher;
use crate::{ConfigError, ConfigPath};

/// How long [`ConfigStore::read`] waits by default for a writer that holds the lock.
pub const READ_LOCK_WAIT: Duration = Duration::from_secs(5);

/// What [`ConfigStore::read`] found, with how the lock went.
#[derive(Debug)]
pub struct Read {
    /// The file's settings (missing keys hold their defaults, in memory only).
    pub file: ConfigFile,
    /// Set when the read went ahead without the lock because a writer held it past the bound:
    /// the lock file. The contents are still whole (writers replace the file atomically).
    pub lock_timed_out: Option<std::path::PathBuf>,
}

/// The settings file shared by the engine, the CLI and a preferences UI. Every operation takes
/// the sibling lock (`zocrates_config.json.lock`) exclusively for its whole read-modify-write,
/// so concurrent writers in any process (Rust or Python `filelock`) never lose an update.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    path: ConfigPath,
}

/// The result of [`ConfigStore::load_or_last_good`]: settings to run on, and the reason if they
/// are not the file's.
#[derive(Debug)]
pub struct Loaded {
    /// The file's settings, or the last good ones, or the defaults ([`ConfigFile::origin`] says).
    pub file: ConfigFile,
    /// Why the file could not be used, for the caller to show or log as a warning.
    pub warning: Option<ConfigError>,
}

impl ConfigStore {
    /// A store for the file at `path`. Touches nothing on disk until [`ConfigStore::load`].
    pub fn open(path: impl Into<ConfigPath>) -> ConfigStore {
        ConfigStore { path: path.into() }
    }

    /// The file's location.
    pub fn path(&self) -> &ConfigPath {
        &self.path
    }

    /// Loads and validates the file under the lock. A missing file (and directory) is created
    /// with the defaults (mode 0600); missing keys are backfilled and written, appended in spec
    /// order after the existing keys, whose order and values are untouched. A file that needs
    /// no backfill is not written at all. On any error nothing is written.
    pub fn load(&self) -> Result<ConfigFile, ConfigError> {
        ensure_dir(self.path.dir())?;
        let _lock = lock_all_exclusive(&self.path.lock_files())?;
        self.load_locked().map(|(file, _)| file)
    }

    /// Reads and validates the file without ever writing: nothing is created, and missing keys
    /// take their defaults in memory only ([`Origin::ReadWithDefaults`]). For runs that only
    /// use the settings (`compaction replay`, `evaluate`); [`ConfigStore::load`] is the one
    /// that creates and backfills.
    ///
    /// The lock is taken shared only when it can be: a lock file that does not exist or cannot
    /// be opened (a read-only directory) is skipped, and a writer holding it is waited for at
    /// most `max_wait`, calling `waiting` once with the lock file first; past the bound the
    /// read goes ahead and says so in [`Read::lock_timed_out`]. A missing file is an
    /// [`ConfigError::Io`] error of kind `NotFound`.
    pub fn read(
        &self,
        max_wait: Duration,
        waiting: impl FnMut(&Path),
    ) -> Result<Read, ConfigError> {
        let lock = try_lock_all_shared(&self.path.lock_files(), max_wait, waiting);
        let path = self.path.file();
        let Some((bytes, _)) = read_bounded(path)? else {
            return Err(ConfigError::Io {
                path: path.to_owned(),
                action: "read the settings file",
                source: std::io::ErrorKind::NotFound.into(),
            });
        };
        let file = document::parse(path, &bytes, Origin::Read)?;
        let file = if file.backfilled().is_empty() {
            file
        } else {
            file.with_origin(Origin::ReadWithDefaults)
        };
        Ok(Read {
            file,
            lock_timed_out: match lock {
                ReadLock::TimedOut(path) => Some(path),
                ReadLock::Held(_) | ReadLock::Unavailable => None,
            },
        })
    }

    /// [`ConfigStore::load`], but a bad file never stops the caller: it gets `last_good` (or the
    /// defaults) and the error as a warning value.
    pub fn load_or_last_good(&self, last_good: Option<&ConfigFile>) -> Loaded {
        match self.load() {
            Ok(file) => Loaded {
                file,
                warning: None,
            },
            Err(error) => Loaded {
                file: match last_good {
                    Some(f) => f.clone().with_origin(Origin::LastGood),
                    None => ConfigFile::defaults(self.path.file()),
                },
                warning: Some(error),
            },
        }
    }

    /// Read-modify-write of the spec settings under the lock, for a preferences UI: `edit`
    /// changes a copy of the current settings; the result is validated with compaction-core's
    /// rules, merged back (other keys and every key's place untouched) and written atomically.
    /// Nothing is written if nothing changed or the result is invalid.
    pub fn update(&self, edit: impl FnOnce(&mut Settings)) -> Result<ConfigFile, ConfigError> {
        self.modify(|map, current| {
            let mut settings = current.clone();
            edit(&mut settings);
            document::merge_settings(map, &settings);
            Ok(())
        })
    }

    /// Sets one spec key from text a person typed (`compaction config set KEY VALUE`): `true`
    /// or `false`, an integer, a number, or a string, as the key requires. Unknown keys are
    /// refused with the list of known ones (a typo must not create a new key).
    pub fn set(&self, key: &str, text: &str) -> Result<ConfigFile, ConfigError> {
        let (key, value) = document::value_from_text(key, text)?;
        self.modify(|map, _| {
            document::set_spec_value(map, key, value);
            Ok(())
        })
    }

    /// Sets several spec keys at once from typed text, as [`ConfigStore::set`] does for one,
    /// in a single read-modify-write: the values are validated together (so a floor and a
    /// ceiling can move past each other), and on any error nothing is written. For a
    /// preferences form that saves every field it shows.
    pub fn set_many<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<ConfigFile, ConfigError> {
        let values = pairs
            .into_iter()
            .map(|(key, text)| document::value_from_text(key, text))
            .collect::<Result<Vec<_>, _>>()?;
        self.modify(|map, _| {
            for (key, value) in values {
                document::set_spec_value(map, key, value);
            }
            Ok(())
        })
    }

    /// Sets a key that is not a spec setting (e.g. `decision_adapter`), keeping its place if it
    /// exists and appending it otherwise.
    pub fn set_extra(&self, key: &str, value: Value) -> Result<ConfigFile, ConfigError> {
        if KEYS.contains(&key) {
            return Err(ConfigError::ReservedKey {
                key: key.to_owned(),
            });
        }
        self.modify(|map, _| {
            map.insert(key.to_owned(), value);
            Ok(())
        })
    }

    /// A watcher that reports every change from `file`'s content on.
    pub fn watch_from(&self, file: &ConfigFile) -> Watcher {
        Watcher::with_baseline(self.path.clone(), file.content_hash())
    }

    /// A watcher whose first poll reports the current content.
    pub fn watch(&self) -> Watcher {
        Watcher::new(self.path.clone())
    }

    fn modify(
        &self,
        edit: impl FnOnce(&mut Map<String, Value>, &Settings) -> Result<(), ConfigError>,
    ) -> Result<ConfigFile, ConfigError> {
        ensure_dir(self.path.dir())?;
        let _lock = lock_all_exclusive(&self.path.lock_files())?;
        let (current, permissions) = self.load_locked()?;
        let mut map = current.raw().clone();
        edit(&mut map, current.settings())?;
        if &map == current.raw() {
            return Ok(current);
        }
        let mut next = document::from_map(self.path.file(), map)?;
        let bytes = render(next.raw());
        replace_atomically(self.path.file(), &bytes, permissions)?;
        next.set_content_hash(content_hash(&bytes));
        Ok(next.with_origin(Origin::Updated))
    }

    /// Reads, creates or backfills the file; the caller holds the exclusive lock. Returns the
    /// file's permissions so a replacement keeps them.
    fn load_locked(&self) -> Result<(ConfigFile, Option<Permissions>), ConfigError> {
        let path = self.path.file();
        match read_bounded(path)? {
            None => {
                let file = ConfigFile::defaults(path).with_origin(Origin::Created);
                replace_atomically(path, &file.render(), None)?;
                tracing::info!(path = %path.display(), "created the settings file with defaults");
                Ok((file, None))
            }
            Some((bytes, permissions)) => {
                let mut file = document::parse(path, &bytes, Origin::Read)?;
                if !file.backfilled().is_empty() {
                    let out = file.render();
                    replace_atomically(path, &out, Some(permissions.clone()))?;
                    file.set_content_hash(content_hash(&out));
                    tracing::info!(
                        path = %path.display(),
                        keys = ?file.backfilled(),
                        "backfilled missing settings with their defaults"
                    );
                }
                Ok((file, Some(permissions)))
            }
        }
    }
}
