//! The decision-client's own configuration keys, read from the same JSON file as the spec's
//! eight settings (section 10). The decision model slug itself stays the spec's
//! `adaptive_compaction_decision_model`; these keys only say *where* and *how* to ask it.
//!
//! | key | type | default | meaning |
//! | --- | --- | --- | --- |
//! | `decision_adapter` | string | `"auto"` | `auto`, `decisions`, `openai-decisions`, `chat-logprobs`, `local`, `embedding` or `offline` |
//! | `decision_api_base_url` | string | `"https://openrouter.ai"` | Decisions API host (both Decisions shapes) |
//! | `decision_api_path` | string | `"/api/alpha/decisions"` | Decisions API path (`/v1/decisions` for OpenAI) |
//! | `decision_api_key_env` | env var name (`A-Z`, `0-9`, `_`) | `"OPENROUTER_API_KEY"` | variable holding the bearer key (its name, never the key) |
//! | `decision_timeout_secs` | number | `10.0` | whole-exchange timeout, both HTTP adapters (spec 5.1) |
//! | `decision_chat_base_url` | string | `"https://openrouter.ai/api"` | OpenAI-compatible host |
//! | `decision_chat_path` | string | `"/v1/chat/completions"` | chat-completions path |
//! | `decision_chat_model` | string or null | `null` | judge model; `null` uses the decision model slug |
//! | `decision_chat_api_key_env` | env var name (`A-Z`, `0-9`, `_`) | `"OPENROUTER_API_KEY"` | variable holding the judge's key (optional for local servers) |
//! | `decision_chat_top_logprobs` | integer | `10` | alternatives requested for the first token, 5 to 20 |
//! | `decision_embedding_model_dir` | path string or null | `null` | the embedding model's files (`config.json`, `tokenizer.json`, `model.safetensors`); `null` looks in the platform cache directory, then in a Hugging Face hub cache |
//!
//! Unrelated keys are ignored, so the whole settings object can be passed in; a `decision_*`
//! key that is not in the table is an error naming it (a misspelling is never ignored), as
//! for the summarizer's `summarizer_*` keys.
//!
//! The two `*_api_key_env` keys take the *name* of a variable, `^[A-Z_][A-Z0-9_]*$`
//! ([`crate::http::is_env_var_name`]). Any other value is refused without being shown, since
//! the usual mistake is pasting the key itself.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::http::{ENV_VAR_NAME_FORM, describe_non_env_var_name, is_env_var_name};

/// Key: which adapter to build.
pub const KEY_ADAPTER: &str = "decision_adapter";
/// Key: Decisions API base URL.
pub(crate) const KEY_API_BASE_URL: &str = "decision_api_base_url";
/// Key: Decisions API path.
pub(crate) const KEY_API_PATH: &str = "decision_api_path";
/// Key: the environment variable holding the Decisions API key.
pub(crate) const KEY_API_KEY_ENV: &str = "decision_api_key_env";
/// Key: the timeout of one probe, in seconds.
pub(crate) const KEY_TIMEOUT_SECS: &str = "decision_timeout_secs";
/// Key: chat-completions base URL.
pub(crate) const KEY_CHAT_BASE_URL: &str = "decision_chat_base_url";
/// Key: chat-completions path.
pub(crate) const KEY_CHAT_PATH: &str = "decision_chat_path";
/// Key: the chat judge's model slug.
pub(crate) const KEY_CHAT_MODEL: &str = "decision_chat_model";
/// Key: the environment variable holding the chat judge's key.
pub(crate) const KEY_CHAT_API_KEY_ENV: &str = "decision_chat_api_key_env";
/// Key: how many first-token alternatives the judge asks for.
pub(crate) const KEY_CHAT_TOP_LOGPROBS: &str = "decision_chat_top_logprobs";

/// Key: the directory of the embedding model's files.
pub(crate) const KEY_EMBEDDING_MODEL_DIR: &str = "decision_embedding_model_dir";

