//! The summarizer's own keys in the shared JSON config file, beside the spec's eight.
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `summarizer_adapter` | `"auto"` \| `"chat"` \| `"offline"` | `"auto"` | which summarizer runs (see [`crate::factory`]) |
//! | `summarizer_base_url` | URL | `https://openrouter.ai/api/v1` | OpenAI-compatible base; `/chat/completions` is appended |
//! | `summarizer_api_key_env` | env var name (`A-Z`, `0-9`, `_`) or `""` | `OPENROUTER_API_KEY` | the variable the bearer key is read from (its name, never the key); `""` sends no key (local servers) |
//! | `summarizer_timeout_secs` | integer 1–600 | `60` | hard timeout of one chat-completions call |
//! | `summarizer_max_output_tokens` | integer 64–65536 | `4096` | `max_tokens` sent; a reply cut there is an error |
//! | `summarizer_summary_max_tokens` | integer 500–100000 | `4000` | the summary's token budget (characters / 4, the core's estimator): the offline summarizer first drops prose, shortens headings, titles and finding lines, never a kept finding's number or source, to stay within it; a chat summary above it or above the text it replaces is refused |
//!
//! Every other `summarizer_*` key is an error naming the key; keys without that prefix
//! belong to other components and are ignored here.
//!
//! `summarizer_api_key_env` takes the *name* of a variable, `^[A-Z_][A-Z0-9_]*$`
//! ([`decision_client::http::is_env_var_name`], shared with the decision client's key
//! variables), or `""`. Any other value is refused without being shown, since the usual
//! mistake is pasting the key itself.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use decision_client::http::{describe_non_env_var_name, is_env_var_name};

/// Key: which adapter runs.
pub const KEY_ADAPTER: &str = "summarizer_adapter";
/// Key: OpenAI-compatible base URL.
pub(crate) const KEY_BASE_URL: &str = "summarizer_base_url";
/// Key: the environment variable that holds the API key.
pub(crate) const KEY_API_KEY_ENV: &str = "summarizer_api_key_env";
/// Key: chat-completions timeout in seconds.
pub(crate) const KEY_TIMEOUT_SECS: &str = "summarizer_timeout_secs";
/// Key: `max_tokens` of the chat-completions request.
pub(crate) const KEY_MAX_OUTPUT_TOKENS: &str = "summarizer_max_output_tokens";
/// Key: the summary's token budget.
pub(crate) const KEY_SUMMARY_MAX_TOKENS: &str = "summarizer_summary_max_tokens";

/// Every key this crate reads, in table order.
pub const KEYS: [&str; 6] = [
    KEY_ADAPTER,
    KEY_BASE_URL,
    KEY_API_KEY_ENV,
    KEY_TIMEOUT_SECS,
    KEY_MAX_OUTPUT_TOKENS,
    KEY_SUMMARY_MAX_TOKENS,
];

/// Which summarizer the factory builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SummarizerAdapter {
    /// Chat completions when the API key variable is set, otherwise offline.
    #[default]
    Auto,
    /// Chat completions; an unset key variable is an error.
    Chat,
    /// The offline extractive summarizer, whatever the environment.
    Offline,
}

/// The summarizer's configuration. Build it with [`SummarizerConfig::from_map`] or
/// [`SummarizerConfig::default`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummarizerConfig {
    /// `summarizer_adapter`.
    pub adapter: SummarizerAdapter,
    /// `summarizer_base_url`.
    pub base_url: String,
    /// `summarizer_api_key_env`; empty means "send no key".
    pub api_key_env: String,
    /// `summarizer_timeout_secs`.
    pub timeout_secs: u64,
    /// `summarizer_max_output_tokens`.
    pub max_output_tokens: u32,
    /// `summarizer_summary_max_tokens`.
    pub summary_max_tokens: usize,
}

/// The default base URL (OpenRouter).
pub(crate) const DEFAULT_BASE_URL: &str = "https://openrouter.ai/api/v1";
/// The default token budget of a summary (chosen from `cargo xtask eval-summary`; see
/// docs/SUMMARY-QUALITY.md).
pub(crate) const DEFAULT_SUMMARY_MAX_TOKENS: usize = 4000;
/// The default key variable.
pub(crate) const DEFAULT_API_KEY_ENV: &str = "OPENROUTER_API_KEY";

impl Default for SummarizerConfig {
    fn default() -> Self {
        SummarizerConfig {
            adapter: SummarizerAdapter::Auto,
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key_env: DEFAULT_API_KEY_ENV.to_owned(),
            timeout_secs: 60,
            max_output_tokens: 4096,
            summary_max_tokens: DEFAULT_SUMMARY_MAX_TOKENS,
        }
    }
}

