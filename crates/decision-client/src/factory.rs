//! The factory: builds the decision model from the spec's settings, the decision-client keys
//! and the environment, and says in words why it chose what it chose.
//!
//! - `auto`: the Decisions API when the variable named by `decision_api_key_env` is set and
//!   not blank, else `local`.
//! - `local`: the embedding model when its files are installed (and this build has the
//!   `embedding` feature), else the offline lexical model, the reason saying why and how to
//!   install the files. Never a remote host.
//! - `embedding`: the embedding model; its files must be installed.
//! - `decisions`: the Decisions API, with the key when set and without one otherwise (for
//!   self-hosted LiteLLM or SGLang).
//! - `openai-decisions`: the OpenAI Decisions wire shape at the same `decision_api_*` endpoint
//!   and key (set them to `https://api.openai.com`, `/v1/decisions`, `OPENAI_API_KEY`).
//! - `chat-logprobs`: the chat judge, model `decision_chat_model` or else
//!   `adaptive_compaction_decision_model`, with the key when set.
//! - `offline`: the offline lexical model.
//!
//! The environment is read through a lookup closure, so tests never mutate the process
//! environment; [`process_env`] is the real one.

use std::sync::Arc;

use compaction_core::{DecisionModel, EffectiveSettings};

use crate::config::{DecisionAdapter, DecisionConfig};
use crate::error::DecisionError;
use crate::offline::OfflineLexical;

#[cfg(feature = "http")]
mod remote;

/// The chosen model and why.
#[derive(Clone)]
pub struct Selected {
    /// The model.
    pub model: Arc<dyn DecisionModel>,
    /// Which adapter was built.
    pub adapter: DecisionAdapter,
    /// Why, in words, e.g. `offline lexical model: OPENROUTER_API_KEY is not set`. It names
    /// key variables, never a key.
    pub reason: String,
}

impl std::fmt::Debug for Selected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selected")
            .field("model", &self.model.info())
            .field("adapter", &self.adapter)
            .field("reason", &self.reason)
            .finish()
    }
}

/// The factory could not build the chosen adapter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FactoryError {
    /// The HTTP adapter could not be built.
    #[error("cannot build the {adapter} decision adapter: {source}")]
    Build {
        /// The adapter (`decisions` or `chat-logprobs`).
        adapter: &'static str,
        /// Why.
        source: DecisionError,
    },
    /// The embedding model's files are absent or damaged.
    #[error("cannot build the embedding decision adapter: {0}")]
    #[cfg(feature = "embedding")]
    ModelFiles(#[from] crate::embedding::ModelFileError),
    /// The adapter needs a Cargo feature this build of the crate does not have.
    #[error(
        "the {adapter} decision adapter is not in this build: it needs decision-client's \
         `{feature}` feature (the offline adapter is always available)"
    )]
    NotBuilt {
        /// The adapter asked for.
        adapter: &'static str,
        /// The missing feature.
        feature: &'static str,
    },
}

/// Reads the process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Builds the decision model. `env` looks a variable up (use [`process_env`] in production).
///
/// Without the `http` feature `auto` is the offline model (the reason says why) and a remote
/// choice is [`FactoryError::NotBuilt`].
#[cfg(not(feature = "http"))]
pub fn build_decision_model(
    _settings: &EffectiveSettings,
    config: &DecisionConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Selected, FactoryError> {
    match config.adapter {
        DecisionAdapter::Auto => Ok(local(
            config,
            &env,
            "built without the remote adapters (feature `http`)",
        )),
        DecisionAdapter::Local | DecisionAdapter::Embedding | DecisionAdapter::Offline => {
            local_choice(config, &env)
        }
        remote => Err(FactoryError::NotBuilt {
            adapter: remote.as_str(),
            feature: "http",
        }),
    }
}

#[cfg(feature = "http")]
/// Builds the decision model. `env` looks a variable up (use [`process_env`] in production).
pub fn build_decision_model(
    settings: &EffectiveSettings,
    config: &DecisionConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Selected, FactoryError> {
    let remote = remote::Remote::new(settings, config, &env);
    match config.adapter {
        DecisionAdapter::Auto => match remote.api_key.clone() {
            Some(key) => remote.decisions(
                Some(key),
                format!("{}: {} is set", remote.decisions_api(), remote.env_name),
            ),
            None => Ok(local(
                config,
                &env,
                &format!("{} is not set", remote.env_name),
            )),
        },
        DecisionAdapter::Decisions => remote.configured_decisions(),
        DecisionAdapter::OpenAiDecisions => remote.openai_decisions(),
        DecisionAdapter::ChatLogprobs => remote.chat_logprobs(config, &env),
        DecisionAdapter::Local | DecisionAdapter::Embedding | DecisionAdapter::Offline => {
            local_choice(config, &env)
        }
    }
}

/// The lexical model, and why.
fn lexical(reason: String) -> Selected {
    Selected {
        model: Arc::new(OfflineLexical),
        adapter: DecisionAdapter::Offline,
        reason,
    }
}

/// A configured local choice: `offline`, `local` or `embedding`.
fn local_choice(
    config: &DecisionConfig,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Selected, FactoryError> {
    match config.adapter {
        DecisionAdapter::Embedding => embedding(config, env, "configured"),
        DecisionAdapter::Local => Ok(local(config, env, "decision_adapter is \"local\"")),
        _ => Ok(lexical("offline lexical model (configured)".to_owned())),
    }
}

/// The embedding model when its files are installed, else the lexical model; `why` says
/// why no remote model was chosen.
fn local(config: &DecisionConfig, env: &impl Fn(&str) -> Option<String>, why: &str) -> Selected {
    match embedding(config, env, why) {
        Ok(selected) => selected,
        Err(e) => lexical(format!("offline lexical model: {why}; {}", unavailable(&e))),
    }
}

#[cfg(feature = "embedding")]
fn unavailable(e: &FactoryError) -> String {
    match e {
        FactoryError::ModelFiles(files) => format!("embedding model unavailable: {files}"),
        other => other.to_string(),
    }
}

#[cfg(not(feature = "embedding"))]
fn unavailable(_: &FactoryError) -> String {
    "this build has no embedding model (decision-client's `embedding` feature)".to_owned()
}

#[cfg(feature = "embedding")]
fn embedding(
    config: &DecisionConfig,
    env: &impl Fn(&str) -> Option<String>,
    why: &str,
) -> Result<Selected, FactoryError> {
    use crate::embedding::{EmbeddingModel, MODEL_NAME, files};
    let dir = files::resolve(config.embedding_model_dir.as_deref(), env)?;
    let reason = format!(
        "embedding model {MODEL_NAME} (local, files in {}): {why}",
        dir.path().display()
    );
    let mut model = EmbeddingModel::new(dir);
    if let Some(vectors) = crate::embedding::disk::default_dir(env) {
        model = model.with_vector_dir(vectors);
    }
    Ok(Selected {
        model: Arc::new(model),
        adapter: DecisionAdapter::Embedding,
        reason,
    })
}

#[cfg(not(feature = "embedding"))]
fn embedding(
    _config: &DecisionConfig,
    _env: &impl Fn(&str) -> Option<String>,
    _why: &str,
) -> Result<Selected, FactoryError> {
    Err(FactoryError::NotBuilt {
        adapter: "embedding",
        feature: "embedding",
    })
}
