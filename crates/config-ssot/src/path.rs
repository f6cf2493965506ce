//! Where the settings file lives (spec sections 1 and 10):
//! `<zotero-data-dir>/zocrates-data/zocrates_config.json`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::ConfigError;

/// The environment variable naming the Zotero data directory.
pub const ZOTERO_DATA_DIR: &str = "ZOTERO_DATA_DIR";
/// The directory under the Zotero data directory that holds the file.
pub const DATA_SUBDIR: &str = "zocrates-data";
/// The settings file's name.
pub const FILE_NAME: &str = "zocrates_config.json";
/// What is appended to the file's name to get the lock file shared with Python's `filelock`.
pub const LOCK_SUFFIX: &str = ".lock";

/// The resolved location of the settings file and its sibling lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPath {
    file: PathBuf,
}

impl ConfigPath {
    /// Resolves the file's path, first match wins:
    ///
    /// 1. `explicit`: the settings file itself (what a `--config FILE` flag names), used as is;
    /// 2. `$ZOTERO_DATA_DIR/zocrates-data/zocrates_config.json`;
    /// 3. the platform's default Zotero data directory, `~/Zotero` (`$HOME`) on Linux and
    ///    macOS, `%USERPROFILE%\Zotero` on Windows, then `zocrates-data/zocrates_config.json`.
    ///
    /// `env` looks up an environment variable (inject it in tests; [`ConfigPath::from_env`]
    /// uses the process environment). Empty variables count as unset.
    pub fn resolve(
        explicit: Option<PathBuf>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<ConfigPath, ConfigError> {
        if let Some(file) = explicit {
            return Ok(ConfigPath { file });
        }
        let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let data_dir = match var(ZOTERO_DATA_DIR) {
            Some(dir) => dir,
            None => {
                let home = if cfg!(windows) {
                    var("USERPROFILE")
                } else {
                    var("HOME")
                };
                let Some(home) = home else {
                    return Err(ConfigError::NoDataDirectory {
                        tried: if cfg!(windows) {
                            "ZOTERO_DATA_DIR and USERPROFILE are unset"
                        } else {
                            "ZOTERO_DATA_DIR and HOME are unset"
                        },
                    });
                };
                home.join("Zotero")
            }
        };
        Ok(ConfigPath {
            file: data_dir.join(DATA_SUBDIR).join(FILE_NAME),
        })
    }

    /// [`ConfigPath::resolve`] with the process environment.
    pub fn from_env(explicit: Option<PathBuf>) -> Result<ConfigPath, ConfigError> {
        ConfigPath::resolve(explicit, |name| std::env::var_os(name))
    }

    /// The settings file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The sibling lock file: the file's name plus `.lock`, as Python's
    /// `FileLock(path + ".lock")` names it.
    pub fn lock_file(&self) -> PathBuf {
        let mut name = self.file.as_os_str().to_owned();
        name.push(LOCK_SUFFIX);
        PathBuf::from(name)
    }

    /// The file a write replaces: the file itself, or, when the name given is a symbolic link
    /// (a dotfiles setup), the file the link resolves to. A dangling link is returned as is
    /// (writing through it then fails naming it).
    pub fn resolved_file(&self) -> PathBuf {
        match std::fs::symlink_metadata(&self.file) {
            Ok(meta) if meta.file_type().is_symlink() => {
                std::fs::canonicalize(&self.file).unwrap_or_else(|_| self.file.clone())
            }
            _ => self.file.clone(),
        }
    }

    /// The lock files an operation takes, in this order: the sibling of the name given
    /// ([`ConfigPath::lock_file`]) and, when that name is a symbolic link, the sibling of the
    /// file it resolves to. Every process that writes the real file, by whatever name, takes
    /// the resolved file's lock last, so writers through a link and through the real path
    /// exclude each other (issue 20 item 1), and the fixed order cannot deadlock.
    ///
    /// Python compatibility: a Python writer holding `FileLock(path + ".lock")` excludes us
    /// when `path` is the real file (its lock is our last one) or the same link name we were
    /// given (its lock is our first one). A Python writer that names the file through a
    /// *different* link than ours must lock `os.path.realpath(path) + ".lock"`.
    pub fn lock_files(&self) -> Vec<PathBuf> {
        let given = self.lock_file();
        let resolved = self.resolved_file();
        if resolved == self.file {
            return vec![given];
        }
        let mut name = resolved.into_os_string();
        name.push(LOCK_SUFFIX);
        vec![given, PathBuf::from(name)]
    }

    /// The directory holding the file (created on first load if missing).
    pub fn dir(&self) -> &Path {
        match self.file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    }
}

impl From<PathBuf> for ConfigPath {
    fn from(file: PathBuf) -> Self {
        ConfigPath { file }
    }
}

impl From<&Path> for ConfigPath {
    fn from(file: &Path) -> Self {
        ConfigPath {
            file: file.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn explicit_path_wins_and_is_the_file_itself() {
        let p = ConfigPath::resolve(
            Some(PathBuf::from("/etc/my.json")),
            env(&[(ZOTERO_DATA_DIR, "/z")]),
        )
        .unwrap();
        assert_eq!(p.file(), Path::new("/etc/my.json"));
        assert_eq!(p.lock_file(), PathBuf::from("/etc/my.json.lock"));
    }

    #[test]
    fn zotero_data_dir_beats_home() {
        let p = ConfigPath::resolve(None, env(&[(ZOTERO_DATA_DIR, "/z"), ("HOME", "/h")])).unwrap();
        assert_eq!(p.file(), Path::new("/z/zocrates-data/zocrates_config.json"));
        assert_eq!(p.dir(), Path::new("/z/zocrates-data"));
    }

    #[cfg(not(windows))]
    #[test]
    fn home_zotero_is_the_default_and_empty_vars_count_as_unset() {
        let p = ConfigPath::resolve(None, env(&[(ZOTERO_DATA_DIR, ""), ("HOME", "/h")])).unwrap();
        assert_eq!(
            p.file(),
            Path::new("/h/Zotero/zocrates-data/zocrates_config.json")
        );
        let err = ConfigPath::resolve(None, env(&[])).unwrap_err();
        assert!(err.to_string().contains("ZOTERO_DATA_DIR"), "{err}");
    }

    #[test]
    fn a_bare_file_name_lives_in_the_current_directory() {
        let p = ConfigPath::from(PathBuf::from("c.json"));
        assert_eq!(p.dir(), Path::new("."));
    }
}