/// A summarizer key in the config file is unknown or has a bad value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizerConfigError {
    /// A `summarizer_*` key this crate does not know.
    #[error("unknown key {key}; the summarizer keys are: {}", KEYS.join(", "))]
    UnknownKey {
        /// The key found.
        key: String,
    },
    /// A value of the wrong type or outside its range.
    #[error("{key} must be {expected}, got {found}")]
    InvalidValue {
        /// The key.
        key: &'static str,
        /// The expected form.
        expected: &'static str,
        /// The value found, as JSON; for `summarizer_api_key_env` only its type and length,
        /// since it may be the API key itself.
        found: String,
    },
}

fn invalid(key: &'static str, expected: &'static str, found: &Value) -> SummarizerConfigError {
    SummarizerConfigError::InvalidValue {
        key,
        expected,
        found: found.to_string(),
    }
}

/// What `summarizer_api_key_env` accepts: [`decision_client::http::ENV_VAR_NAME_FORM`] or
/// `""`.
const API_KEY_ENV_FORM: &str = "an environment variable name such as OPENROUTER_API_KEY \
     (upper-case letters, digits and _, not starting with a digit) or \"\" for no key";

fn integer_in(
    key: &'static str,
    expected: &'static str,
    value: &Value,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, SummarizerConfigError> {
    value
        .as_u64()
        .filter(|v| range.contains(v))
        .ok_or_else(|| invalid(key, expected, value))
}

impl SummarizerConfig {
    /// Reads the `summarizer_*` keys of a config file's top-level object; absent keys take
    /// their defaults, other components' keys are ignored.
    pub fn from_map(map: &Map<String, Value>) -> Result<SummarizerConfig, SummarizerConfigError> {
        let mut config = SummarizerConfig::default();
        for (key, value) in map {
            match key.as_str() {
                KEY_ADAPTER => {
                    config.adapter = match value.as_str() {
                        Some("auto") => SummarizerAdapter::Auto,
                        Some("chat") => SummarizerAdapter::Chat,
                        Some("offline") => SummarizerAdapter::Offline,
                        _ => {
                            return Err(invalid(
                                KEY_ADAPTER,
                                "one of \"auto\", \"chat\", \"offline\"",
                                value,
                            ));
                        }
                    }
                }
                KEY_BASE_URL => {
                    config.base_url = value
                        .as_str()
                        .map(str::trim)
                        .filter(|u| decision_client::http::is_http_url(u))
                        .ok_or_else(|| {
                            invalid(KEY_BASE_URL, "an http:// or https:// URL string", value)
                        })?
                        .to_owned();
                    if decision_client::http::has_credentials(&config.base_url) {
                        return Err(SummarizerConfigError::InvalidValue {
                            key: KEY_BASE_URL,
                            expected: decision_client::http::NO_CREDENTIALS_FORM,
                            found: "a URL with credentials (not shown)".to_owned(),
                        });
                    }
                }
                KEY_API_KEY_ENV => {
                    config.api_key_env = value
                        .as_str()
                        .filter(|v| v.is_empty() || is_env_var_name(v))
                        .ok_or_else(|| SummarizerConfigError::InvalidValue {
                            key: KEY_API_KEY_ENV,
                            expected: API_KEY_ENV_FORM,
                            found: describe_non_env_var_name(value),
                        })?
                        .to_owned();
                }
                KEY_TIMEOUT_SECS => {
                    config.timeout_secs =
                        integer_in(KEY_TIMEOUT_SECS, "an integer from 1 to 600", value, 1..=600)?;
                }
                KEY_MAX_OUTPUT_TOKENS => {
                    let v = integer_in(
                        KEY_MAX_OUTPUT_TOKENS,
                        "an integer from 64 to 65536",
                        value,
                        64..=65_536,
                    )?;
                    config.max_output_tokens = u32::try_from(v).unwrap_or(u32::MAX);
                }
                KEY_SUMMARY_MAX_TOKENS => {
                    let v = integer_in(
                        KEY_SUMMARY_MAX_TOKENS,
                        "an integer from 500 to 100000",
                        value,
                        500..=100_000,
                    )?;
                    config.summary_max_tokens = usize::try_from(v).unwrap_or(usize::MAX);
                }
                other if other.starts_with("summarizer_") => {
                    return Err(SummarizerConfigError::UnknownKey {
                        key: other.to_owned(),
                    });
                }
                _ => {}
            }
        }
        Ok(config)
    }

    /// The chat-completions timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use decision_client::http::ENV_VAR_NAME_FORM;
    use serde_json::json;

    fn parse(value: Value) -> Result<SummarizerConfig, SummarizerConfigError> {
        match value {
            Value::Object(map) => SummarizerConfig::from_map(&map),
            _ => unreachable!("tests pass objects"),
        }
    }

    #[test]
    fn a_base_url_with_credentials_is_refused_without_being_shown() {
        let mut map = Map::new();
        map.insert(KEY_BASE_URL.into(), json!("https://me:TOPSECRET@host/v1"));
        let err = SummarizerConfig::from_map(&map).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("TOPSECRET"), "{shown}");
        assert!(
            shown.contains(KEY_BASE_URL) && shown.contains("without credentials"),
            "{shown}"
        );
    }

    #[test]
    fn absent_keys_take_defaults_and_foreign_keys_are_ignored() {
        let config = parse(json!({
            "compaction_summarizer_model": "x/y",
            "adaptive_compaction_threshold": 0.5,
        }))
        .unwrap();
        assert_eq!(config, SummarizerConfig::default());
    }

    #[test]
    fn every_key_is_read() {
        let config = parse(json!({
            "summarizer_adapter": "chat",
            "summarizer_base_url": "http://localhost:8000/v1",
            "summarizer_api_key_env": "",
            "summarizer_timeout_secs": 5,
            "summarizer_max_output_tokens": 1000,
            "summarizer_summary_max_tokens": 1200,
        }))
        .unwrap();
        assert_eq!(
            config,
            SummarizerConfig {
                adapter: SummarizerAdapter::Chat,
                base_url: "http://localhost:8000/v1".into(),
                api_key_env: String::new(),
                timeout_secs: 5,
                max_output_tokens: 1000,
                summary_max_tokens: 1200,
            }
        );
    }

    #[test]
    fn a_pasted_key_is_refused_without_being_shown() {
        assert!(API_KEY_ENV_FORM.starts_with(ENV_VAR_NAME_FORM));
        for secret in [
            "sk-or-v1-0123456789abcdefTOPSECRET",
            "gsk_abcdefTOPSECRET0123",
            "openrouter_api_key_TOPSECRET",
            " OPENROUTER_API_KEY_TOPSECRET",
        ] {
            let err = parse(json!({ KEY_API_KEY_ENV: secret })).unwrap_err();
            let (display, debug) = (err.to_string(), format!("{err:?}"));
            for text in [&display, &debug] {
                assert!(!text.contains("TOPSECRET"), "{text}");
            }
            let chars = secret.chars().count();
            assert!(
                display.starts_with(&format!("{KEY_API_KEY_ENV} must be {API_KEY_ENV_FORM}")),
                "{display}"
            );
            assert!(
                display.contains(&format!(
                    "got a value of {chars} characters that is not an environment variable name; \
                     if it is the API key itself, put it in an environment variable and name \
                     that variable here"
                )),
                "{display}"
            );
        }
    }

    #[test]
    fn key_variable_names_are_upper_case_or_empty() {
        for name in ["", DEFAULT_API_KEY_ENV, "E2E_SUMMARIZER_KEY", "_LOCAL_2"] {
            let config = parse(json!({ KEY_API_KEY_ENV: name })).unwrap();
            assert_eq!(config.api_key_env, name);
        }
        for bad in ["  ", "my_key", "2KEY", "MY-KEY", "Openrouter_Api_Key"] {
            assert!(parse(json!({ KEY_API_KEY_ENV: bad })).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn errors_name_the_key_the_expected_form_and_the_value() {
        let cases = [
            (
                json!({"summarizer_adapter": "gpt"}),
                "summarizer_adapter must be one of \"auto\", \"chat\", \"offline\", got \"gpt\"",
            ),
            (
                json!({"summarizer_timeout_secs": 0}),
                "summarizer_timeout_secs must be an integer from 1 to 600, got 0",
            ),
            (
                json!({"summarizer_timeout_secs": "60"}),
                "summarizer_timeout_secs must be an integer from 1 to 600, got \"60\"",
            ),
            (
                json!({"summarizer_base_url": "openrouter.ai"}),
                "summarizer_base_url must be an http:// or https:// URL string, got \"openrouter.ai\"",
            ),
            (
                json!({"summarizer_api_key_env": "MY KEY"}),
                "summarizer_api_key_env must be an environment variable name such as \
                 OPENROUTER_API_KEY (upper-case letters, digits and _, not starting with a digit) \
                 or \"\" for no key, got a value of 6 characters that is not an environment \
                 variable name; if it is the API key itself, put it in an environment variable \
                 and name that variable here",
            ),
            (
                json!({"summarizer_api_key_env": null}),
                "summarizer_api_key_env must be an environment variable name such as \
                 OPENROUTER_API_KEY (upper-case letters, digits and _, not starting with a digit) \
                 or \"\" for no key, got null",
            ),
            (
                json!({"summarizer_summary_max_tokens": 10}),
                "summarizer_summary_max_tokens must be an integer from 500 to 100000, got 10",
            ),
            (
                json!({"summarizer_modle": "x"}),
                "unknown key summarizer_modle; the summarizer keys are: summarizer_adapter, summarizer_base_url, summarizer_api_key_env, summarizer_timeout_secs, summarizer_max_output_tokens, summarizer_summary_max_tokens",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parse(input).unwrap_err().to_string(), expected);
        }
    }
}
