//! The adapter registry: every decision model and summarizer the `compaction` binary can
//! run, by name, with the config keys each one reads and the constructor that builds it.
//!
//! [`Registry::builtin`] holds decision-client's adapters (`auto`, `decisions`,
//! `openai-decisions`, `chat-logprobs`, `offline`) and the summarizer crate's (`auto`, `chat`,
//! `offline`). A downstream crate adds its own with [`Registry::decision_adapter`] /
//! [`Registry::summarizer_adapter`] and builds its own `compaction` binary with
//! [`crate::run_with`] (example: `examples/compaction_with_extra_adapter.rs`). The adapter is
//! then chosen like a built-in one: `decision_adapter` / `summarizer_adapter` in the config
//! file, or `--decision` / `--summarizer`.
//!
//! # One config convention
//! Every key of a decision adapter starts with `decision_`, every key of a summarizer with
//! `summarizer_`. A key with one of these prefixes that no registered adapter reads is an
//! error naming it and listing the known keys (a misspelling is never silently ignored); an
//! adapter name nobody registered is an error listing the registered names.

use std::sync::Arc;
use std::time::Duration;

use compaction_core::{DecisionModel, EffectiveSettings, Summarizer};
use serde_json::{Map, Value};

/// The prefix of every decision adapter's keys.
pub const DECISION_PREFIX: &str = "decision_";
/// The prefix of every summarizer adapter's keys.
pub const SUMMARIZER_PREFIX: &str = "summarizer_";

/// What a constructor gets: the validated settings, the whole config object (its own keys
/// among the others) and the environment.
pub struct AdapterInput<'a> {
    /// The spec's settings, validated.
    pub settings: &'a EffectiveSettings,
    /// The config file's whole object (with `--decision` / `--summarizer` applied).
    pub config: &'a Map<String, Value>,
    /// Looks an environment variable up (the process environment in the binary).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// A decision model a constructor built.
pub struct BuiltDecision {
    /// The model.
    pub model: Arc<dyn DecisionModel>,
    /// Why this one, in words, for the banner (never a key).
    pub reason: String,
    /// The adapter's own timeout for one probe; the engine's deadline is a little longer.
    pub timeout: Duration,
}

/// A summarizer a constructor built.
pub struct BuiltSummarizer {
    /// The summarizer.
    pub summarizer: Arc<dyn Summarizer>,
    /// Why this one, in words, for the banner (never a key).
    pub reason: String,
    /// The adapter's own timeout for one summary; the engine's deadline is a little longer.
    pub timeout: Duration,
}

type Build<T> = Arc<dyn Fn(&AdapterInput<'_>) -> Result<T, String> + Send + Sync>;

/// One registered adapter.
struct Entry<T> {
    name: String,
    keys: Vec<String>,
    build: Build<T>,
}

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        Entry {
            name: self.name.clone(),
            keys: self.keys.clone(),
            build: Arc::clone(&self.build),
        }
    }
}

/// A registry error: the message names the key or the adapter and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// `decision_adapter` / `summarizer_adapter` (or the flag) names no registered adapter.
    #[error("{key} is {name:?}; the registered adapters are: {}", known.join(", "))]
    UnknownAdapter {
        /// `decision_adapter` or `summarizer_adapter`.
        key: &'static str,
        /// The name asked for.
        name: String,
        /// Every registered name.
        known: Vec<String>,
    },
    /// The adapter key holds no string.
    #[error("{key} must be an adapter name string, got {found}")]
    NotAName {
        /// `decision_adapter` or `summarizer_adapter`.
        key: &'static str,
        /// The value found, as JSON.
        found: String,
    },
    /// A key with an adapter prefix that no registered adapter reads.
    #[error("unknown key {key}; the {kind} keys are: {}", known.join(", "))]
    UnknownKey {
        /// The key.
        key: String,
        /// `decision` or `summarizer`.
        kind: &'static str,
        /// Every key the registered adapters of that kind read.
        known: Vec<String>,
    },
    /// The constructor refused (a bad value of one of its keys, a missing key variable…).
    #[error("{0}")]
    Build(String),
}

/// Adapters by name. See the module docs.
#[derive(Clone)]
pub struct Registry {
    decision: Vec<Entry<BuiltDecision>>,
    summarizer: Vec<Entry<BuiltSummarizer>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("decision", &self.decision_names())
            .field("summarizer", &self.summarizer_names())
            .finish()
    }
}

