//! The chat-completions summarizer against a wiremock server on 127.0.0.1: the exact request,
//! the success path through the citation ledger, and every failure that must write nothing.

mod common;

use std::time::Duration;

use common::{Conversation, MODEL, fixture};
use compaction_core::{AdapterError, Summarizer, SummaryRequest, TokenUsage};
use decision_client::http::{ApiKey, HttpError};
use serde_json::{Value, json};
use summarizer::{
    ChatSummarizer, FactsLedger, KEY_FIGURES_HEADING, SummarizerConfig, SummarizerError,
    WithCitationLedger,
};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "sk-or-v1-test-secret-0123456789";

fn config(server: &MockServer, timeout_secs: u64) -> SummarizerConfig {
    SummarizerConfig {
        base_url: format!("{}/api/v1", server.uri()),
        timeout_secs,
        max_output_tokens: 2048,
        ..SummarizerConfig::default()
    }
}

fn chat(server: &MockServer) -> ChatSummarizer {
    ChatSummarizer::new(&config(server, 10), MODEL, Some(ApiKey::new(SECRET)))
        .expect("client builds")
}

/// The fixture's first three turns, as the engine would ask for them.
fn request() -> SummaryRequest {
    let mut conversation = Conversation::new();
    for turn in fixture::first_block() {
        conversation.add(&turn);
    }
    conversation.request().0
}

fn completion(content: Value, finish_reason: &str) -> Value {
    json!({
        "id": "gen-123",
        "model": "nvidia/nemotron-3.5-lightning:free",
        "choices": [{
            "index": 0,
            "finish_reason": finish_reason,
            "message": {"role": "assistant", "content": content, "refusal": null}
        }],
        "usage": {"prompt_tokens": 4210, "completion_tokens": 320, "total_tokens": 4530}
    })
}

async fn answering(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/chat/completions"))
        .respond_with(template)
        .expect(1)
        .mount(&server)
        .await;
    server
}

/// Runs one call that must fail and returns the typed error; its message never holds the key.
async fn failure(template: ResponseTemplate) -> SummarizerError {
    let server = answering(template).await;
    let err: AdapterError = chat(&server)
        .summarize(&request())
        .await
        .expect_err("this answer is no summary");
    let message = err.to_string();
    assert!(!message.contains(SECRET), "{message}");
    assert!(!format!("{err:?}").contains(SECRET));
    match compaction_core::unclassified(err).downcast::<SummarizerError>() {
        Ok(e) => *e,
        Err(other) => panic!("not a SummarizerError: {other}"),
    }
}

