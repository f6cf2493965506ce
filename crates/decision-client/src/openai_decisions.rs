//! The OpenAI Decisions wire shape (`POST /v1/decisions`), the fourth adapter.
//!
//! Request: the rubric as one `predicate` question in the `questions` array, named
//! `compaction_warranted`, and the decision state as the `input` text:
//!
//! ```json
//! {"model": "…",
//!  "input": "{\"earlier_discussion\": \"…\", \"latest_turn\": \"…\"}",
//!  "questions": [{"type": "predicate", "name": "compaction_warranted", "instructions": "<rubric>"}]}
//! ```
//!
//! Answer: `answers` is an array in question order; the answer named `compaction_warranted`
//! (or the first, when the host leaves names out) gives p:
//! `{"answers": [{"type": "predicate", "name": "compaction_warranted", "probability": 0.86}],
//! "model": "…", "usage": {"input_tokens": …, "output_tokens": …}}`. A `refusal` answer
//! (`{"type": "refusal", "name": "compaction_warranted"}`) is a failed probe
//! ([`DecisionError::Refused`]); the engine fails open on it like on any other failure.
//!
//! Assumptions, written down because the shape was taken from public API references, not
//! from a live host: the state goes in `input` as a JSON text (the rubric names
//! `earlier_discussion` and `latest_turn`, so the field names are kept); no `safety_identifier`
//! or cache breakpoints are sent. The endpoint comes from the same `decision_api_base_url` /
//! `decision_api_path` / `decision_api_key_env` keys as the Decisions API adapter (for OpenAI:
//! `https://api.openai.com`, `/v1/decisions`, `OPENAI_API_KEY`).

use compaction_core::QUESTION_ID;
use compaction_core::{DecisionAnswer, ProbeRequest};
use serde::Serialize;
use serde_json::Value;

use crate::decisions::answer_with_host_facts;
use crate::error::{DecisionError, checked_probability};

/// The question type the probe asks.
pub const PREDICATE: &str = "predicate";
/// The answer type of a declined question.
pub const REFUSAL: &str = "refusal";

/// The request body of one probe in the OpenAI Decisions shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionsRequest<'a> {
    /// The decision model.
    pub model: &'a str,
    /// The decision state as JSON text.
    pub input: String,
    /// The one predicate question.
    pub questions: [PredicateQuestion<'a>; 1],
}

/// A `predicate` question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredicateQuestion<'a> {
    /// Always `"predicate"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `compaction_warranted`.
    pub name: &'static str,
    /// The rubric.
    pub instructions: &'a str,
}

impl<'a> DecisionsRequest<'a> {
    /// The spec's probe in this shape.
    pub fn from_probe(probe: &'a ProbeRequest) -> DecisionsRequest<'a> {
        let question = &probe.questions.compaction_warranted;
        DecisionsRequest {
            model: &probe.model,
            // The state serializes as its two strings; this cannot fail.
            input: serde_json::to_string(&probe.state).unwrap_or_default(),
            questions: [PredicateQuestion {
                kind: PREDICATE,
                name: QUESTION_ID,
                instructions: &question.instructions,
            }],
        }
    }
}

#[cfg(feature = "http")]
pub use remote::OpenAiDecisions;

/// The adapter itself (feature `http`).
#[cfg(feature = "http")]
mod remote {
    use super::*;
    use std::time::Duration;

    use async_trait::async_trait;
    use compaction_core::{AdapterError, DecisionModel, ModelInfo};

    use crate::http::{ApiKey, JsonClient, host_of};

    /// Asks an OpenAI Decisions host for the predicate's probability.
    #[derive(Debug, Clone)]
    pub struct OpenAiDecisions {
        client: JsonClient,
        url: String,
        key: Option<ApiKey>,
        info: ModelInfo,
    }

    impl OpenAiDecisions {
        /// An adapter posting to `url` (base URL and path already joined) for `model`, with an
        /// optional bearer key and a whole-exchange `timeout`.
        pub fn new(
            url: impl Into<String>,
            model: impl Into<String>,
            key: Option<ApiKey>,
            timeout: Duration,
        ) -> Result<OpenAiDecisions, DecisionError> {
            let url = url.into();
            let provider = host_of(&url);
            let client =
                JsonClient::new(timeout).map_err(|e| DecisionError::Client(e.to_string()))?;
            Ok(OpenAiDecisions {
                client,
                url,
                key,
                info: ModelInfo::new("openai", provider, model),
            })
        }

