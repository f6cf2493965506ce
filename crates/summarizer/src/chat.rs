//! The chat-completions summarizer: one `POST {base_url}/chat/completions` to any
//! OpenAI-compatible endpoint (OpenRouter by default) with a system instruction for academic
//! research conversations and the core's consolidation prompt as the user message.
//!
//! **Facts ledger** ([`crate::facts_ledger`]): the summary is refused (an error, so the engine
//! writes nothing and reports `SummarizerFailed`) when it is longer than the text it replaces or
//! keeps fewer than half of the previous summary's figures and citations; the figures it left
//! out come back under `## Key figures carried forward`.
//!
//! An empty or whitespace summary, a reply cut at the output-token limit
//! (`finish_reason: "length"`) and a refusal are errors, so the engine writes nothing. A
//! **refusal** is a non-empty `message.refusal` string or `finish_reason: "content_filter"`;
//! the reply's wording is never guessed at. A 200 answer carrying an `error` object (OpenRouter
//! reports some upstream failures that way) is an error too.
//!
//! **Model slug:** the settings slug (`compaction_summarizer_model`) carries a provider prefix,
//! `openrouter/nvidia/nemotron-3.5-lightning:free`. When the base URL is OpenRouter's, a
//! leading `openrouter/` is stripped before sending (`nvidia/nemotron-3.5-lightning:free`);
//! for any other host the slug is sent exactly as configured.

use async_trait::async_trait;
use compaction_core::{AdapterError, ModelInfo, Summarizer, Summary, SummaryRequest, TokenUsage};
use decision_client::http::{ApiKey, JsonClient, join_url, redacted};
use serde::Serialize;
use serde_json::Value;

use crate::config::SummarizerConfig;
use crate::error::SummarizerError;
use crate::facts_ledger::FactsLedger;

/// The system instruction sent before the consolidation prompt.
pub(crate) const SYSTEM_PROMPT: &str = "\
You consolidate an academic research conversation into one summary that replaces its earlier \
turns in the research assistant's context. The researcher relies on it as the only record of \
those turns, across many later consolidations.

Rules:
- Start with the heading `## Comprehensive Conversation Summary` and write Markdown.
- Merge the existing summary (when there is one) and the new completed turns into one unified \
summary. Keep every fact of the existing summary, including its `Key figures carried forward` \
and sources sections, unless a new turn corrects it.
- Organise it by research topic. For each topic keep the question, the key findings with their \
numbers and their sources, the methods, datasets and models used, and the open questions.
- Keep these durable facts exactly as written: every number with its unit or label \
(`ICC = 0.38`, `60 min`, `5.1σ`), every citation key (`Haddad & Rivas 2021`, DOIs, arXiv ids), \
every identifier or file path, every constraint the user set (`exclude pre-2015 studies`) and \
every decision taken. Findings from Markdown tables count too.
- When a later turn corrects an earlier figure or claim, state the corrected figure and either \
drop the old one or mark it explicitly as superseded; never state a retracted claim as valid.
- Keep every citation exactly as written. End with a `## Cited Sources` section that lists, one \
per line starting with `- `, every entry of every `# Cited Sources`, `References` or `Sources \
carried forward` section, copied verbatim.
- Be shorter than the text you replace. Leave out greetings, tool-call mechanics and chunk ids. \
Never invent a finding or a source.
- Reply with the summary only.";

const OPENROUTER_PREFIX: &str = "openrouter/";

/// Consolidates through an OpenAI-compatible chat-completions endpoint.
#[derive(Debug, Clone)]
pub struct ChatSummarizer {
    client: JsonClient,
    base_url: String,
    url: String,
    key: Option<ApiKey>,
    model: String,
    max_tokens: u32,
    info: ModelInfo,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: String,
    messages: [Message<'a>; 2],
    temperature: f64,
    max_tokens: u32,
}

/// An `error` object the host sent instead of (or inside) a completion: its `message`, or the
/// object itself, with the key redacted (a host may echo it), cut to 300 characters.
fn upstream_error(url: &str, error: &Value, key: Option<&ApiKey>) -> SummarizerError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    SummarizerError::Upstream {
        url: url.to_owned(),
        message: redacted(&message, key).chars().take(300).collect(),
    }
}

fn is_openrouter(base_url: &str) -> bool {
    let host = decision_client::http::host_of(base_url);
    host == "openrouter.ai" || host.ends_with(".openrouter.ai")
}

/// The slug to send for `configured` at `base_url`: `openrouter/` stripped for OpenRouter.
pub(crate) fn wire_model(base_url: &str, configured: &str) -> String {
    let configured = configured.trim();
    if is_openrouter(base_url) {
        configured
            .strip_prefix(OPENROUTER_PREFIX)
            .unwrap_or(configured)
            .to_owned()
    } else {
        configured.to_owned()
    }
}

impl ChatSummarizer {
    /// A summarizer for `model` (the settings slug) at `config.base_url`, sending `key` when
    /// given.
    pub fn new(
        config: &SummarizerConfig,
        model: &str,
        key: Option<ApiKey>,
    ) -> Result<ChatSummarizer, SummarizerError> {
        let client = JsonClient::new(config.timeout())?;
        let model = wire_model(&config.base_url, model);
        let info = ModelInfo::new(
            if is_openrouter(&config.base_url) {
                "openrouter"
            } else {
                "openai"
            },
            decision_client::http::host_of(&config.base_url),
            model.clone(),
        );
        Ok(ChatSummarizer {
            client,
            base_url: config.base_url.clone(),
            url: join_url(&config.base_url, "chat/completions"),
            key,
            model,
            max_tokens: config.max_output_tokens,
            info,
        })
    }

