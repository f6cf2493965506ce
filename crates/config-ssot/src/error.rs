//! The crate's one error type. Every variant names the file (or the key the caller typed) and,
//! for content errors, the key, the value found and the form expected.

use std::path::PathBuf;

use compaction_core::SettingsError;

/// Everything that can go wrong while locating, reading, validating or writing the settings
/// file. Content errors (syntax, type, validation, size, a directory in the file's place) are
/// detected before anything is written, so the file is left byte-identical.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Neither an explicit path, `ZOTERO_DATA_DIR` nor a home directory was available.
    #[error(
        "cannot locate the Zotero data directory: {tried}; set ZOTERO_DATA_DIR or pass the \
         config file's path explicitly"
    )]
    NoDataDirectory {
        /// What was looked up, in order.
        tried: &'static str,
    },
    /// The operating system refused access to a file or directory.
    #[error("{}: permission denied (could not {action})", path.display())]
    PermissionDenied {
        /// The file or directory.
        path: PathBuf,
        /// What was being attempted, e.g. "read the settings file".
        action: &'static str,
    },
    /// Any other I/O failure.
    #[error("{}: could not {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being attempted, e.g. "read the settings file".
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Something other than a regular file (e.g. a directory) is where the file should be.
    #[error(
        "{}: expected a JSON settings file, found {found}; it was left untouched",
        path.display()
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What was found, e.g. "a directory".
        found: &'static str,
    },
    /// The file is larger than any settings file can reasonably be.
    #[error(
        "{}: the file is {size} bytes, more than the {limit}-byte limit for a settings file; \
         it was left untouched",
        path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not valid JSON (truncated, a stray comma, not UTF-8, ...).
    #[error(
        "{}: invalid JSON at line {line}, column {column}: {message}; expected a JSON object \
         of settings; the file was left untouched",
        path.display()
    )]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// The top level of the file is valid JSON but not an object.
    #[error(
        "{}: the top level must be a JSON object of settings, found {found}; the file was left \
         untouched",
        path.display()
    )]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// The JSON type found, e.g. "an array".
        found: &'static str,
    },
    /// A known key holds a value of the wrong JSON type (including `null`).
    #[error(
        "{}: key \"{key}\" has value {}, expected {expected}; the file was left untouched",
        path.display(),
        described(value, found)
    )]
    WrongType {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
        /// The value found, as JSON, shortened if long.
        value: String,
        /// The JSON type found, e.g. "null".
        found: &'static str,
        /// The form expected, e.g. "an integer".
        expected: &'static str,
    },
    /// Every key has the right type but a value breaks a settings rule (compaction-core's).
    #[error("{}: {source}; the file was left untouched", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The rule broken, naming the key and value.
        #[source]
        source: SettingsError,
    },
    /// A caller asked to set a key that is not one of the spec's settings.
    #[error("unknown setting \"{key}\"; the settings are: {known}")]
    UnknownKey {
        /// The key given.
        key: String,
        /// The spec's keys, comma-separated.
        known: String,
    },
    /// A caller asked to set a spec key through the free-form extra-key API.
    #[error("\"{key}\" is a typed setting; set it with `set` (or `update`), not as an extra key")]
    ReservedKey {
        /// The key given.
        key: String,
    },
    /// A value typed by a caller (e.g. `compaction config set KEY VALUE`) does not parse as
    /// the key's type.
    #[error("cannot set \"{key}\" to {value:?}: expected {expected}")]
    BadValue {
        /// The key.
        key: &'static str,
        /// The text given.
        value: String,
        /// The form expected, e.g. "an integer".
        expected: &'static str,
    },
}

impl ConfigError {
    /// The spec key the error is about, when it is about one value: the key of a wrong type,
    /// a broken rule, a bad typed value, or an unknown key a caller asked for. `None` for
    /// errors of the whole file (syntax, I/O, size).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::WrongType { key, .. } | ConfigError::BadValue { key, .. } => Some(key),
            ConfigError::Invalid { source, .. } => Some(source.key()),
            ConfigError::UnknownKey { key, .. } | ConfigError::ReservedKey { key } => Some(key),
            _ => None,
        }
    }
}

/// `null` speaks for itself; any other value gets its JSON type spelled out.
fn described(value: &str, found: &str) -> String {
    if value == "null" {
        value.to_owned()
    } else {
        format!("{value} ({found})")
    }
}
