//! A user-written decision adapter: an in-house classifier service that takes
//! `{"context": …, "turn": …}` and answers `{"score": 0.0..1.0}`, built on the crate's shared
//! HTTP plumbing so that timeouts, status codes and key redaction behave like the built-in
//! adapters.
//!
//! ```text
//! MY_CLASSIFIER_URL=http://localhost:9000/score cargo run -p adaptive-compaction-decision-client --example custom_adapter
//! ```
//! Without `MY_CLASSIFIER_URL` it only prints what it would call.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use async_trait::async_trait;
use compaction_core::{
    AdapterError, DecisionAnswer, DecisionModel, DecisionState, ModelInfo, ProbeRequest,
};
use decision_client::DecisionError;
use decision_client::http::{ApiKey, JsonClient, host_of};
use serde::Serialize;

/// The service's request body.
#[derive(Serialize)]
struct ScoreRequest<'a> {
    context: &'a str,
    turn: &'a str,
}

/// The adapter: one POST per probe, p from `score`.
struct InHouseClassifier {
    client: JsonClient,
    url: String,
    key: Option<ApiKey>,
}

#[async_trait]
impl DecisionModel for InHouseClassifier {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("in-house", host_of(&self.url), "topic-shift-classifier")
    }

    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        let body = ScoreRequest {
            context: &request.state.earlier_discussion,
            turn: &request.state.latest_turn,
        };
        let response = self
            .client
            .post_json(&self.url, self.key.as_ref(), &body)
            .await
            .map_err(DecisionError::from)?;
        let score = response.body.get("score").cloned().unwrap_or_default();
        // Return typed errors; the engine validates p again and fails open on any error.
        match score.as_f64() {
            Some(p) if (0.0..=1.0).contains(&p) => Ok(DecisionAnswer::new(p)),
            Some(p) => Err(DecisionError::OutOfRange {
                url: self.url.clone(),
                value: p,
            }
            .into()),
            None => Err(DecisionError::NotANumber {
                url: self.url.clone(),
                found: score.to_string(),
            }
            .into()),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), AdapterError> {
    let Some(url) = std::env::var("MY_CLASSIFIER_URL").ok() else {
        println!("set MY_CLASSIFIER_URL to call an in-house classifier; nothing called");
        return Ok(());
    };
    let model = InHouseClassifier {
        client: JsonClient::new(Duration::from_secs(10))?,
        url,
        key: ApiKey::from_env("MY_CLASSIFIER_KEY"),
    };
    let request = ProbeRequest::new(
        "topic-shift-classifier",
        DecisionState {
            earlier_discussion: "**User**: What limits perovskite solar cell lifetime?\n**Assistant**: Moisture and ion migration.".to_owned(),
            latest_turn: "**User**: Different topic: how are offshore wind farms decommissioned?\n**Assistant**: Mostly by reverse installation.".to_owned(),
            turns: Vec::new(),
            older: Vec::new(),
        },
    );
    let answer = model.decide(&request).await?;
    println!("{:?}: p = {:.3}", model.info(), answer.probability);
    Ok(())
}
