//! The coordinator model as a port: it answers a turn as a stream of text chunks and reports
//! its usage. Two adapters: [`OfflineCoordinator`] (deterministic, no key) here, and the
//! streaming chat-completions client `OpenAiCompatible` (feature `openai`, `openai.rs`).
//!
//! The request for turn N+1 is the spec's assembly ([`CoordinatorRequest::assemble`]): the
//! live summary, then the retained turns verbatim, then the new query.

use std::time::Duration;

use compaction_core::{
    AdapterError, AssembledContext, CharsPerToken, ContextEntry, Event, ModelInfo, TokenEstimator,
    async_trait,
};
use decision_client::http::{has_credentials, is_http_url};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

pub use super::recall_tool::RecallTool;

/// One chat message of the coordinator's prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoordinatorMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl CoordinatorMessage {
    fn new(role: &str, content: impl Into<String>) -> Self {
        CoordinatorMessage {
            role: role.to_owned(),
            content: content.into(),
        }
    }
}

/// What the coordinator is asked: the assembled prompt.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CoordinatorRequest {
    /// The prompt: the live summary, the retained turns, then the new query (last).
    pub messages: Vec<CoordinatorMessage>,
    /// The new query.
    pub question: String,
    /// The recall tool over this session, when the server offers it.
    pub recall: Option<RecallTool>,
}

/// The words that introduce the live summary in the coordinator's prompt.
pub(super) const SUMMARY_PREAMBLE: &str = "Summary of the earlier conversation:";

impl CoordinatorRequest {
    /// The spec's assembly: the live summary (as a system message), then every verbatim
    /// event with text (user or assistant), then `question`.
    pub fn assemble(context: &AssembledContext, question: &str) -> Self {
        let mut messages = Vec::new();
        for entry in &context.entries {
            match entry {
                ContextEntry::Summary(s) => messages.push(CoordinatorMessage::new(
                    "system",
                    format!("{SUMMARY_PREAMBLE}\n{}", s.compaction.summary_text()),
                )),
                ContextEntry::Event(e) => messages.extend(Self::message_of(e)),
                // A kind of entry added to the core after this build adds nothing.
                _ => {}
            }
        }
        messages.push(CoordinatorMessage::new("user", question));
        CoordinatorRequest {
            messages,
            question: question.to_owned(),
            recall: None,
        }
    }

    /// The message a verbatim event becomes in the prompt: its text as the user's or the
    /// assistant's, or nothing (no text, or a partial reply).
    pub(super) fn message_of(event: &Event) -> Option<CoordinatorMessage> {
        if !event.has_text() || event.is_partial() {
            return None;
        }
        let role = if event.is_user() { "user" } else { "assistant" };
        Some(CoordinatorMessage::new(role, event.text()))
    }

    /// Offers the coordinator the recall tool (builder style).
    pub fn with_recall(mut self, tool: RecallTool) -> Self {
        self.recall = Some(tool);
        self
    }

    /// The prompt's size by the core's estimator (4 characters a token).
    pub fn estimated_prompt_tokens(&self) -> u64 {
        self.messages
            .iter()
            .map(|m| CharsPerToken.estimate(&m.content) as u64)
            .sum()
    }
}

/// One piece of a streamed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyChunk {
    /// Text to show.
    Delta(String),
    /// The usage the model reported (usually last).
    Usage {
        /// Prompt tokens.
        prompt_tokens: u64,
        /// Completion tokens.
        completion_tokens: u64,
    },
    /// The model called a tool (stored as the turn's function call event).
    ToolCall {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments, as the model wrote them (JSON text).
        arguments: String,
    },
    /// The tool's answer to a call (stored as the turn's function response event).
    ToolResult {
        /// The call id it answers.
        id: String,
        /// The tool.
        name: String,
        /// What the model was given.
        result: String,
    },
}

/// A reply as it streams; the stream ends when the sender is dropped.
pub type ReplyStream = mpsc::Receiver<Result<ReplyChunk, AdapterError>>;

/// The coordinator model.
#[async_trait]
pub trait Coordinator: Send + Sync {
    /// Who answers.
    fn info(&self) -> ModelInfo;
    /// Starts answering; an error before the first chunk is an upstream failure, and so is
    /// an `Err` item in the stream.
    async fn stream(&self, request: &CoordinatorRequest) -> Result<ReplyStream, AdapterError>;
}

/// A deterministic stand-in that needs no key: it streams a reply built from the question
/// and the assembled context, word by word, and reports the prompt tokens by the core's
/// estimator. A first-token delay can be set (for benchmarks).
#[derive(Debug, Clone, Default)]
pub struct OfflineCoordinator {
    first_token_delay: Duration,
}

impl OfflineCoordinator {
    /// The stand-in with a fixed delay before its first chunk.
    pub fn with_first_token_delay(delay: Duration) -> Self {
        OfflineCoordinator {
            first_token_delay: delay,
        }
    }