        /// The endpoint.
        pub fn url(&self) -> &str {
            &self.url
        }

        /// Sends one probe and parses the answer, with the crate's typed error.
        pub async fn probe(&self, request: &ProbeRequest) -> Result<DecisionAnswer, DecisionError> {
            let body = DecisionsRequest::from_probe(request);
            crate::exchange::post_and_parse(
                &self.client,
                &self.url,
                self.key.as_ref(),
                &body,
                &request.model,
                "openai decisions",
                parse_answer,
            )
            .await
        }
    }

    #[async_trait]
    impl DecisionModel for OpenAiDecisions {
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

/// Reads p, the served model and usage from an OpenAI Decisions answer.
pub fn parse_answer(url: &str, body: &Value) -> Result<DecisionAnswer, DecisionError> {
    let missing = |detail: &str| DecisionError::MissingProbability {
        url: url.to_owned(),
        detail: detail.to_owned(),
    };
    let answers = body
        .get("answers")
        .and_then(Value::as_array)
        .ok_or_else(|| missing("no `answers` array"))?;
    let named = |a: &&Value| a.get("name").and_then(Value::as_str) == Some(QUESTION_ID);
    let answer = answers
        .iter()
        .find(named)
        .or_else(|| {
            // A host that leaves names out answers in question order: ours is the only one.
            answers
                .first()
                .filter(|a| a.get("name").is_none_or(Value::is_null))
        })
        .ok_or_else(|| missing("no answer named `compaction_warranted`"))?;
    match answer.get("type").and_then(Value::as_str) {
        Some(REFUSAL) => {
            return Err(DecisionError::Refused {
                url: url.to_owned(),
                question: QUESTION_ID.to_owned(),
            });
        }
        Some(PREDICATE) | None => {}
        Some(other) => {
            return Err(missing(&format!(
                "the answer is of type `{other}`, expected `predicate`"
            )));
        }
    }
    let raw = answer
        .get("probability")
        .ok_or_else(|| missing("the predicate answer has no `probability`"))?;
    Ok(answer_with_host_facts(checked_probability(url, raw)?, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn predicate_refusal_and_malformed_answers() {
        let a = parse_answer(
            "u",
            &json!({"answers": [{"type": "predicate", "name": "compaction_warranted", "probability": 0.86}],
                    "model": "gpt-decide", "usage": {"input_tokens": 400, "output_tokens": 1}}),
        )
        .unwrap();
        assert_eq!(a.probability, 0.86);
        assert_eq!(a.served_model.as_deref(), Some("gpt-decide"));
        // Unnamed answers: the first one is ours.
        let b = parse_answer(
            "u",
            &json!({"answers": [{"type": "predicate", "name": null, "probability": 0.1}]}),
        )
        .unwrap();
        assert_eq!(b.probability, 0.1);
        let refused = parse_answer(
            "u",
            &json!({"answers": [{"type": "refusal", "name": "compaction_warranted"}]}),
        )
        .unwrap_err();
        assert!(
            matches!(refused, DecisionError::Refused { .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains("refused"), "{refused}");
        for (body, needle) in [
            (json!({"answers": {"compaction_warranted": 0.5}}), "array"),
            (json!({"answers": []}), "compaction_warranted"),
            (
                json!({"answers": [{"type": "choice", "name": "compaction_warranted"}]}),
                "choice",
            ),
            (
                json!({"answers": [{"type": "predicate", "name": "compaction_warranted"}]}),
                "probability",
            ),
        ] {
            let e = parse_answer("u", &body).unwrap_err();
            assert!(matches!(e, DecisionError::MissingProbability { .. }), "{e}");
            assert!(e.to_string().contains(needle), "{e}");
        }
        let out = parse_answer(
            "u",
            &json!({"answers": [{"type": "predicate", "name": "compaction_warranted", "probability": 1.5}]}),
        );
        assert!(matches!(out, Err(DecisionError::OutOfRange { .. })));
    }
}