/// The prefix of every decision-client key.
pub(crate) const KEY_PREFIX: &str = "decision_";

/// Every key this module reads, in table order.
pub const KEYS: [&str; 11] = [
    KEY_ADAPTER,
    KEY_API_BASE_URL,
    KEY_API_PATH,
    KEY_API_KEY_ENV,
    KEY_TIMEOUT_SECS,
    KEY_CHAT_BASE_URL,
    KEY_CHAT_PATH,
    KEY_CHAT_MODEL,
    KEY_CHAT_API_KEY_ENV,
    KEY_CHAT_TOP_LOGPROBS,
    KEY_EMBEDDING_MODEL_DIR,
];

/// Which adapter the factory builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum DecisionAdapter {
    /// The Decisions API when its key is set, else the local models ([`DecisionAdapter::Local`]).
    #[default]
    Auto,
    /// The Decisions API ("System One" format).
    Decisions,
    /// The OpenAI Decisions wire shape (`questions` and `answers` as arrays).
    OpenAiDecisions,
    /// An OpenAI-compatible chat model judged through first-token logprobs.
    ChatLogprobs,
    /// The embedding model when its files are installed, else the offline lexical model:
    /// never a remote host (the demo's choice).
    Local,
    /// The local sentence-embedding model (decision-client's `embedding` feature); its files
    /// must be installed.
    Embedding,
    /// The embedded offline lexical model.
    Offline,
}

impl DecisionAdapter {
    /// The spelling used in configuration files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionAdapter::Auto => "auto",
            DecisionAdapter::Decisions => "decisions",
            DecisionAdapter::OpenAiDecisions => "openai-decisions",
            DecisionAdapter::ChatLogprobs => "chat-logprobs",
            DecisionAdapter::Local => "local",
            DecisionAdapter::Embedding => "embedding",
            DecisionAdapter::Offline => "offline",
        }
    }

    /// Parses the configuration spelling.
    pub fn parse(s: &str) -> Option<DecisionAdapter> {
        [
            DecisionAdapter::Auto,
            DecisionAdapter::Decisions,
            DecisionAdapter::OpenAiDecisions,
            DecisionAdapter::ChatLogprobs,
            DecisionAdapter::Local,
            DecisionAdapter::Embedding,
            DecisionAdapter::Offline,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// Where and how to ask the decision model. See the module docs for every key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionConfig {
    /// `decision_adapter`.
    pub adapter: DecisionAdapter,
    /// `decision_api_base_url`.
    pub api_base_url: String,
    /// `decision_api_path`.
    pub api_path: String,
    /// `decision_api_key_env`.
    pub api_key_env: String,
    /// `decision_timeout_secs`, validated finite and positive.
    pub timeout_secs: f64,
    /// `decision_chat_base_url`.
    pub chat_base_url: String,
    /// `decision_chat_path`.
    pub chat_path: String,
    /// `decision_chat_model`; `None` uses the decision model slug.
    pub chat_model: Option<String>,
    /// `decision_chat_api_key_env`.
    pub chat_api_key_env: String,
    /// `decision_chat_top_logprobs`, 5 to 20.
    pub chat_top_logprobs: u8,
    /// `decision_embedding_model_dir`; `None` searches the default places.
    pub embedding_model_dir: Option<std::path::PathBuf>,
}

impl Default for DecisionConfig {
    fn default() -> Self {
        DecisionConfig {
            adapter: DecisionAdapter::Auto,
            api_base_url: "https://openrouter.ai".to_owned(),
            api_path: "/api/alpha/decisions".to_owned(),
            api_key_env: "OPENROUTER_API_KEY".to_owned(),
            timeout_secs: 10.0,
            chat_base_url: "https://openrouter.ai/api".to_owned(),
            chat_path: "/v1/chat/completions".to_owned(),
            chat_model: None,
            chat_api_key_env: "OPENROUTER_API_KEY".to_owned(),
            chat_top_logprobs: 10,
            embedding_model_dir: None,
        }
    }
}

/// A decision-client key holds a value of the wrong form.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionConfigError {
    /// A `decision_*` key this crate does not read (a misspelling).
    #[error("unknown key {key}; the decision keys are: {}", KEYS.join(", "))]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// The value has the wrong JSON type or an unknown spelling.
    #[error("{key} must be {expected}, got {found}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// The expected form.
        expected: &'static str,
        /// The value found, as JSON; for a `*_api_key_env` key only its type and length,
        /// since it may be the API key itself.
        found: String,
    },
}

