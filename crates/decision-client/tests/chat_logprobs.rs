//! The chat-logprobs judge against wiremock servers on 127.0.0.1.

mod common;

use std::time::{Duration, Instant};

use common::{SECRET, assert_timed_out, render_request, spec_probe};
use compaction_core::{DecisionAnswer, TokenUsage};
use decision_client::http::{ApiKey, HttpError};
use decision_client::{ChatLogprobsJudge, DecisionError};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PATH: &str = "/v1/chat/completions";

fn judge(server: &MockServer, timeout: Duration) -> ChatLogprobsJudge {
    ChatLogprobsJudge::new(
        format!("{}{PATH}", server.uri()),
        "openai/gpt-4.1-nano",
        Some(ApiKey::new(SECRET)),
        timeout,
        10,
    )
    .unwrap()
}

async fn answer(response: ResponseTemplate) -> Result<DecisionAnswer, DecisionError> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .respond_with(response)
        .expect(1)
        .mount(&server)
        .await;
    judge(&server, Duration::from_secs(5))
        .probe(&spec_probe())
        .await
}

/// A chat-completions answer whose first token is `chosen` with alternatives `top`.
fn completion(chosen: &str, chosen_logprob: Value, top: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "model": "openai/gpt-4.1-nano-2025-04-14",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": chosen},
            "logprobs": {"content": [{"token": chosen, "logprob": chosen_logprob, "top_logprobs": top}]},
            "finish_reason": "length"
        }],
        "usage": {"prompt_tokens": 640, "completion_tokens": 1, "total_tokens": 641}
    }))
}

#[tokio::test]
async fn p_is_p_yes_over_p_yes_plus_p_no() {
    let top = json!([
        {"token": "Yes", "logprob": (0.7f64).ln()},
        {"token": " no", "logprob": (0.2f64).ln()},
        {"token": "NO", "logprob": (0.05f64).ln()},
        {"token": "Maybe", "logprob": (0.01f64).ln()}
    ]);
    let a = answer(completion("Yes", json!((0.7f64).ln()), top))
        .await
        .unwrap();
    assert!(
        (a.probability - 0.7 / 0.95).abs() < 1e-9,
        "{}",
        a.probability
    );
    assert_eq!(
        a.served_model.as_deref(),
        Some("openai/gpt-4.1-nano-2025-04-14")
    );
    assert_eq!(a.usage, Some(TokenUsage::new(Some(640), Some(1))));
}

#[tokio::test]
async fn statuses_map_to_typed_errors() {
    let e = answer(ResponseTemplate::new(401)).await.unwrap_err();
    assert!(
        matches!(e.http(), Some(HttpError::Unauthorized { status: 401, .. })),
        "{e}"
    );
    let e = answer(ResponseTemplate::new(429)).await.unwrap_err();
    assert!(
        matches!(
            e.http(),
            Some(HttpError::RateLimited {
                retry_after: None,
                ..
            })
        ),
        "{e}"
    );
    let e = answer(ResponseTemplate::new(500)).await.unwrap_err();
    assert!(
        matches!(e.http(), Some(HttpError::Status { status: 500, .. })),
        "{e}"
    );
}

#[tokio::test]
async fn a_reply_slower_than_the_timeout_fails_in_about_the_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(completion("yes", json!(-0.1), json!([])).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let judge = judge(&server, Duration::from_millis(300));
    let started = Instant::now();
    let e = judge.probe(&spec_probe()).await.unwrap_err();
    assert_timed_out(&e, Duration::from_millis(300), started);
}

#[tokio::test]
async fn malformed_json_missing_logprobs_and_no_yes_no_are_typed() {
    let e = answer(ResponseTemplate::new(200).set_body_string("<html>oops</html>"))
        .await
        .unwrap_err();
    assert!(matches!(e.http(), Some(HttpError::Malformed { .. })), "{e}");
    // A server that ignores `logprobs: true` answers without them: the answer is missing.
    let e = answer(ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": "yes"}, "logprobs": null}]
    })))
    .await
    .unwrap_err();
    assert!(matches!(e, DecisionError::MissingProbability { .. }), "{e}");
    let e = answer(ResponseTemplate::new(200).set_body_json(json!({"choices": []})))
        .await
        .unwrap_err();
    assert!(matches!(e, DecisionError::MissingProbability { .. }), "{e}");
    let e = answer(completion(
        "The",
        json!(-0.3),
        json!([{"token": "The", "logprob": -0.3}, {"token": "Based", "logprob": -1.9}]),
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&e, DecisionError::NoYesNo { tokens, .. } if tokens == &["The", "Based"]),
        "{e}"
    );
}

#[tokio::test]
async fn nan_and_impossible_probabilities_are_typed() {
    // The judge's p comes from logprobs: "NaN" (not valid JSON as a bare number, so sent as a
    // string) is not a number; a logprob of 1.5 is a probability of e^1.5 > 1; a logprob of
    // -0.1 is an ordinary probability of 0.905.
    let e = answer(completion("yes", json!("NaN"), json!([])))
        .await
        .unwrap_err();
    assert!(matches!(e, DecisionError::NotANumber { .. }), "{e}");
    let e = answer(completion(
        "yes",
        json!(1.5),
        json!([{"token": "no", "logprob": -3.0}]),
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(e, DecisionError::OutOfRange { value, .. } if value > 1.0),
        "{e}"
    );
    let a = answer(completion(
        "yes",
        json!(-0.1),
        json!([{"token": "no", "logprob": -2.5}]),
    ))
    .await
    .unwrap();
    let expect = (-0.1f64).exp() / ((-0.1f64).exp() + (-2.5f64).exp());
    assert!((a.probability - expect).abs() < 1e-12);
}

#[tokio::test]
async fn the_exact_request_body_and_headers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .and(header("authorization", format!("Bearer {SECRET}").as_str()))
        .respond_with(completion(
            "no",
            json!(-0.05),
            json!([{"token": "no", "logprob": -0.05}, {"token": "yes", "logprob": -3.0}]),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let a = judge(&server, Duration::from_secs(5))
        .probe(&spec_probe())
        .await
        .unwrap();
    assert!(a.probability < 0.1);
    let received = server.received_requests().await.unwrap();
    let rendered = render_request(&received[0]);
    assert_eq!(rendered["body"]["max_tokens"], 1);
    assert_eq!(rendered["body"]["logprobs"], true);
    insta::assert_json_snapshot!("chat_request", rendered);
}
