//! Which summarizer runs, from the settings, the summarizer config and the environment.
//!
//! | `summarizer_adapter` | key variable set | result |
//! |---|---|---|
//! | `auto` (default) | yes | chat completions at `summarizer_base_url` |
//! | `auto` | no | offline extractive ("`OPENROUTER_API_KEY` is not set") |
//! | `auto` or `chat`, `summarizer_api_key_env = ""` | — | chat completions without a key (local servers) |
//! | `chat` | no | error naming the variable |
//! | `offline` | — | offline extractive |
//!
//! Whatever runs is wrapped in [`WithCitationLedger`], and the reason is returned for the
//! CLI's banner and the logs.

use std::sync::Arc;

use compaction_core::{EffectiveSettings, Summarizer};

use crate::config::{KEY_ADAPTER, SummarizerAdapter, SummarizerConfig};
use crate::error::SummarizerError;
use crate::ledger::WithCitationLedger;
use crate::offline::OfflineSummarizer;

/// The summarizer chosen and why.
#[derive(Clone)]
pub struct SelectedSummarizer {
    /// The summarizer, wrapped in the citation ledger.
    pub summarizer: Arc<dyn Summarizer>,
    /// One line saying which summarizer runs and why (never the key).
    pub reason: String,
}

impl std::fmt::Debug for SelectedSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectedSummarizer")
            .field("summarizer", &self.summarizer.info())
            .field("reason", &self.reason)
            .finish()
    }
}

