//! One probe exchange shared by the remote adapters: POST, parse, and a debug trace with the
//! latency. Secrets never reach the trace (the key lives only in the request header).

use std::time::Instant;

use compaction_core::DecisionAnswer;
use serde::Serialize;
use serde_json::Value;

use crate::error::DecisionError;
use crate::http::{ApiKey, JsonClient};

/// Posts `body` to `url`, reads the answer with `parse`, and traces the outcome under `label`.
pub(crate) async fn post_and_parse<B: Serialize + ?Sized>(
    client: &JsonClient,
    url: &str,
    key: Option<&ApiKey>,
    body: &B,
    model: &str,
    label: &str,
    parse: fn(&str, &Value) -> Result<DecisionAnswer, DecisionError>,
) -> Result<DecisionAnswer, DecisionError> {
    let started = Instant::now();
    let result = match client.post_json(url, key, body).await {
        Ok(response) => parse(url, &response.body),
        Err(e) => Err(DecisionError::from(e)),
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    match &result {
        Ok(a) => tracing::debug!(%url, %model, latency_ms, p = a.probability, "{label} answered"),
        Err(e) => tracing::debug!(%url, %model, latency_ms, error = %e, "{label} failed"),
    }
    result
}
