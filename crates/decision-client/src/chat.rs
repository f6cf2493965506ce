//! The chat-logprobs judge: any OpenAI-compatible `/v1/chat/completions` endpoint (OpenAI,
//! OpenRouter, vLLM, llama.cpp server, Ollama) asked the rubric as a yes/no question.
//!
//! The call generates one token (`max_tokens: 1`, `temperature: 0`) and asks for the first
//! token's alternatives (`logprobs: true`, `top_logprobs` ≥ 5). Then
//! p = P(yes) / (P(yes) + P(no)), summing every alternative that reads `yes` or `no` once
//! whitespace, case and the tokenizer's word-start marks (`Ġ`, `▁`) are ignored. When neither
//! appears the probe fails with [`DecisionError::NoYesNo`]. Both the chat shape
//! (`choices[0].logprobs.content[0].top_logprobs: [{token, logprob}]`) and the legacy
//! completions shape (`choices[0].logprobs.top_logprobs[0]: {token: logprob}`) are read.

use compaction_core::{DecisionAnswer, ProbeRequest};
use serde::Serialize;
use serde_json::Value;

use crate::decisions::answer_with_host_facts;
use crate::error::DecisionError;

/// The judge's system message.
pub const SYSTEM_PROMPT: &str = "You are a strict binary judge for a research assistant's context manager. Read the rubric and the conversation, then answer with exactly one word: yes or no.";

