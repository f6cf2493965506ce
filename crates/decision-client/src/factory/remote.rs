//! The factory's remote choices, one function each: the Decisions API, the OpenAI Decisions
//! wire shape and the chat logprobs judge, built from the `decision_api_*` and
//! `decision_chat_*` keys and the key variables' values.

use std::sync::Arc;

use compaction_core::EffectiveSettings;

use super::{FactoryError, Selected};
use crate::chat::ChatLogprobsJudge;
use crate::config::{DecisionAdapter, DecisionConfig};
use crate::decisions::DecisionsApi;
use crate::http::{ApiKey, join_url, shown_env_var_name};
use crate::openai_decisions::OpenAiDecisions;

/// What every remote choice reads: the endpoint, the model and the key.
pub(super) struct Remote<'a> {
    pub(super) api_key: Option<ApiKey>,
    api_url: String,
    model: &'a str,
    config: &'a DecisionConfig,
    /// The key variable's name, printed only when it is one: `from_map` refuses anything
    /// else, and a config built by hand with a pasted key must not put the key in a reason.
    pub(super) env_name: String,
}

impl<'a> Remote<'a> {
    pub(super) fn new(
        settings: &'a EffectiveSettings,
        config: &'a DecisionConfig,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Remote<'a> {
        Remote {
            api_key: ApiKey::from_lookup(&config.api_key_env, env),
            api_url: join_url(&config.api_base_url, &config.api_path),
            model: &settings.decision_model,
            config,
            env_name: shown_env_var_name(&config.api_key_env).to_string(),
        }
    }

    /// `Decisions API <url> with model <model>`.
    pub(super) fn decisions_api(&self) -> String {
        format!("Decisions API {} with model {}", self.api_url, self.model)
    }

    /// The Decisions API with `key`, `reason` saying why.
    pub(super) fn decisions(
        &self,
        key: Option<ApiKey>,
        reason: String,
    ) -> Result<Selected, FactoryError> {
        DecisionsApi::new(&self.api_url, self.model, key, self.config.timeout())
            .map(|m| Selected {
                model: Arc::new(m),
                adapter: DecisionAdapter::Decisions,
                reason,
            })
            .map_err(|source| FactoryError::Build {
                adapter: "decisions",
                source,
            })
    }

    /// `decision_adapter = decisions`: with the key when set, without one otherwise.
    pub(super) fn configured_decisions(&self) -> Result<Selected, FactoryError> {
        let reason = match &self.api_key {
            Some(_) => format!("{} (configured)", self.decisions_api()),
            None => format!(
                "{} (configured), without a key: {} is not set",
                self.decisions_api(),
                self.env_name
            ),
        };
        self.decisions(self.api_key.clone(), reason)
    }

    /// `decision_adapter = openai-decisions`.
    pub(super) fn openai_decisions(&self) -> Result<Selected, FactoryError> {
        let keyed = if self.api_key.is_some() {
            String::new()
        } else {
            format!(", without a key: {} is not set", self.env_name)
        };
        let (url, model) = (&self.api_url, self.model);
        OpenAiDecisions::new(url, model, self.api_key.clone(), self.config.timeout())
            .map(|m| Selected {
                model: Arc::new(m),
                adapter: DecisionAdapter::OpenAiDecisions,
                reason: format!("OpenAI Decisions {url} with model {model} (configured){keyed}"),
            })
            .map_err(|source| FactoryError::Build {
                adapter: "openai-decisions",
                source,
            })
    }

    /// `decision_adapter = chat-logprobs`: model `decision_chat_model`, else the spec's
    /// decision model, with the chat key when set.
    pub(super) fn chat_logprobs(
        &self,
        config: &DecisionConfig,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Selected, FactoryError> {
        let url = join_url(&config.chat_base_url, &config.chat_path);
        let chat_model = config.chat_model.as_deref().unwrap_or(self.model);
        let key = ApiKey::from_lookup(&config.chat_api_key_env, env);
        let keyed = if key.is_some() {
            String::new()
        } else {
            format!(
                ", without a key: {} is not set",
                shown_env_var_name(&config.chat_api_key_env)
            )
        };
        let judge = ChatLogprobsJudge::new(
            &url,
            chat_model,
            key,
            config.timeout(),
            config.chat_top_logprobs,
        );
        judge
            .map(|m| Selected {
                model: Arc::new(m),
                adapter: DecisionAdapter::ChatLogprobs,
                reason: format!(
                    "chat logprobs judge {url} with model {chat_model} (configured){keyed}"
                ),
            })
            .map_err(|source| FactoryError::Build {
                adapter: "chat-logprobs",
                source,
            })
    }
}