    /// The reply the stand-in gives to `request`.
    pub fn reply(request: &CoordinatorRequest) -> String {
        let earlier = request.messages.len().saturating_sub(1);
        let summary = request
            .messages
            .first()
            .filter(|m| m.role == "system")
            .map(|m| {
                let words: Vec<&str> = m.content.split_whitespace().skip(6).take(12).collect();
                format!(" The summary so far begins: \"{}\".", words.join(" "))
            })
            .unwrap_or_default();
        format!(
            "(offline stand-in) You asked: \"{}\". I read {earlier} earlier message{} of this \
             conversation.{summary}",
            request.question.trim(),
            if earlier == 1 { "" } else { "s" }
        )
    }
}

#[async_trait]
impl Coordinator for OfflineCoordinator {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("offline", "local", "offline-stand-in")
    }

    async fn stream(&self, request: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        let mut reply = Self::reply(request);
        let recalled = match &request.recall {
            Some(tool) => offline_recall(tool, request).await,
            None => None,
        };
        let mut tool_chunks = Vec::new();
        if let Some(recalled) = recalled {
            reply.push_str(&recalled.sentence);
            tool_chunks = recalled.chunks;
        }
        let prompt_tokens = request.estimated_prompt_tokens();
        let completion_tokens = CharsPerToken.estimate(&reply) as u64;
        let delay = self.first_token_delay;
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            for chunk in tool_chunks {
                if tx.send(Ok(chunk)).await.is_err() {
                    return;
                }
            }
            let mut rest = reply.as_str();
            while !rest.is_empty() {
                let cut = rest[1..].find(' ').map_or(rest.len(), |i| i + 1);
                let (word, tail) = rest.split_at(cut);
                if tx
                    .send(Ok(ReplyChunk::Delta(word.to_owned())))
                    .await
                    .is_err()
                {
                    return;
                }
                rest = tail;
            }
            let _ = tx
                .send(Ok(ReplyChunk::Usage {
                    prompt_tokens,
                    completion_tokens,
                }))
                .await;
        });
        Ok(rx)
    }
}

/// What the stand-in recalled: the call and result chunks and the sentence it adds.
struct OfflineRecall {
    chunks: Vec<ReplyChunk>,
    sentence: String,
}

/// The stand-in's use of the recall tool: when the question names a word (four letters or
/// more) that no message of the prompt holds and that only folded turns contain, it calls
/// `recall_history` with that word (once; at most three words are tried) and quotes the best
/// hit.
async fn offline_recall(tool: &RecallTool, request: &CoordinatorRequest) -> Option<OfflineRecall> {
    use compaction_core::RECALL_TOOL_NAME;
    use compaction_core::store_support::words;
    let shown: std::collections::HashSet<String> = request
        .messages
        .iter()
        .take(request.messages.len().saturating_sub(1))
        .flat_map(|m| words(&m.content).collect::<Vec<_>>())
        .collect();
    let mut candidates: Vec<String> = words(&request.question)
        .filter(|w| w.chars().count() >= 4 && !shown.contains(w))
        .collect();
    candidates.dedup();
    for word in candidates.into_iter().take(3) {
        let Some(hits) = tool.search(&word).await else {
            continue;
        };
        // The prompt does not show the word, so a folded hit is where only it lives (the
        // question itself is stored already, verbatim).
        let Some(best) = hits.iter().find(|h| h.covered_by.is_some()) else {
            continue;
        };
        let arguments = serde_json::json!({ "query": word }).to_string();
        let result = tool.answer(&arguments).await;
        let id = "recall-offline-1".to_owned();
        let turn = best.turn.map_or_else(String::new, |t| format!(" {t}"));
        let quote: String = best.text.chars().take(200).collect();
        return Some(OfflineRecall {
            chunks: vec![
                ReplyChunk::ToolCall {
                    id: id.clone(),
                    name: RECALL_TOOL_NAME.to_owned(),
                    arguments,
                },
                ReplyChunk::ToolResult {
                    id,
                    name: RECALL_TOOL_NAME.to_owned(),
                    result,
                },
            ],
            sentence: format!(" I recalled \"{word}\" from folded turn{turn}: \"{quote}\"."),
        });
    }
    None
}

/// Keys of the coordinator in the config file.
pub(super) mod config {
    /// The OpenAI-compatible base URL (`https://openrouter.ai/api/v1`); unset: offline.
    pub(crate) const KEY_BASE_URL: &str = "coordinator_base_url";
    /// The model slug sent upstream.
    pub(crate) const KEY_MODEL: &str = "coordinator_model";
    /// The environment variable holding the API key (default `OPENROUTER_API_KEY`).
    pub(crate) const KEY_API_KEY_ENV: &str = "coordinator_api_key_env";
    /// Every coordinator key.
    pub const KEYS: [&str; 3] = [KEY_BASE_URL, KEY_MODEL, KEY_API_KEY_ENV];
}

/// The coordinator's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoordinatorConfig {
    /// `coordinator_base_url`: none means the offline stand-in.
    pub base_url: Option<String>,
    /// `coordinator_model` (default `openai/gpt-4o-mini`).
    pub model: String,
    /// `coordinator_api_key_env` (default `OPENROUTER_API_KEY`).
    pub api_key_env: String,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            base_url: None,
            model: "openai/gpt-4o-mini".to_owned(),
            api_key_env: "OPENROUTER_API_KEY".to_owned(),
        }
    }
}

