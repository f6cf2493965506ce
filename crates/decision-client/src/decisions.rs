//! The Decisions API adapter ("System One" format), as served by OpenRouter's
//! `/api/alpha/decisions`, Inception's `/v1/decisions`, LiteLLM and SGLang.
//!
//! The request body is compaction-core's [`ProbeRequest`] as it serializes (spec section 5).
//! Two answer shapes are accepted:
//! - `{"answers":{"compaction_warranted":{"type":"noul","noul":0.86}},"usage":{…}}`
//! - `{"answers":{"compaction_warranted":{"answer":true,"probability":0.86}},"model":"…"}`
//!
//! The served model name (`model`) and the usage counts (`usage.input_tokens` /
//! `prompt_tokens`, `usage.output_tokens` / `completion_tokens`) are kept for telemetry.
//! There are no retries: one call per probe inside the timeout; failing open is the engine's job.

use compaction_core::QUESTION_ID;
use compaction_core::{DecisionAnswer, TokenUsage};
use serde_json::Value;

use crate::error::{DecisionError, checked_probability};

#[cfg(feature = "http")]
pub use remote::DecisionsApi;

/// The adapter itself (feature `http`).
#[cfg(feature = "http")]
mod remote {
    use super::*;
    use std::time::Duration;

    use async_trait::async_trait;
    use compaction_core::{AdapterError, DecisionModel, ModelInfo, ProbeRequest};

    use crate::http::{ApiKey, JsonClient, host_of};

    /// Asks a Decisions API host for `answers.compaction_warranted.noul`.
    #[derive(Debug, Clone)]
    pub struct DecisionsApi {
        client: JsonClient,
        url: String,
        key: Option<ApiKey>,
        info: ModelInfo,
    }

    impl DecisionsApi {
        /// An adapter posting to `url` (base URL and path already joined) for `model`, with an
        /// optional bearer key and a whole-exchange `timeout`.
        pub fn new(
            url: impl Into<String>,
            model: impl Into<String>,
            key: Option<ApiKey>,
            timeout: Duration,
        ) -> Result<DecisionsApi, DecisionError> {
            let url = url.into();
            let provider = host_of(&url);
            let system = if provider.ends_with("openrouter.ai") {
                "openrouter"
            } else {
                "decisions-api"
            };
            let client =
                JsonClient::new(timeout).map_err(|e| DecisionError::Client(e.to_string()))?;
            Ok(DecisionsApi {
                client,
                url,
                key,
                info: ModelInfo::new(system, provider, model),
            })
        }

        /// The endpoint.
        pub fn url(&self) -> &str {
            &self.url
        }

        /// Sends one probe and parses the answer, with the crate's typed error.
        pub async fn probe(&self, request: &ProbeRequest) -> Result<DecisionAnswer, DecisionError> {
            let (url, key) = (&self.url, self.key.as_ref());
            crate::exchange::post_and_parse(
                &self.client,
                url,
                key,
                request,
                &request.model,
                "decisions api",
                parse_answer,
            )
            .await
        }
    }

    #[async_trait]
    impl DecisionModel for DecisionsApi {
        fn info(&self) -> ModelInfo {
            self.info.clone()
        }

        async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
            self.probe(request)
                .await
                .map_err(DecisionError::into_adapter_error)
        }
    }
}

/// Reads p, the served model and usage from a Decisions API answer of either shape.
pub fn parse_answer(url: &str, body: &Value) -> Result<DecisionAnswer, DecisionError> {
    let missing = |detail: &str| DecisionError::MissingProbability {
        url: url.to_owned(),
        detail: detail.to_owned(),
    };
    let answer = body
        .get("answers")
        .ok_or_else(|| missing("no `answers` object"))?
        .get(QUESTION_ID)
        .ok_or_else(|| missing("no `answers.compaction_warranted`"))?;
    let raw = answer
        .get("noul")
        .or_else(|| answer.get("probability"))
        .ok_or_else(|| {
            missing("neither `answers.compaction_warranted.noul` nor `.probability` is present")
        })?;
    Ok(answer_with_host_facts(checked_probability(url, raw)?, body))
}

/// An answer of `probability` with the served model and usage the host's `body` reports.
pub(crate) fn answer_with_host_facts(probability: f64, body: &Value) -> DecisionAnswer {
    let mut answer = DecisionAnswer::new(probability);
    if let Some(model) = body.get("model").and_then(Value::as_str) {
        answer = answer.with_served_model(model);
    }
    if let Some(usage) = usage_of(body) {
        answer = answer.with_usage(usage);
    }
    answer
}

/// Token counts from `usage`, in either the Responses (`input_tokens`) or the Chat
/// Completions (`prompt_tokens`) spelling.
pub(crate) fn usage_of(body: &Value) -> Option<TokenUsage> {
    let usage = body.get("usage")?;
    let count = |a: &str, b: &str| {
        usage
            .get(a)
            .or_else(|| usage.get(b))
            .and_then(Value::as_u64)
    };
    let parsed = TokenUsage::new(
        count("input_tokens", "prompt_tokens"),
        count("output_tokens", "completion_tokens"),
    );
    (parsed.input.is_some() || parsed.output.is_some()).then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_answer_shapes_parse() {
        let a = parse_answer(
            "u",
            &json!({"answers":{"compaction_warranted":{"type":"noul","noul":0.86}},
                    "usage":{"input_tokens":412,"output_tokens":0}}),
        )
        .unwrap();
        assert_eq!(a.probability, 0.86);
        assert_eq!(a.usage, Some(TokenUsage::new(Some(412), Some(0))));
        let b = parse_answer(
            "u",
            &json!({"answers":{"compaction_warranted":{"answer":true,"probability":0.25}},
                    "model":"inception/mercury-decide-2026"}),
        )
        .unwrap();
        assert_eq!(b.probability, 0.25);
        assert_eq!(
            b.served_model.as_deref(),
            Some("inception/mercury-decide-2026")
        );
        assert_eq!(b.usage, None);
    }

    #[test]
    fn missing_and_invalid_probabilities_are_typed() {
        let cases = [
            (json!({}), "answers"),
            (json!({"answers":{}}), "compaction_warranted"),
            (
                json!({"answers":{"compaction_warranted":{"answer":true}}}),
                "noul",
            ),
        ];
        for (body, needle) in cases {
            let e = parse_answer("u", &body).unwrap_err();
            assert!(matches!(e, DecisionError::MissingProbability { .. }), "{e}");
            assert!(e.to_string().contains(needle), "{e}");
        }
        let nan = parse_answer(
            "u",
            &json!({"answers":{"compaction_warranted":{"noul":"NaN"}}}),
        );
        assert!(matches!(nan, Err(DecisionError::NotANumber { .. })));
        for p in [-0.1, 1.5, 1e300] {
            let e = parse_answer("u", &json!({"answers":{"compaction_warranted":{"noul":p}}}));
            assert!(matches!(e, Err(DecisionError::OutOfRange { value, .. }) if value == p));
        }
    }
}
