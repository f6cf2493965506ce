//! The Decisions API adapter against wiremock servers on 127.0.0.1.

mod common;

use std::time::{Duration, Instant};

use common::{SECRET, assert_timed_out, render_request, spec_probe};
use compaction_core::{DecisionModel, TokenUsage};
use decision_client::http::{ApiKey, HttpError};
use decision_client::{DecisionError, DecisionsApi};
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PATH: &str = "/api/alpha/decisions";

async fn adapter(server: &MockServer, timeout: Duration) -> DecisionsApi {
    DecisionsApi::new(
        format!("{}{PATH}", server.uri()),
        "inception/mercury-decide",
        Some(ApiKey::new(SECRET)),
        timeout,
    )
    .unwrap()
}

/// Serves `response` once and returns what the adapter made of it.
async fn answer(
    response: ResponseTemplate,
) -> Result<compaction_core::DecisionAnswer, DecisionError> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .respond_with(response)
        .expect(1)
        .mount(&server)
        .await;
    adapter(&server, Duration::from_secs(5))
        .await
        .probe(&spec_probe())
        .await
}

fn ok(body: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

#[tokio::test]
async fn the_noul_shape_gives_p_and_usage() {
    let a = answer(ok(json!({
        "answers": {"compaction_warranted": {"type": "noul", "noul": 0.86}},
        "usage": {"input_tokens": 412, "output_tokens": 0}
    })))
    .await
    .unwrap();
    assert_eq!(a.probability, 0.86);
    assert_eq!(a.usage, Some(TokenUsage::new(Some(412), Some(0))));
}

#[tokio::test]
async fn the_typesafe_shape_gives_p_and_the_served_model() {
    let a = answer(ok(json!({
        "answers": {"compaction_warranted": {"answer": true, "probability": 0.31}},
        "model": "inception/mercury-decide-20260101"
    })))
    .await
    .unwrap();
    assert_eq!(a.probability, 0.31);
    assert_eq!(
        a.served_model.as_deref(),
        Some("inception/mercury-decide-20260101")
    );
}

#[tokio::test]
async fn through_the_port_the_error_downcasts_to_the_typed_one() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let model: Box<dyn DecisionModel> = Box::new(adapter(&server, Duration::from_secs(5)).await);
    let err = model.decide(&spec_probe()).await.unwrap_err();
    let err = compaction_core::unclassified(err);
    let typed = err.downcast_ref::<DecisionError>().unwrap();
    assert!(
        matches!(
            typed.http(),
            Some(HttpError::Unauthorized { status: 401, .. })
        ),
        "{typed}"
    );
    let info = model.info();
    assert_eq!(
        (info.system.as_str(), info.provider.as_str()),
        ("decisions-api", &*server.address().to_string())
    );
}

#[tokio::test]
async fn statuses_map_to_typed_errors() {
    let e = answer(ResponseTemplate::new(401)).await.unwrap_err();
    assert!(
        matches!(e.http(), Some(HttpError::Unauthorized { status: 401, .. })),
        "{e}"
    );
    let e = answer(ResponseTemplate::new(403)).await.unwrap_err();
    assert!(
        matches!(e.http(), Some(HttpError::Unauthorized { status: 403, .. })),
        "{e}"
    );
    let e = answer(ResponseTemplate::new(429).insert_header("retry-after", "7"))
        .await
        .unwrap_err();
    assert!(
        matches!(e.http(), Some(HttpError::RateLimited { retry_after: Some(r), .. }) if r == "7"),
        "{e}"
    );
    let e = answer(ResponseTemplate::new(500).set_body_string("upstream exploded"))
        .await
        .unwrap_err();
    assert!(
        matches!(e.http(), Some(HttpError::Status { status: 500, .. })),
        "{e}"
    );
    assert!(e.to_string().contains("upstream exploded"), "{e}");
}

#[tokio::test]
async fn a_reply_slower_than_the_timeout_fails_in_about_the_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ok(json!({"answers": {"compaction_warranted": {"noul": 0.9}}}))
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let adapter = adapter(&server, Duration::from_millis(300)).await;
    let started = Instant::now();
    let e = adapter.probe(&spec_probe()).await.unwrap_err();
    assert_timed_out(&e, Duration::from_millis(300), started);
}

#[tokio::test]
async fn malformed_json_and_missing_answers_are_typed() {
    let e = answer(ResponseTemplate::new(200).set_body_string("{\"answers\": "))
        .await
        .unwrap_err();
    assert!(matches!(e.http(), Some(HttpError::Malformed { .. })), "{e}");
    let e = answer(ok(json!({"answers": {}}))).await.unwrap_err();
    assert!(matches!(e, DecisionError::MissingProbability { .. }), "{e}");
    let e = answer(ok(
        json!({"answers": {"compaction_warranted": {"answer": true}}}),
    ))
    .await
    .unwrap_err();
    assert!(matches!(e, DecisionError::MissingProbability { .. }), "{e}");
}

#[tokio::test]
async fn nan_and_out_of_range_probabilities_are_typed() {
    // NaN is not valid JSON, so hosts that leak one send it as a string.
    for raw in [json!("NaN"), json!("0.8"), json!(null)] {
        let e = answer(ok(
            json!({"answers": {"compaction_warranted": {"noul": raw}}}),
        ))
        .await
        .unwrap_err();
        assert!(matches!(e, DecisionError::NotANumber { .. }), "{raw}: {e}");
    }
    // A bare NaN token is not JSON at all.
    let e = answer(
        ResponseTemplate::new(200)
            .set_body_string(r#"{"answers":{"compaction_warranted":{"noul":NaN}}}"#),
    )
    .await
    .unwrap_err();
    assert!(matches!(e.http(), Some(HttpError::Malformed { .. })), "{e}");
    for p in [-0.1, 1.5, 1e300] {
        let e = answer(ok(
            json!({"answers": {"compaction_warranted": {"noul": p}}}),
        ))
        .await
        .unwrap_err();
        assert!(
            matches!(e, DecisionError::OutOfRange { value, .. } if value == p),
            "{p}: {e}"
        );
    }
}

#[tokio::test]
async fn the_exact_request_body_and_headers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .and(header("authorization", format!("Bearer {SECRET}").as_str()))
        .and(body_json(serde_json::to_value(spec_probe()).unwrap()))
        .respond_with(ok(
            json!({"answers": {"compaction_warranted": {"noul": 0.86}}}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    adapter(&server, Duration::from_secs(5))
        .await
        .probe(&spec_probe())
        .await
        .unwrap();
    let received = server.received_requests().await.unwrap();
    insta::assert_json_snapshot!("decisions_request", render_request(&received[0]));
}

#[tokio::test]
async fn without_a_key_no_authorization_header_is_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ok(
            json!({"answers": {"compaction_warranted": {"noul": 0.5}}}),
        ))
        .mount(&server)
        .await;
    let adapter = DecisionsApi::new(
        format!("{}/v1/decisions", server.uri()),
        "m",
        None,
        Duration::from_secs(5),
    )
    .unwrap();
    adapter.probe(&spec_probe()).await.unwrap();
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
}
