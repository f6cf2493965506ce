//! The coordinator's remote adapter (feature `openai`): a streaming chat-completions client of
//! an OpenAI-compatible server (`stream: true`, usage included), the stream read by
//! `openai_stream`. A host that serves the page without a remote coordinator builds `http`
//! alone and gets no HTTP client.

use std::time::Duration;

use compaction_core::{AdapterError, ModelInfo, async_trait};
use decision_client::http::host_of;
use serde_json::Value;
use tokio::sync::mpsc;

use super::coordinator::{Coordinator, CoordinatorRequest, ReplyStream};
use super::openai_stream::{self, Endpoint};

/// A streaming chat-completions client (`stream: true`, usage included).
pub struct OpenAiCompatible {
    url: String,
    model: String,
    api_key: Option<String>,
    http: reqwest::Client,
}

impl std::fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl OpenAiCompatible {
    /// A client of `{base_url}/chat/completions` for `model`.
    pub fn new(base_url: &str, model: &str, api_key: Option<String>) -> Self {
        OpenAiCompatible {
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: model.to_owned(),
            api_key,
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                // Small request and stream writes go out at once (no Nagle delay).
                .tcp_nodelay(true)
                .build()
                .unwrap_or_default(),
        }
    }
}

/// An upstream failure, with a message that names no key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct UpstreamError(String);

pub(super) fn upstream(kind: compaction_core::FailureKind, message: String) -> AdapterError {
    compaction_core::classified(kind, UpstreamError(message))
}

#[async_trait]
impl Coordinator for OpenAiCompatible {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("openai", host_of(&self.url), self.model.clone())
    }

    async fn stream(&self, request: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        let endpoint = Endpoint {
            http: self.http.clone(),
            url: self.url.clone(),
            model: self.model.clone(),
            api_key: self.api_key.clone(),
        };
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| serde_json::json!({"role": m.role, "content": m.content}))
            .collect();
        let tool = request.recall.clone();
        let response = endpoint
            .post(&endpoint.body(&messages, tool.is_some()))
            .await?;
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(openai_stream::pump(endpoint, messages, tool, response, tx));
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_is_the_host_and_port_never_the_user_info() {
        let info = |base: &str| OpenAiCompatible::new(base, "m", None).info().provider;
        // decision-client's `host_of` (tested there) names it.
        assert_eq!(
            info("https://user:pw@example.com:8443/v1"),
            "example.com:8443"
        );
    }
}