/// A chat-completions request, as sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// The judge model.
    pub model: String,
    /// System and user messages.
    pub messages: Vec<ChatMessage>,
    /// Always 1.
    pub max_tokens: u32,
    /// Always 0.
    pub temperature: f64,
    /// Always true.
    pub logprobs: bool,
    /// Alternatives for the first token.
    pub top_logprobs: u8,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system` or `user`.
    pub role: &'static str,
    /// The text.
    pub content: String,
}

/// The user message: the rubric, the decision state, and the yes/no question.
pub fn judge_prompt(request: &ProbeRequest) -> String {
    format!(
        "{rubric}\n\n## earlier_discussion\n{earlier}\n\n## latest_turn\n{latest}\n\n\
         Is compacting `earlier_discussion` warranted? Answer with exactly one word: yes or no.",
        rubric = request.questions.compaction_warranted.instructions,
        earlier = request.state.earlier_discussion,
        latest = request.state.latest_turn,
    )
}

#[cfg(feature = "http")]
pub use remote::ChatLogprobsJudge;

/// The adapter itself (feature `http`).
#[cfg(feature = "http")]
mod remote {
    use super::*;
    use std::time::Duration;

    use async_trait::async_trait;
    use compaction_core::{AdapterError, DecisionModel, ModelInfo};

    use crate::http::{ApiKey, JsonClient, host_of};

    /// Asks an OpenAI-compatible chat model the rubric and reads P(yes) from the logprobs.
    #[derive(Debug, Clone)]
    pub struct ChatLogprobsJudge {
        client: JsonClient,
        url: String,
        key: Option<ApiKey>,
        top_logprobs: u8,
        info: ModelInfo,
    }

    impl ChatLogprobsJudge {
        /// A judge posting to `url` (base URL and path joined) for `model`. `top_logprobs` is
        /// raised to 5 when lower, as the issue requires at least five alternatives.
        pub fn new(
            url: impl Into<String>,
            model: impl Into<String>,
            key: Option<ApiKey>,
            timeout: Duration,
            top_logprobs: u8,
        ) -> Result<ChatLogprobsJudge, DecisionError> {
            let url = url.into();
            let client =
                JsonClient::new(timeout).map_err(|e| DecisionError::Client(e.to_string()))?;
            Ok(ChatLogprobsJudge {
                client,
                info: ModelInfo::new("openai", host_of(&url), model),
                url,
                key,
                top_logprobs: top_logprobs.max(5),
            })
        }

        /// The body sent for `request`.
        pub fn chat_request(&self, request: &ProbeRequest) -> ChatRequest {
            ChatRequest {
                model: self.info.model.clone(),
                messages: vec![
                    ChatMessage {
                        role: "system",
                        content: SYSTEM_PROMPT.to_owned(),
                    },
                    ChatMessage {
                        role: "user",
                        content: judge_prompt(request),
                    },
                ],
                max_tokens: 1,
                temperature: 0.0,
                logprobs: true,
                top_logprobs: self.top_logprobs,
            }
        }

        /// Sends one probe and reads p, with the crate's typed error.
        pub async fn probe(&self, request: &ProbeRequest) -> Result<DecisionAnswer, DecisionError> {
            let body = self.chat_request(request);
            let (url, key) = (&self.url, self.key.as_ref());
            crate::exchange::post_and_parse(
                &self.client,
                url,
                key,
                &body,
                &body.model,
                "chat judge",
                parse_answer,
            )
            .await
        }
    }

    #[async_trait]
    impl DecisionModel for ChatLogprobsJudge {
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

/// Normalizes a token for the yes/no match.
fn normalize(token: &str) -> String {
    token
        .trim()
        .trim_start_matches(['Ġ', '▁'])
        .trim()
        .to_lowercase()
}

/// The first token's alternatives as (token, raw logprob), in either response shape.
fn alternatives(url: &str, body: &Value) -> Result<Vec<(String, Value)>, DecisionError> {
    let missing = |detail: &str| DecisionError::MissingProbability {
        url: url.to_owned(),
        detail: detail.to_owned(),
    };
    let logprobs = body
        .pointer("/choices/0/logprobs")
        .filter(|v| !v.is_null())
        .ok_or_else(|| {
            missing("no `choices[0].logprobs` (does the server support `logprobs: true`?)")
        })?;
    let entry = |v: &Value| -> Option<(String, Value)> {
        let token = v.get("token")?.as_str()?.to_owned();
        Some((token, v.get("logprob").cloned().unwrap_or(Value::Null)))
    };
    let mut out = Vec::new();
    if let Some(first) = logprobs.pointer("/content/0") {
        out.extend(entry(first));
        let top = first.get("top_logprobs").and_then(Value::as_array);
        out.extend(top.into_iter().flatten().filter_map(entry));
    } else if let Some(map) = logprobs
        .pointer("/top_logprobs/0")
        .and_then(Value::as_object)
    {
        out.extend(map.iter().map(|(t, lp)| (t.clone(), lp.clone())));
    } else {
        return Err(missing(
            "neither `logprobs.content[0]` nor `logprobs.top_logprobs[0]` is present",
        ));
    }
    Ok(out)
}

fn log_sum_exp(values: &[f64]) -> Option<f64> {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return None;
    }
    Some(max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln())
}

/// The logprobs of the alternatives reading `word`. A `yes`/`no` alternative whose logprob is
/// not a number is [`DecisionError::NotANumber`]; one above 0 (a probability above 1) is
/// [`DecisionError::OutOfRange`]. A logprob of `-inf` (or `null`) is probability 0.
fn logprobs_of(url: &str, alts: &[(String, Value)], word: &str) -> Result<Vec<f64>, DecisionError> {
    let mut out = Vec::new();
    for (token, raw) in alts.iter().filter(|(t, _)| normalize(t) == word) {
        match raw.as_f64() {
            // Servers round; allow a hair above zero.
            Some(lp) if lp <= 1e-6 => out.push(lp.min(0.0)),
            Some(lp) => {
                return Err(DecisionError::OutOfRange {
                    url: url.to_owned(),
                    value: lp.exp(),
                });
            }
            None if raw.is_null() => {}
            None => {
                return Err(DecisionError::NotANumber {
                    url: url.to_owned(),
                    found: format!("logprob of {token:?} = {raw}"),
                });
            }
        }
    }
    Ok(out)
}

/// Reads p = P(yes) / (P(yes) + P(no)) from a chat-completions answer.
pub fn parse_answer(url: &str, body: &Value) -> Result<DecisionAnswer, DecisionError> {
    let mut alts = alternatives(url, body)?;
    // The chosen token usually appears among the alternatives too: count each token once.
    let mut seen = std::collections::HashSet::new();
    alts.retain(|(t, _)| seen.insert(t.clone()));
    let yes = log_sum_exp(&logprobs_of(url, &alts, "yes")?);
    let no = log_sum_exp(&logprobs_of(url, &alts, "no")?);
    let p = match (yes, no) {
        (Some(y), Some(n)) => 1.0 / (1.0 + (n - y).exp()),
        (Some(_), None) => 1.0,
        (None, Some(_)) => 0.0,
        (None, None) => {
            return Err(DecisionError::NoYesNo {
                url: url.to_owned(),
                tokens: alts.into_iter().map(|(t, _)| t).collect(),
            });
        }
    };
    if !(0.0..=1.0).contains(&p) {
        return Err(DecisionError::OutOfRange {
            url: url.to_owned(),
            value: p,
        });
    }
    Ok(answer_with_host_facts(p, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(top: Value) -> Value {
        json!({"model":"m","choices":[{"logprobs":{"content":[{"token":"Yes","logprob":(0.6f64).ln(),"top_logprobs":top}]}}],
               "usage":{"prompt_tokens":600,"completion_tokens":1}})
    }

    #[test]
    fn p_is_yes_over_yes_plus_no_ignoring_case_space_and_word_marks() {
        let body = chat(json!([
            {"token":"Yes","logprob":(0.6f64).ln()},
            {"token":" yes","logprob":(0.1f64).ln()},
            {"token":"ĠNo","logprob":(0.2f64).ln()},
            {"token":"Maybe","logprob":(0.05f64).ln()}
        ]));
        let a = parse_answer("u", &body).unwrap();
        assert!(
            (a.probability - 0.7 / 0.9).abs() < 1e-12,
            "{}",
            a.probability
        );
        assert_eq!(a.usage.and_then(|u| u.input), Some(600));
    }

    #[test]
    fn legacy_shape_and_one_sided_answers() {
        let legacy = json!({"choices":[{"logprobs":{"top_logprobs":[{"no":-0.1,"yes":-2.4}]}}]});
        let p = parse_answer("u", &legacy).unwrap().probability;
        let expect = (-2.4f64).exp() / ((-2.4f64).exp() + (-0.1f64).exp());
        assert!((p - expect).abs() < 1e-12);
        let only_no = json!({"choices":[{"logprobs":{"content":[{"token":"no","logprob":-0.01,"top_logprobs":[]}]}}]});
        assert_eq!(parse_answer("u", &only_no).unwrap().probability, 0.0);
    }

    #[test]
    fn neither_yes_nor_no_nor_logprobs_is_an_error() {
        let maybe = json!({"choices":[{"logprobs":{"content":[{"token":"Maybe","logprob":-0.1,
            "top_logprobs":[{"token":"Maybe","logprob":-0.1},{"token":"Perhaps","logprob":-2.5}]}]}}]});
        let e = parse_answer("u", &maybe).unwrap_err();
        assert!(
            matches!(&e, DecisionError::NoYesNo { tokens, .. } if tokens.contains(&"Maybe".to_owned())),
            "{e}"
        );
        let none = json!({"choices":[{"message":{"content":"yes"},"logprobs":null}]});
        assert!(matches!(
            parse_answer("u", &none),
            Err(DecisionError::MissingProbability { .. })
        ));
    }
}