fn invalid(key: &'static str, expected: &'static str, found: &Value) -> DecisionConfigError {
    DecisionConfigError::Invalid {
        key,
        expected,
        found: found.to_string(),
    }
}

/// Reads a `*_api_key_env` key: a trimmed [`is_env_var_name`] name, or an error that
/// describes the value without showing it.
fn env_var_name(
    map: &Map<String, Value>,
    key: &'static str,
    target: &mut String,
) -> Result<(), DecisionConfigError> {
    match map.get(key) {
        None => Ok(()),
        Some(value) => match value.as_str().map(str::trim) {
            Some(name) if is_env_var_name(name) => {
                name.clone_into(target);
                Ok(())
            }
            _ => Err(DecisionConfigError::Invalid {
                key,
                expected: ENV_VAR_NAME_FORM,
                found: describe_non_env_var_name(value),
            }),
        },
    }
}

fn string(
    map: &Map<String, Value>,
    key: &'static str,
    expected: &'static str,
    target: &mut String,
) -> Result<(), DecisionConfigError> {
    match map.get(key) {
        None => Ok(()),
        Some(Value::String(s)) if !s.trim().is_empty() => {
            *target = s.trim().to_owned();
            Ok(())
        }
        Some(other) => Err(invalid(key, expected, other)),
    }
}