    /// The endpoint called.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The request body for `request`, as sent.
    pub fn request_body(&self, request: &SummaryRequest) -> Value {
        serde_json::to_value(self.body(request)).unwrap_or(Value::Null)
    }

    fn body<'a>(&'a self, request: &'a SummaryRequest) -> ChatRequest<'a> {
        // The request's slug is the engine's current setting; it wins over the one this
        // adapter was built with.
        let model = if request.model.trim().is_empty() {
            self.model.clone()
        } else {
            wire_model(&self.base_url, &request.model)
        };
        ChatRequest {
            model,
            messages: [
                Message {
                    role: "system",
                    content: SYSTEM_PROMPT,
                },
                Message {
                    role: "user",
                    content: &request.prompt,
                },
            ],
            temperature: 0.0,
            max_tokens: self.max_tokens,
        }
    }

    /// A refusal, a filtered, truncated or failed generation, or any finish other than a
    /// natural stop is no summary.
    fn check_finish(
        &self,
        choice: &Value,
        message: &serde_json::Map<String, Value>,
    ) -> Result<(), SummarizerError> {
        let url = &self.url;
        let finish_reason = choice.get("finish_reason").and_then(Value::as_str);
        if let Some(refusal) = message
            .get("refusal")
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty())
        {
            return Err(SummarizerError::Refused {
                url: url.clone(),
                reason: refusal.chars().take(300).collect(),
            });
        }
        if finish_reason == Some("content_filter") {
            return Err(SummarizerError::Refused {
                url: url.clone(),
                reason: "finish_reason \"content_filter\"".into(),
            });
        }
        if finish_reason == Some("length") {
            return Err(SummarizerError::Truncated {
                url: url.clone(),
                max_tokens: self.max_tokens,
            });
        }
        // A generation that failed midway (OpenRouter: `finish_reason: "error"` with a
        // `choices[0].error` object and partial content) is no summary; neither is any other
        // reason than a natural stop (missing or null from local servers that omit it).
        if let Some(error) = choice.get("error").filter(|e| !e.is_null()) {
            return Err(upstream_error(url, error, self.key.as_ref()));
        }
        if let Some(reason) = finish_reason.filter(|r| *r != "stop") {
            return Err(SummarizerError::Upstream {
                url: url.clone(),
                message: format!(
                    "the generation ended with finish_reason {:?}; only \"stop\" marks a \
                     complete summary",
                    reason.chars().take(40).collect::<String>()
                ),
            });
        }
        Ok(())
    }

    /// Reads a chat completion: the summary, or why there is none.
    fn parse(&self, body: &Value) -> Result<Summary, SummarizerError> {
        let url = &self.url;
        if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
            return Err(upstream_error(url, error, self.key.as_ref()));
        }
        let malformed = |reason: &str| SummarizerError::Malformed {
            url: url.clone(),
            reason: reason.to_owned(),
        };
        let choice = body
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| malformed("no `choices[0]`"))?;
        let message = choice
            .get("message")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed("no `choices[0].message` object"))?;
        self.check_finish(choice, message)?;
        let text = match message.get("content") {
            Some(Value::String(s)) => s.trim(),
            None | Some(Value::Null) => "",
            Some(_) => return Err(malformed("`choices[0].message.content` is not a string")),
        };
        if text.is_empty() {
            return Err(SummarizerError::EmptySummary {
                source_name: url.clone(),
            });
        }
        let usage = body.get("usage").map(|u| {
            TokenUsage::new(
                u.get("prompt_tokens").and_then(Value::as_u64),
                u.get("completion_tokens").and_then(Value::as_u64),
            )
        });
        let mut summary = Summary::new(text);
        if let Some(model) = body.get("model").and_then(Value::as_str) {
            summary = summary.with_served_model(model);
        }
        if let Some(usage) = usage {
            summary = summary.with_usage(usage);
        }
        Ok(summary)
    }
}

#[async_trait]
impl Summarizer for ChatSummarizer {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        let response = self
            .client
            .post_json(&self.url, self.key.as_ref(), &self.body(request))
            .await
            .map_err(|e| SummarizerError::from(e).into_adapter_error())?;
        let mut summary = self
            .parse(&response.body)
            .map_err(SummarizerError::into_adapter_error)?;
        // Fail closed: a summary that is empty, longer than what it replaces, or that dropped
        // the previous summary's ledger is not committed; otherwise missing figures come back.
        let ledger = FactsLedger::from_request(request);
        ledger
            .check(&summary.text, &self.url)
            .map_err(SummarizerError::into_adapter_error)?;
        let missing = ledger.missing_from(&summary.text).len();
        if missing > 0 {
            tracing::info!(
                missing,
                total = ledger.figures().len(),
                "facts ledger carried forward figures the summary left out"
            );
        }
        summary.text = ledger.reconcile(&summary.text);
        summary.receipt = Some(ledger.receipt(&summary.text));
        tracing::debug!(
            model = %self.model,
            served_model = summary.served_model.as_deref().unwrap_or(""),
            chars = summary.text.len(),
            "chat summarizer answered"
        );
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openrouter_prefix_is_stripped_only_for_openrouter() {
        let slug = "openrouter/nvidia/nemotron-3.5-lightning:free";
        assert_eq!(
            wire_model("https://openrouter.ai/api/v1", slug),
            "nvidia/nemotron-3.5-lightning:free"
        );
        assert_eq!(wire_model("http://127.0.0.1:8000/v1", slug), slug);
        assert_eq!(
            decision_client::http::host_of("http://127.0.0.1:8000/v1"),
            "127.0.0.1:8000"
        );
    }
}