/// No summarizer could be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizerFactoryError {
    /// `summarizer_adapter` is `"chat"` but the key variable is unset or blank.
    #[error(
        "{KEY_ADAPTER} is \"chat\" but the environment variable {var} is not set; set it, set \
         summarizer_api_key_env to \"\" for a server without keys, or use \"auto\"/\"offline\""
    )]
    MissingKey {
        /// The variable named by `summarizer_api_key_env` (a placeholder if that is not an
        /// environment variable name: it may be the key itself).
        var: String,
    },
    /// `chat` needs a Cargo feature this build of the crate does not have.
    #[error(
        "{KEY_ADAPTER} is \"chat\" but this build has no chat summarizer: it needs the \
         summarizer crate's `{feature}` feature (\"offline\" is always available)"
    )]
    NotBuilt {
        /// The missing feature.
        feature: &'static str,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the chat summarizer: {0}")]
    Client(#[from] SummarizerError),
}

/// Builds the summarizer `config` asks for. `env` looks up an environment variable (pass
/// `|name| std::env::var(name).ok()` in production); a blank value counts as unset.
pub fn build_summarizer(
    settings: &EffectiveSettings,
    config: &SummarizerConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<SelectedSummarizer, SummarizerFactoryError> {
    let offline = |why: String| SelectedSummarizer {
        summarizer: Arc::new(WithCitationLedger::new(OfflineSummarizer::new(
            config.summary_max_tokens,
        ))),
        reason: format!("offline extractive summarizer: {why}"),
    };
    if config.adapter == SummarizerAdapter::Offline {
        return Ok(offline(format!("{KEY_ADAPTER} is \"offline\"")));
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = (settings, env);
        match config.adapter {
            SummarizerAdapter::Chat => Err(SummarizerFactoryError::NotBuilt { feature: "http" }),
            _ => Ok(offline(
                "built without the chat summarizer (feature `http`)".to_owned(),
            )),
        }
    }
    #[cfg(feature = "http")]
    {
        use crate::chat::ChatSummarizer;
        use decision_client::http::{ApiKey, shown_env_var_name};
        // A name is printed only when it is one: `from_map` refuses anything else, and a config
        // built by hand with a pasted key must not put the key in the reason or an error either.
        let var = shown_env_var_name(&config.api_key_env);
        let key = if config.api_key_env.is_empty() {
            None
        } else {
            match env(&config.api_key_env).filter(|v| !v.trim().is_empty()) {
                Some(secret) => Some(ApiKey::new(secret.trim())),
                None if config.adapter == SummarizerAdapter::Chat => {
                    return Err(SummarizerFactoryError::MissingKey {
                        var: var.to_owned(),
                    });
                }
                None => return Ok(offline(format!("{var} is not set"))),
            }
        };
        let chat = ChatSummarizer::new(config, &settings.summarizer_model, key)?;
        let auth = if config.api_key_env.is_empty() {
            "no API key (summarizer_api_key_env is \"\")".to_owned()
        } else {
            format!("key from {var}")
        };
        let reason = format!(
            "chat-completions summarizer: {} at {} ({auth})",
            chat.info().model,
            chat.url()
        );
        Ok(SelectedSummarizer {
            summarizer: Arc::new(WithCitationLedger::new(chat)),
            reason,
        })
    }
}

/// [`build_summarizer`] with the process environment; logs the choice.
pub fn build_summarizer_from_env(
    settings: &EffectiveSettings,
    config: &SummarizerConfig,
) -> Result<SelectedSummarizer, SummarizerFactoryError> {
    let selected = build_summarizer(settings, config, |name| std::env::var(name).ok())?;
    tracing::info!(reason = %selected.reason, "summarizer selected");
    Ok(selected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction_core::Settings;

    fn settings() -> EffectiveSettings {
        Settings::default().effective().unwrap()
    }

    #[test]
    fn auto_falls_back_to_offline_without_a_key() {
        let selected =
            build_summarizer(&settings(), &SummarizerConfig::default(), |_| None).unwrap();
        assert_eq!(
            selected.reason,
            "offline extractive summarizer: OPENROUTER_API_KEY is not set"
        );
        assert_eq!(selected.summarizer.info().system, "offline");
        let blank = build_summarizer(&settings(), &SummarizerConfig::default(), |_| {
            Some("  ".into())
        })
        .unwrap();
        assert_eq!(blank.summarizer.info().system, "offline");
    }

    #[test]
    fn auto_uses_chat_with_a_key_and_never_shows_it() {
        let selected = build_summarizer(&settings(), &SummarizerConfig::default(), |name| {
            (name == "OPENROUTER_API_KEY").then(|| "sk-or-secret".to_owned())
        })
        .unwrap();
        assert_eq!(
            selected.reason,
            "chat-completions summarizer: nvidia/nemotron-3.5-lightning:free at \
             https://openrouter.ai/api/v1/chat/completions (key from OPENROUTER_API_KEY)"
        );
        assert_eq!(selected.summarizer.info().provider, "openrouter.ai");
        assert!(!format!("{selected:?}").contains("sk-or-secret"));
    }

    #[test]
    fn chat_without_a_key_is_an_error_naming_the_variable() {
        let config = SummarizerConfig {
            adapter: SummarizerAdapter::Chat,
            api_key_env: "MY_KEY".into(),
            ..SummarizerConfig::default()
        };
        let err = build_summarizer(&settings(), &config, |_| None).unwrap_err();
        assert!(err.to_string().contains("MY_KEY"), "{err}");
    }

    #[test]
    fn a_pasted_key_never_reaches_a_reason_or_an_error() {
        for secret in [
            "sk-or-v1-0123456789abcdefTOPSECRET",
            "gsk_abcdefTOPSECRET0123",
        ] {
            let mut seen = Vec::new();
            for adapter in [SummarizerAdapter::Auto, SummarizerAdapter::Chat] {
                // Built by hand: `SummarizerConfig::from_map` refuses such a value.
                let config = SummarizerConfig {
                    adapter,
                    api_key_env: secret.into(),
                    ..SummarizerConfig::default()
                };
                let set = |name: &str| (name == secret).then(|| "sk-real".to_owned());
                let selected = build_summarizer(&settings(), &config, set).unwrap();
                seen.push(format!("{} | {selected:?}", selected.reason));
                match build_summarizer(&settings(), &config, |_| None) {
                    Ok(selected) => seen.push(format!("{} | {selected:?}", selected.reason)),
                    Err(e) => seen.push(format!("{e} | {e:?}")),
                }
            }
            assert!(
                seen.iter()
                    .any(|t| t.contains("<invalid variable name, not shown>")),
                "{seen:?}"
            );
            for text in &seen {
                assert!(!text.contains("TOPSECRET"), "{text}");
            }
        }
    }

    #[test]
    fn offline_and_keyless_choices() {
        let offline = SummarizerConfig {
            adapter: SummarizerAdapter::Offline,
            ..SummarizerConfig::default()
        };
        let selected = build_summarizer(&settings(), &offline, |_| Some("sk".into())).unwrap();
        assert_eq!(
            selected.reason,
            "offline extractive summarizer: summarizer_adapter is \"offline\""
        );
        let local = SummarizerConfig {
            base_url: "http://127.0.0.1:8000/v1".into(),
            api_key_env: String::new(),
            ..SummarizerConfig::default()
        };
        let selected = build_summarizer(&settings(), &local, |_| None).unwrap();
        assert_eq!(
            selected.reason,
            "chat-completions summarizer: openrouter/nvidia/nemotron-3.5-lightning:free at \
             http://127.0.0.1:8000/v1/chat/completions (no API key (summarizer_api_key_env is \"\"))"
        );
    }
}