impl DecisionConfig {
    /// Reads the decision-client keys from a settings object, ignoring every other key.
    /// Absent keys keep their defaults; a present key with a wrong value is an error naming it.
    pub fn from_map(map: &Map<String, Value>) -> Result<DecisionConfig, DecisionConfigError> {
        if let Some(key) = map
            .keys()
            .find(|k| k.starts_with(KEY_PREFIX) && !KEYS.contains(&k.as_str()))
        {
            return Err(DecisionConfigError::UnknownKey { key: key.clone() });
        }
        let mut c = DecisionConfig::default();
        if let Some(v) = map.get(KEY_ADAPTER) {
            const EXPECTED: &str = "one of \"auto\", \"decisions\", \"openai-decisions\", \"chat-logprobs\", \"local\", \"embedding\", \"offline\"";
            c.adapter = v
                .as_str()
                .and_then(DecisionAdapter::parse)
                .ok_or_else(|| invalid(KEY_ADAPTER, EXPECTED, v))?;
        }
        const URL: &str = "a non-empty URL string such as \"https://host\"";
        const PATH: &str = "a non-empty path string such as \"/v1/x\"";
        string(map, KEY_API_BASE_URL, URL, &mut c.api_base_url)?;
        string(map, KEY_API_PATH, PATH, &mut c.api_path)?;
        env_var_name(map, KEY_API_KEY_ENV, &mut c.api_key_env)?;
        string(map, KEY_CHAT_BASE_URL, URL, &mut c.chat_base_url)?;
        string(map, KEY_CHAT_PATH, PATH, &mut c.chat_path)?;
        env_var_name(map, KEY_CHAT_API_KEY_ENV, &mut c.chat_api_key_env)?;
        for (key, base) in [
            (KEY_API_BASE_URL, &c.api_base_url),
            (KEY_CHAT_BASE_URL, &c.chat_base_url),
        ] {
            if !crate::http::is_http_url(base) {
                return Err(invalid(key, URL, &Value::String(base.clone())));
            }
            if crate::http::has_credentials(base) {
                return Err(DecisionConfigError::Invalid {
                    key,
                    expected: crate::http::NO_CREDENTIALS_FORM,
                    found: "a URL with credentials (not shown)".to_owned(),
                });
            }
        }
        if let Some(v) = map.get(KEY_TIMEOUT_SECS) {
            c.timeout_secs = v
                .as_f64()
                .filter(|t| t.is_finite() && *t > 0.0 && *t <= 600.0)
                .ok_or_else(|| invalid(KEY_TIMEOUT_SECS, "a number of seconds in (0, 600]", v))?;
        }
        match map.get(KEY_CHAT_MODEL) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if !s.trim().is_empty() => c.chat_model = Some(s.trim().into()),
            Some(other) => {
                return Err(invalid(
                    KEY_CHAT_MODEL,
                    "a non-empty model slug or null",
                    other,
                ));
            }
        }
        if let Some(v) = map.get(KEY_CHAT_TOP_LOGPROBS) {
            c.chat_top_logprobs = v
                .as_u64()
                .filter(|n| (5..=20).contains(n))
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| invalid(KEY_CHAT_TOP_LOGPROBS, "an integer from 5 to 20", v))?;
        }
        match map.get(KEY_EMBEDDING_MODEL_DIR) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if !s.trim().is_empty() => {
                c.embedding_model_dir = Some(s.trim().into());
            }
            Some(other) => {
                return Err(invalid(
                    KEY_EMBEDDING_MODEL_DIR,
                    "a directory path string or null",
                    other,
                ));
            }
        }
        Ok(c)
    }

    /// The probe timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_base_url_with_credentials_is_refused_without_being_shown() {
        for key in [KEY_API_BASE_URL, KEY_CHAT_BASE_URL] {
            let mut map = Map::new();
            map.insert(key.into(), json!("https://me:TOPSECRET@openrouter.ai"));
            let err = DecisionConfig::from_map(&map).unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("TOPSECRET"), "{shown}");
            assert!(
                shown.contains(key) && shown.contains("without credentials"),
                "{shown}"
            );
        }
    }

    #[test]
    fn empty_and_unrelated_keys_give_the_defaults() {
        let c = DecisionConfig::from_map(&map(json!({
            "adaptive_compaction_threshold": 0.75, "something_else": [1, 2]
        })))
        .unwrap();
        assert_eq!(c, DecisionConfig::default());
        assert_eq!(c.timeout(), Duration::from_secs(10));
    }

    #[test]
    fn every_key_is_read() {
        let c = DecisionConfig::from_map(&map(json!({
            "decision_adapter": "chat-logprobs",
            "decision_api_base_url": "http://127.0.0.1:9/",
            "decision_api_path": "/v1/decisions",
            "decision_api_key_env": "INCEPTION_API_KEY",
            "decision_timeout_secs": 0.3,
            "decision_chat_base_url": "http://localhost:8080",
            "decision_chat_path": "/v1/chat/completions",
            "decision_chat_model": "qwen3:0.6b",
            "decision_chat_api_key_env": "OPENAI_API_KEY",
            "decision_chat_top_logprobs": 20
        })))
        .unwrap();
        assert_eq!(c.adapter, DecisionAdapter::ChatLogprobs);
        assert_eq!(c.api_base_url, "http://127.0.0.1:9/");
        assert_eq!(c.api_path, "/v1/decisions");
        assert_eq!(c.api_key_env, "INCEPTION_API_KEY");
        assert_eq!(c.timeout(), Duration::from_millis(300));
        assert_eq!(c.chat_base_url, "http://localhost:8080");
        assert_eq!(c.chat_model.as_deref(), Some("qwen3:0.6b"));
        assert_eq!(c.chat_api_key_env, "OPENAI_API_KEY");
        assert_eq!(c.chat_top_logprobs, 20);
    }

    #[test]
    fn wrong_values_name_the_key_and_the_expected_form() {
        for (bad, key, expected) in [
            (
                json!({"decision_adapter": "magic"}),
                KEY_ADAPTER,
                "\"offline\"",
            ),
            (json!({"decision_adapter": 3}), KEY_ADAPTER, "one of"),
            (
                json!({"decision_timeout_secs": "10"}),
                KEY_TIMEOUT_SECS,
                "seconds",
            ),
            (
                json!({"decision_timeout_secs": -1}),
                KEY_TIMEOUT_SECS,
                "(0, 600]",
            ),
            (
                json!({"decision_api_base_url": "openrouter.ai"}),
                KEY_API_BASE_URL,
                "URL",
            ),
            (json!({"decision_api_path": ""}), KEY_API_PATH, "path"),
            (json!({"decision_chat_model": 7}), KEY_CHAT_MODEL, "slug"),
            (
                json!({"decision_chat_top_logprobs": 4}),
                KEY_CHAT_TOP_LOGPROBS,
                "5 to 20",
            ),
            (
                json!({"decision_api_key_env": null}),
                KEY_API_KEY_ENV,
                "environment variable",
            ),
        ] {
            let err = DecisionConfig::from_map(&map(bad.clone()))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key) && err.contains(expected), "{bad}: {err}");
        }
    }

    /// Before, a misspelled `decision_*` key was silently ignored.
    #[test]
    fn a_misspelled_decision_key_is_an_error_naming_it() {
        let err = DecisionConfig::from_map(&map(json!({"decision_api_bse_url": "http://x"})))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "unknown key decision_api_bse_url; the decision keys are: decision_adapter, "
            ),
            "{err}"
        );
    }

    #[test]
    fn a_pasted_key_is_refused_without_being_shown() {
        for key in [KEY_API_KEY_ENV, KEY_CHAT_API_KEY_ENV] {
            for secret in [
                "sk-or-v1-0123456789abcdefTOPSECRET",
                "gsk_abcdefTOPSECRET0123",
                "openrouter_api_key_TOPSECRET",
            ] {
                let mut settings = Map::new();
                settings.insert(key.to_owned(), Value::String(secret.to_owned()));
                let err = DecisionConfig::from_map(&settings).unwrap_err();
                let (display, debug) = (err.to_string(), format!("{err:?}"));
                for text in [&display, &debug] {
                    assert!(!text.contains("TOPSECRET"), "{text}");
                }
                let chars = secret.chars().count();
                assert_eq!(
                    display,
                    format!(
                        "{key} must be an environment variable name such as \
                         OPENROUTER_API_KEY (upper-case letters, digits and _, not starting \
                         with a digit), got a value of {chars} characters that is not an \
                         environment variable name; if it is the API key itself, put it in an \
                         environment variable and name that variable here"
                    )
                );
            }
        }
        let err = DecisionConfig::from_map(&map(json!({"decision_api_key_env": 123_456})))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("got a number") && !err.contains("123456"),
            "{err}"
        );
    }

    #[test]
    fn key_variable_names_are_trimmed_and_upper_case() {
        let c = DecisionConfig::from_map(&map(json!({
            "decision_api_key_env": " MY_KEY_2 ", "decision_chat_api_key_env": "_LOCAL"
        })))
        .unwrap();
        assert_eq!(
            (c.api_key_env.as_str(), c.chat_api_key_env.as_str()),
            ("MY_KEY_2", "_LOCAL")
        );
        let defaults = DecisionConfig::default();
        for name in [&defaults.api_key_env, &defaults.chat_api_key_env] {
            assert!(is_env_var_name(name), "{name}");
        }
        for bad in ["", "  ", "my_key", "2KEY", "MY-KEY"] {
            assert!(
                DecisionConfig::from_map(&map(json!({ "decision_chat_api_key_env": bad })))
                    .is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn adapter_spellings_round_trip() {
        for c in [
            "auto",
            "decisions",
            "openai-decisions",
            "chat-logprobs",
            "offline",
        ] {
            assert_eq!(
                DecisionAdapter::parse(c).map(DecisionAdapter::as_str),
                Some(c)
            );
        }
    }
}