/// A coordinator key with the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} must be {expected}, got {got}")]
pub struct CoordinatorConfigError {
    /// The key.
    pub key: &'static str,
    /// The expected form.
    pub expected: &'static str,
    /// What was there.
    pub got: String,
}

impl CoordinatorConfig {
    /// Reads the coordinator keys of a config object (other keys are ignored).
    pub fn from_map(raw: &Map<String, Value>) -> Result<Self, CoordinatorConfigError> {
        let text = |key: &'static str, expected: &'static str| -> Result<Option<String>, _> {
            match raw.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_owned())),
                Some(other) => Err(CoordinatorConfigError {
                    key,
                    expected,
                    got: other.to_string(),
                }),
            }
        };
        let mut config = CoordinatorConfig {
            base_url: text(
                config::KEY_BASE_URL,
                "an http(s) URL such as \"https://openrouter.ai/api/v1\"",
            )?,
            ..CoordinatorConfig::default()
        };
        if let Some(url) = &config.base_url {
            if has_credentials(url) {
                // Never echo a URL that carries credentials.
                return Err(CoordinatorConfigError {
                    key: config::KEY_BASE_URL,
                    expected: "a URL without credentials (put the key in the variable \
                               coordinator_api_key_env names)",
                    got: "a URL with user:password@".to_owned(),
                });
            }
            if !is_http_url(url) {
                return Err(CoordinatorConfigError {
                    key: config::KEY_BASE_URL,
                    expected: "an http(s) URL such as \"https://openrouter.ai/api/v1\"",
                    got: format!("\"{url}\""),
                });
            }
        }
        if let Some(model) = text(config::KEY_MODEL, "a non-empty model slug")? {
            config.model = model;
        }
        if let Some(env) = text(config::KEY_API_KEY_ENV, "an environment variable name")? {
            config.api_key_env = env;
        }
        Ok(config)
    }
}

/// The coordinator chosen and why, in words (for the banner and `/healthz`).
pub struct SelectedCoordinator {
    /// The adapter.
    pub coordinator: std::sync::Arc<dyn Coordinator>,
    /// Why, e.g. `offline stand-in: coordinator_base_url is not set`. Never a key.
    pub reason: String,
}

impl std::fmt::Debug for SelectedCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectedCoordinator")
            .field("reason", &self.reason)
            .finish_non_exhaustive()
    }
}

/// The OpenAI-compatible client when `coordinator_base_url` is set (with the key from
/// `coordinator_api_key_env` when that variable is set: local servers need none), otherwise
/// the offline stand-in.
pub fn select_coordinator(
    config: &CoordinatorConfig,
    env: impl Fn(&str) -> Option<String>,
) -> SelectedCoordinator {
    match &config.base_url {
        None => SelectedCoordinator {
            coordinator: std::sync::Arc::new(OfflineCoordinator::default()),
            reason: format!("offline stand-in: {} is not set", config::KEY_BASE_URL),
        },
        Some(url) => {
            let key = env(&config.api_key_env).filter(|k| !k.trim().is_empty());
            let reason = format!(
                "{} at {url} ({})",
                config.model,
                if key.is_some() {
                    format!("key from {}", config.api_key_env)
                } else {
                    format!("no key: {} is not set", config.api_key_env)
                }
            );
            remote(url, config, key, reason)
        }
    }
}

#[cfg(feature = "openai")]
fn remote(
    url: &str,
    config: &CoordinatorConfig,
    key: Option<String>,
    reason: String,
) -> SelectedCoordinator {
    SelectedCoordinator {
        coordinator: std::sync::Arc::new(super::openai::OpenAiCompatible::new(
            url,
            &config.model,
            key,
        )),
        reason,
    }
}

/// Without the client (feature `openai`), a configured base URL is answered by the offline
/// stand-in, and the banner says why.
#[cfg(not(feature = "openai"))]
fn remote(
    _url: &str,
    _config: &CoordinatorConfig,
    _key: Option<String>,
    reason: String,
) -> SelectedCoordinator {
    SelectedCoordinator {
        coordinator: std::sync::Arc::new(OfflineCoordinator::default()),
        reason: format!(
            "offline stand-in: this build has no OpenAI-compatible client (service feature \
             `openai`), so {reason} is not used"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_is_an_http_url_without_credentials() {
        let config = |url: &str| {
            let mut raw = Map::new();
            raw.insert(config::KEY_BASE_URL.into(), Value::from(url));
            CoordinatorConfig::from_map(&raw)
        };
        assert!(config("https://openrouter.ai/api/v1").is_ok());
        assert!(config("http://localhost:8000/v1").is_ok());
        for bad in ["ftp://example.com", "https://", "localhost:8000"] {
            let e = config(bad).expect_err(bad);
            assert_eq!(e.key, config::KEY_BASE_URL, "{bad}");
        }
        let e = config("https://me:sk-secret@example.com/v1").expect_err("credentials");
        assert!(!e.to_string().contains("sk-secret"), "{e}");
    }
}