#[tokio::test]
async fn success_sends_the_exact_request_and_returns_summary_usage_and_model() {
    let server = MockServer::start().await;
    let summary_text = "## Comprehensive Conversation Summary\n\
        Silicon anodes fail mechanically (~280 % volume change; Obrovac & Chevrier, 2014).\n\n\
        ## Cited Sources\n\
        - Obrovac, M. N.; Chevrier, V. L. Alloy Negative Electrodes for Li-Ion Batteries. \
        Chem. Rev. 114, 11444–11502 (2014). https://doi.org/10.1021/cr500207g";
    Mock::given(method("POST"))
        .and(path("/api/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {SECRET}").as_str()))
        .and(header("content-type", "application/json"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(completion(json!(summary_text), "stop")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let chat = chat(&server);
    let request = request();
    let summarizer = WithCitationLedger::new(chat.clone());
    let summary = summarizer.summarize(&request).await.expect("success");

    let received = server.received_requests().await.expect("recording is on");
    assert_eq!(received.len(), 1);
    let body: Value = serde_json::from_slice(&received[0].body).expect("JSON body");
    assert_eq!(body, chat.request_body(&request));
    insta::assert_json_snapshot!("chat_request_body", body);

    assert_eq!(summary.usage, Some(TokenUsage::new(Some(4210), Some(320))));
    assert_eq!(
        summary.served_model.as_deref(),
        Some("nvidia/nemotron-3.5-lightning:free")
    );
    // The model's text comes first, unchanged; the ledger restores what it dropped.
    assert!(summary.text.starts_with(summary_text));
    assert!(summary.text.contains("\n## Sources carried forward\n"));
    assert!(summary.text.contains("doi:10.1038/nnano.2014.6"));
    assert!(
        summary
            .text
            .contains("https://doi.org/10.1016/j.joule.2018.12.008")
    );
}

#[test]
fn openrouter_gets_the_slug_without_its_provider_prefix() {
    let config = SummarizerConfig::default();
    let chat = ChatSummarizer::new(&config, MODEL, None).expect("client builds");
    let body = chat.request_body(&request());
    assert_eq!(body["model"], "nvidia/nemotron-3.5-lightning:free");
    assert_eq!(chat.url(), "https://openrouter.ai/api/v1/chat/completions");
}

#[tokio::test]
async fn unauthorized_names_the_endpoint_not_the_key() {
    let err = failure(ResponseTemplate::new(401).set_body_string("{\"error\":\"bad key\"}")).await;
    assert!(
        matches!(
            err,
            SummarizerError::Http(HttpError::Unauthorized { status: 401, .. })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("/api/v1/chat/completions"),
        "{err}"
    );
}

#[tokio::test]
async fn rate_limited_reports_retry_after() {
    let err = failure(ResponseTemplate::new(429).insert_header("retry-after", "30")).await;
    match &err {
        SummarizerError::Http(HttpError::RateLimited { retry_after, .. }) => {
            assert_eq!(retry_after.as_deref(), Some("30"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("retry after 30"), "{err}");
}

#[tokio::test]
async fn server_error_keeps_the_start_of_the_body() {
    let err = failure(ResponseTemplate::new(500).set_body_string("upstream exploded")).await;
    assert!(
        matches!(&err, SummarizerError::Http(HttpError::Status { status: 500, body, .. }) if body == "upstream exploded"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_slow_answer_times_out_at_the_configured_timeout() {
    let server = answering(
        ResponseTemplate::new(200)
            .set_body_json(completion(json!("late"), "stop"))
            .set_delay(Duration::from_secs(5)),
    )
    .await;
    let chat = ChatSummarizer::new(&config(&server, 1), MODEL, Some(ApiKey::new(SECRET)))
        .expect("client builds");
    let err = chat.summarize(&request()).await.expect_err("times out");
    let err = compaction_core::unclassified(err)
        .downcast::<SummarizerError>()
        .expect("typed");
    assert!(
        matches!(
            *err,
            SummarizerError::Http(HttpError::Timeout { timeout, .. }) if timeout == Duration::from_secs(1)
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_malformed() {
    let err = failure(ResponseTemplate::new(200).set_body_string("<html>oops</html>")).await;
    assert!(
        matches!(err, SummarizerError::Http(HttpError::Malformed { .. })),
        "{err:?}"
    );
}

#[tokio::test]
async fn json_without_choices_is_malformed() {
    let err =
        failure(ResponseTemplate::new(200).set_body_json(json!({"id": "x", "choices": []}))).await;
    assert_eq!(
        err.to_string(),
        format!(
            "{}: malformed chat completion: no `choices[0]`",
            match &err {
                SummarizerError::Malformed { url, .. } => url.clone(),
                other => panic!("{other:?}"),
            }
        )
    );
}

/// A generation that failed midway (OpenRouter's `finish_reason: "error"` with partial content
/// and a `choices[0].error`), or that ended for any reason but a natural stop, is no summary:
/// the partial text must never be written.
#[tokio::test]
async fn a_generation_that_did_not_stop_naturally_is_an_error() {
    let mut failed = completion(
        json!("## Comprehensive Conversation Summary\nSilic"),
        "error",
    );
    failed["choices"][0]["error"] = json!({"code": 502, "message": "provider disconnected"});
    let err = failure(ResponseTemplate::new(200).set_body_json(failed)).await;
    assert!(
        matches!(&err, SummarizerError::Upstream { message, .. } if message == "provider disconnected"),
        "{err:?}"
    );
    for reason in ["error", "tool_calls"] {
        let err = failure(ResponseTemplate::new(200).set_body_json(completion(
            json!("## Comprehensive Conversation Summary\nSilic"),
            reason,
        )))
        .await;
        assert!(
            matches!(&err, SummarizerError::Upstream { message, .. } if message.contains(reason)),
            "{err:?}"
        );
    }
}

/// A host that echoes the key in its error object never gets it into the error (`failure`
/// checks Display and Debug).
#[tokio::test]
async fn an_echoed_key_in_an_upstream_error_is_redacted() {
    let body = json!({"error": {"message": format!("invalid key {SECRET} for this model")}});
    let err = failure(ResponseTemplate::new(200).set_body_json(body)).await;
    assert!(
        matches!(&err, SummarizerError::Upstream { message, .. } if message == "invalid key <redacted> for this model"),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_empty_or_whitespace_summary_is_an_error() {
    for content in [json!("  \n\t "), json!(null)] {
        let err =
            failure(ResponseTemplate::new(200).set_body_json(completion(content, "stop"))).await;
        assert!(
            matches!(err, SummarizerError::EmptySummary { .. }),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn a_reply_cut_at_the_token_limit_is_an_error() {
    let err = failure(ResponseTemplate::new(200).set_body_json(completion(
        json!("## Comprehensive Conversation Summary\nSilicon"),
        "length",
    )))
    .await;
    assert!(
        matches!(
            err,
            SummarizerError::Truncated {
                max_tokens: 2048,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("summarizer_max_output_tokens"),
        "{err}"
    );
}

#[tokio::test]
async fn a_refusal_is_an_error() {
    let mut refusal = completion(Value::Null, "stop");
    refusal["choices"][0]["message"]["refusal"] = json!("I can't help with that request.");
    let err = failure(ResponseTemplate::new(200).set_body_json(refusal)).await;
    assert!(
        matches!(&err, SummarizerError::Refused { reason, .. } if reason == "I can't help with that request."),
        "{err:?}"
    );
    let filtered = completion(json!("partial"), "content_filter");
    let err = failure(ResponseTemplate::new(200).set_body_json(filtered)).await;
    assert!(matches!(err, SummarizerError::Refused { .. }), "{err:?}");
}

#[tokio::test]
async fn an_error_object_in_a_200_answer_is_an_error() {
    let body = json!({"error": {"code": 502, "message": "Provider returned error"}});
    let err = failure(ResponseTemplate::new(200).set_body_json(body)).await;
    assert!(
        matches!(&err, SummarizerError::Upstream { message, .. } if message == "Provider returned error"),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_ledger_wrapper_never_turns_an_error_into_a_summary() {
    let server =
        answering(ResponseTemplate::new(200).set_body_json(completion(json!(" "), "stop"))).await;
    let wrapped = WithCitationLedger::new(chat(&server));
    let err = wrapped
        .summarize(&request())
        .await
        .expect_err("empty stays an error");
    assert!(err.to_string().contains("empty summary"), "{err}");
}

/// The fixture's six turns with the first three already folded into `previous`.
fn rolling_request(previous: &str) -> SummaryRequest {
    let mut conversation = Conversation::new();
    for turn in fixture::first_block() {
        conversation.add(&turn);
    }
    let (_, plan) = conversation.request();
    conversation.commit(&plan, previous);
    for turn in fixture::second_block() {
        conversation.add(&turn);
    }
    let request = conversation.request().0;
    assert_eq!(request.previous_summary.as_deref(), Some(previous));
    request
}

const PREVIOUS: &str = "## Comprehensive Conversation Summary\n\
    - Silicon holds 3,579 mAh/g against 372 mAh/g for graphite and swells by 280 % \
    (Obrovac & Chevrier, 2014).\n\
    - Nanowires kept 75 % of capacity; particles below 150 nm do not fracture.\n\
    - VRFB storage costs about 350 USD/kWh at 4 h.\n\n\
    ## Cited Sources\n\
    - Obrovac, M. N.; Chevrier, V. L. Alloy Negative Electrodes for Li-Ion Batteries. \
    Chem. Rev. 114, 11444–11502 (2014). https://doi.org/10.1021/cr500207g";

#[tokio::test]
async fn figures_a_model_dropped_come_back_under_key_figures_carried_forward() {
    let request = request();
    // The model keeps one figure of the answers and none of the others.
    let model_text = "## Comprehensive Conversation Summary\n\
        Silicon anodes swell (Obrovac & Chevrier, 2014) and vanadium flow batteries suit long \
        durations; the details were left out.";
    let server =
        answering(ResponseTemplate::new(200).set_body_json(completion(json!(model_text), "stop")))
            .await;
    let summary = WithCitationLedger::new(chat(&server))
        .summarize(&request)
        .await
        .expect("a short summary that kept the ledger is committed");
    assert!(summary.text.starts_with(model_text), "{}", summary.text);
    let ledger = FactsLedger::from_request(&request);
    assert!(!ledger.figures().is_empty());
    assert!(
        ledger.missing_from(&summary.text).is_empty(),
        "{}",
        summary.text
    );
    let section = summary
        .text
        .split(KEY_FIGURES_HEADING)
        .nth(1)
        .expect("the section is there");
    // Each answer line that held a dropped figure comes back once, verbatim.
    for figure in ledger.figures() {
        assert_eq!(
            section.matches(figure.line.as_str()).count(),
            1,
            "{} / {section}",
            figure.line
        );
    }
    // The citation ledger still runs after it.
    assert!(summary.text.contains("## Sources carried forward"));
    let section = section
        .split("## Sources carried forward")
        .next()
        .unwrap_or_default();
    insta::assert_snapshot!("key_figures_carried_forward", section.trim());
}

#[tokio::test]
async fn a_summary_longer_than_the_text_it_replaces_is_refused() {
    let request = request();
    let replaced = FactsLedger::from_request(&request).replaced_tokens();
    let oversized = format!(
        "## Comprehensive Conversation Summary\n{}",
        "Silicon anodes swell by 280 %. ".repeat(replaced / 7 + 10)
    );
    let err =
        failure(ResponseTemplate::new(200).set_body_json(completion(json!(oversized), "stop")))
            .await;
    match err {
        SummarizerError::Oversized {
            summary_tokens,
            replaced_tokens,
            ..
        } => {
            assert_eq!(replaced_tokens, replaced);
            assert!(summary_tokens > replaced_tokens);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_summary_that_drops_the_previous_summarys_ledger_is_refused() {
    let request = rolling_request(PREVIOUS);
    // A summary of the new turns only: none of the previous summary's figures or citations.
    let model_text = "## Comprehensive Conversation Summary\n\
        Long-context models lose accuracy mid-context by more than 20 % (Liu et al., 2023).";
    let server =
        answering(ResponseTemplate::new(200).set_body_json(completion(json!(model_text), "stop")))
            .await;
    let err = WithCitationLedger::new(chat(&server))
        .summarize(&request)
        .await
        .expect_err("the earlier ledger was dropped");
    let message = err.to_string();
    match compaction_core::unclassified(err)
        .downcast::<SummarizerError>()
        .map(|e| *e)
    {
        Ok(SummarizerError::LedgerDropped { kept, total, .. }) => {
            assert_eq!(kept, 0);
            assert!(total >= 4, "{total}");
            assert!(message.contains("not committed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_rolling_summary_that_keeps_the_previous_figures_is_committed() {
    let request = rolling_request(PREVIOUS);
    let model_text = "## Comprehensive Conversation Summary\n\
        - Silicon: 3,579 mAh/g vs 372 mAh/g, 280 % swelling, 75 % kept by nanowires, no \
        fracture below 150 nm (Obrovac & Chevrier, 2014).\n\
        - VRFB: about 350 USD/kWh at 4 h.\n\
        - Long context: accuracy drops by more than 20 % mid-context (Liu et al., 2023).";
    let server =
        answering(ResponseTemplate::new(200).set_body_json(completion(json!(model_text), "stop")))
            .await;
    let summary = chat(&server).summarize(&request).await.expect("committed");
    assert!(summary.text.starts_with(model_text));
}