/// `config` without the keys of `prefix` that `keep` does not hold, so that a built-in
/// parser never sees another adapter's keys.
fn only_keys(config: &Map<String, Value>, prefix: &str, keep: &[&str]) -> Map<String, Value> {
    config
        .iter()
        .filter(|(k, _)| !k.starts_with(prefix) || keep.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Registry {
    /// A registry with no adapter at all.
    pub fn empty() -> Registry {
        Registry {
            decision: Vec::new(),
            summarizer: Vec::new(),
        }
    }

    /// decision-client's and the summarizer crate's adapters, read by their own config
    /// parsers ([`decision_client::DecisionConfig::from_map`],
    /// [`summarizer::SummarizerConfig::from_map`]).
    pub fn builtin() -> Registry {
        use decision_client::{DecisionAdapter as D, KEY_ADAPTER as D_KEY, KEYS as D_KEYS};
        use summarizer::{KEY_ADAPTER as S_KEY, KEYS as S_KEYS, SummarizerAdapter as S};
        let mut registry = Registry::empty();
        for choice in [
            D::Auto,
            D::Decisions,
            D::OpenAiDecisions,
            D::ChatLogprobs,
            D::Local,
            D::Embedding,
            D::Offline,
        ] {
            registry = registry.decision_adapter(choice.as_str(), &D_KEYS, move |input| {
                let mut raw = only_keys(input.config, DECISION_PREFIX, &D_KEYS);
                raw.insert(D_KEY.to_owned(), Value::from(choice.as_str()));
                let config =
                    decision_client::DecisionConfig::from_map(&raw).map_err(|e| e.to_string())?;
                let selected =
                    decision_client::build_decision_model(input.settings, &config, input.env)
                        .map_err(|e| e.to_string())?;
                Ok(BuiltDecision {
                    model: selected.model,
                    reason: selected.reason,
                    timeout: config.timeout(),
                })
            });
        }
        for (name, choice) in [
            ("auto", S::Auto),
            ("chat", S::Chat),
            ("offline", S::Offline),
        ] {
            registry = registry.summarizer_adapter(name, &S_KEYS, move |input| {
                let mut raw = only_keys(input.config, SUMMARIZER_PREFIX, &S_KEYS);
                raw.insert(S_KEY.to_owned(), Value::from(name));
                let config =
                    summarizer::SummarizerConfig::from_map(&raw).map_err(|e| e.to_string())?;
                debug_assert_eq!(config.adapter, choice);
                let selected = summarizer::build_summarizer(input.settings, &config, input.env)
                    .map_err(|e| e.to_string())?;
                Ok(BuiltSummarizer {
                    summarizer: selected.summarizer,
                    reason: selected.reason,
                    timeout: config.timeout(),
                })
            });
        }
        registry
    }

    /// Registers (or replaces) the decision adapter `name`, which reads `keys` (each starting
    /// with `decision_`) and is built by `build`.
    pub fn decision_adapter(
        mut self,
        name: &str,
        keys: &[&str],
        build: impl Fn(&AdapterInput<'_>) -> Result<BuiltDecision, String> + Send + Sync + 'static,
    ) -> Registry {
        self.decision.retain(|e| e.name != name);
        self.decision.push(Entry {
            name: name.to_owned(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            build: Arc::new(build),
        });
        self
    }

    /// Registers (or replaces) the summarizer `name`, which reads `keys` (each starting with
    /// `summarizer_`) and is built by `build`.
    pub fn summarizer_adapter(
        mut self,
        name: &str,
        keys: &[&str],
        build: impl Fn(&AdapterInput<'_>) -> Result<BuiltSummarizer, String> + Send + Sync + 'static,
    ) -> Registry {
        self.summarizer.retain(|e| e.name != name);
        self.summarizer.push(Entry {
            name: name.to_owned(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            build: Arc::new(build),
        });
        self
    }

    /// The registered decision adapters' names, in registration order.
    pub fn decision_names(&self) -> Vec<&str> {
        self.decision.iter().map(|e| e.name.as_str()).collect()
    }

    /// The registered summarizers' names, in registration order.
    pub fn summarizer_names(&self) -> Vec<&str> {
        self.summarizer.iter().map(|e| e.name.as_str()).collect()
    }

    /// Every key a registered adapter reads (the two adapter keys included), deduplicated.
    pub fn adapter_keys(&self) -> Vec<&str> {
        let mut keys = vec![ADAPTER_KEYS[0], ADAPTER_KEYS[1]];
        for key in self
            .decision
            .iter()
            .flat_map(|e| &e.keys)
            .chain(self.summarizer.iter().flat_map(|e| &e.keys))
        {
            if !keys.contains(&key.as_str()) {
                keys.push(key);
            }
        }
        keys
    }

    /// Checks the config object against the convention: every `decision_*` and
    /// `summarizer_*` key is read by some registered adapter, and both adapter keys name
    /// registered adapters.
    pub fn check(&self, config: &Map<String, Value>) -> Result<(), RegistryError> {
        let known = self.adapter_keys();
        for (prefix, kind) in [
            (DECISION_PREFIX, "decision"),
            (SUMMARIZER_PREFIX, "summarizer"),
        ] {
            if let Some(key) = config
                .keys()
                .find(|k| k.starts_with(prefix) && !known.contains(&k.as_str()))
            {
                return Err(RegistryError::UnknownKey {
                    key: key.clone(),
                    kind,
                    known: known
                        .iter()
                        .filter(|k| k.starts_with(prefix))
                        .map(|k| (*k).to_owned())
                        .collect(),
                });
            }
        }
        chosen(config, ADAPTER_KEYS[0], &self.decision)?;
        chosen(config, ADAPTER_KEYS[1], &self.summarizer)?;
        Ok(())
    }

    /// [`Registry::check`], then the built-in parsers on their own keys (the adapter keys
    /// only when they name a built-in adapter), for `compaction config set` before it writes.
    /// An extra adapter's values are checked by its constructor.
    pub fn validate(&self, config: &Map<String, Value>) -> Result<(), RegistryError> {
        use decision_client::{DecisionAdapter as D, KEY_ADAPTER as D_KEY, KEYS as D_KEYS};
        use summarizer::{KEY_ADAPTER as S_KEY, KEYS as S_KEYS};
        self.check(config)?;
        let mut decision = only_keys(config, DECISION_PREFIX, &D_KEYS);
        if decision
            .get(D_KEY)
            .and_then(Value::as_str)
            .and_then(D::parse)
            .is_none()
        {
            decision.remove(D_KEY);
        }
        decision_client::DecisionConfig::from_map(&decision)
            .map_err(|e| RegistryError::Build(e.to_string()))?;
        let mut summary = only_keys(config, SUMMARIZER_PREFIX, &S_KEYS);
        if !matches!(
            summary.get(S_KEY).and_then(Value::as_str),
            Some("auto" | "chat" | "offline")
        ) {
            summary.remove(S_KEY);
        }
        summarizer::SummarizerConfig::from_map(&summary)
            .map_err(|e| RegistryError::Build(e.to_string()))?;
        Ok(())
    }

    /// Builds the decision adapter `decision_adapter` names (`auto` when absent), after
    /// [`Registry::check`].
    pub fn build_decision(&self, input: &AdapterInput<'_>) -> Result<BuiltDecision, RegistryError> {
        self.check(input.config)?;
        let entry = chosen(input.config, ADAPTER_KEYS[0], &self.decision)?;
        (entry.build)(input).map_err(RegistryError::Build)
    }

    /// Builds the summarizer `summarizer_adapter` names (`auto` when absent), after
    /// [`Registry::check`].
    pub fn build_summarizer(
        &self,
        input: &AdapterInput<'_>,
    ) -> Result<BuiltSummarizer, RegistryError> {
        self.check(input.config)?;
        let entry = chosen(input.config, ADAPTER_KEYS[1], &self.summarizer)?;
        (entry.build)(input).map_err(RegistryError::Build)
    }

    /// Whether `name` is a registered decision adapter.
    pub fn has_decision(&self, name: &str) -> bool {
        self.decision.iter().any(|e| e.name == name)
    }

    /// Whether `name` is a registered summarizer.
    pub fn has_summarizer(&self, name: &str) -> bool {
        self.summarizer.iter().any(|e| e.name == name)
    }
}

/// The two keys that choose an adapter: `decision_adapter`, `summarizer_adapter`.
pub const ADAPTER_KEYS: [&str; 2] = [decision_client::KEY_ADAPTER, summarizer::KEY_ADAPTER];

/// The entry `key` names in `config` (`auto` when absent).
fn chosen<'r, T>(
    config: &Map<String, Value>,
    key: &'static str,
    entries: &'r [Entry<T>],
) -> Result<&'r Entry<T>, RegistryError> {
    let name = match config.get(key) {
        None => "auto",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(RegistryError::NotAName {
                key,
                found: other.to_string(),
            });
        }
    };
    entries
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| RegistryError::UnknownAdapter {
            key,
            name: name.to_owned(),
            known: entries.iter().map(|e| e.name.clone()).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction_core::Settings;
    use serde_json::json;

    fn input_with(config: &Map<String, Value>, f: impl FnOnce(&AdapterInput<'_>)) {
        let settings = Settings::default().effective().expect("defaults");
        let env = |_: &str| None;
        f(&AdapterInput {
            settings: &settings,
            config,
            env: &env,
        });
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("object")
    }

    /// Before the registry a misspelled `decision_*` key was ignored (decision-client read
    /// only its own keys) while a misspelled `summarizer_*` key was an error.
    #[test]
    fn a_misspelled_key_of_either_prefix_is_an_error_naming_it() {
        let registry = Registry::builtin();
        for (key, kind) in [
            ("decision_api_bse_url", "decision"),
            ("summarizer_modle", "summarizer"),
        ] {
            let config = map(json!({ key: "x" }));
            let err = registry.check(&config).unwrap_err();
            assert!(
                matches!(&err, RegistryError::UnknownKey { key: k, kind: c, .. } if k == key && *c == kind),
                "{err:?}"
            );
            let shown = err.to_string();
            assert!(
                shown.starts_with(&format!("unknown key {key}; the {kind} keys are: ")),
                "{shown}"
            );
            assert!(shown.contains(&format!("{kind}_adapter")), "{shown}");
        }
        assert!(
            registry
                .check(&map(json!({"decision_api_base_url": "http://127.0.0.1:9"})))
                .is_ok()
        );
    }

    #[test]
    fn an_unregistered_name_lists_the_registered_ones() {
        let registry = Registry::builtin();
        let err = registry
            .check(&map(json!({"decision_adapter": "psychic"})))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "decision_adapter is \"psychic\"; the registered adapters are: auto, decisions, \
             openai-decisions, chat-logprobs, local, embedding, offline"
        );
    }

    #[test]
    fn builtin_names_build_the_built_in_adapters() {
        let registry = Registry::builtin();
        let config = map(json!({"decision_adapter": "offline", "summarizer_adapter": "offline"}));
        input_with(&config, |input| {
            let d = registry.build_decision(input).expect("decision");
            assert_eq!(d.reason, "offline lexical model (configured)");
            assert_eq!(d.timeout, Duration::from_secs(10));
            let s = registry.build_summarizer(input).expect("summarizer");
            assert!(
                s.reason.starts_with("offline extractive summarizer"),
                "{}",
                s.reason
            );
        });
    }

    /// An extra adapter is chosen by name, reads its own key, and the built-in parsers never
    /// see that key (decision-client would refuse it).
    #[test]
    fn an_extra_adapter_is_selectable_and_owns_its_keys() {
        let registry = Registry::builtin().decision_adapter(
            "fixed",
            &["decision_fixed_probability"],
            |input| {
                let p = input
                    .config
                    .get("decision_fixed_probability")
                    .and_then(Value::as_f64)
                    .ok_or("decision_fixed_probability must be a number from 0 to 1")?;
                Ok(BuiltDecision {
                    model: Arc::new(decision_client::OfflineLexical),
                    reason: format!("fixed p = {p}"),
                    timeout: Duration::from_secs(1),
                })
            },
        );
        assert!(registry.decision_names().contains(&"fixed"));
        let config = map(json!({"decision_adapter": "fixed", "decision_fixed_probability": 0.9}));
        input_with(&config, |input| {
            let built = registry.build_decision(input).expect("fixed");
            assert_eq!(built.reason, "fixed p = 0.9");
        });
        let offline =
            map(json!({"decision_adapter": "offline", "decision_fixed_probability": 0.9}));
        input_with(&offline, |input| {
            assert!(registry.build_decision(input).is_ok());
        });
        let bad = map(json!({"decision_adapter": "fixed"}));
        input_with(&bad, |input| {
            let err = registry.build_decision(input).err().expect("no p");
            assert!(
                err.to_string().contains("decision_fixed_probability"),
                "{err}"
            );
        });
        // Without the registration the same key is a misspelling.
        assert!(Registry::builtin().check(&config).is_err());
    }
}
