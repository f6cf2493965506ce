//! The API key never appears in an error message, `Debug` output or log line, for either
//! HTTP adapter and the factory. One test in its own binary, so that the TRACE-level log
//! capture sees every event (tracing caches callsite interest across test threads).

mod common;

use std::time::Duration;

use common::{LogCapture, SECRET, spec_probe};
use compaction_core::Settings;
use decision_client::http::{ApiKey, HttpError};
use decision_client::{ChatLogprobsJudge, DecisionConfig, DecisionsApi, build_decision_model};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

fn decisions_answer(p: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_json(json!({"answers": {"compaction_warranted": {"noul": p}}}))
}

fn chat_answer(token: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"choices": [{"logprobs": {"content": [
        {"token": token, "logprob": -0.1, "top_logprobs": [{"token": token, "logprob": -0.1}]}
    ]}}]}))
}

fn failures_and_successes(chat: bool) -> Vec<ResponseTemplate> {
    let mut all = vec![
        ResponseTemplate::new(401).set_body_string("invalid key"),
        ResponseTemplate::new(429).insert_header("retry-after", "3"),
        // A host that echoes the request's headers into its error body.
        ResponseTemplate::new(500)
            .set_body_string(format!("boom; you sent Authorization: Bearer {SECRET}")),
        ResponseTemplate::new(200).set_body_string("not json"),
    ];
    if chat {
        all.extend([chat_answer("Hmm"), chat_answer("yes")]);
    } else {
        all.extend([
            decisions_answer(json!("NaN")),
            decisions_answer(json!(1.5)),
            decisions_answer(json!(0.7)),
        ]);
    }
    all
}

#[tokio::test]
async fn the_key_never_reaches_errors_debug_or_logs() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let server = MockServer::start().await;
    let key = || Some(ApiKey::new(SECRET));
    let timeout = Duration::from_secs(5);
    let decisions = DecisionsApi::new(
        format!("{}/api/alpha/decisions", server.uri()),
        "m",
        key(),
        timeout,
    )
    .unwrap();
    let chat = ChatLogprobsJudge::new(
        format!("{}/v1/chat/completions", server.uri()),
        "m",
        key(),
        timeout,
        5,
    )
    .unwrap();
    let mut seen = vec![format!("{decisions:?}"), format!("{chat:?}")];
    let mut failures = 0;
    for is_chat in [false, true] {
        for response in failures_and_successes(is_chat) {
            server.reset().await;
            Mock::given(method("POST"))
                .respond_with(response)
                .mount(&server)
                .await;
            let result = if is_chat {
                chat.probe(&spec_probe()).await
            } else {
                decisions.probe(&spec_probe()).await
            };
            match result {
                Ok(a) => seen.push(format!("{a:?}")),
                Err(e) => {
                    failures += 1;
                    seen.push(format!("{e} | {e:?}"));
                }
            }
        }
    }
    assert_eq!(failures, 11, "every failure case failed");

    // A refused connection: a transport error names the URL only.
    let closed =
        DecisionsApi::new("http://127.0.0.1:9/x", "m", key(), Duration::from_secs(2)).unwrap();
    let e = closed.probe(&spec_probe()).await.unwrap_err();
    assert!(matches!(e.http(), Some(HttpError::Transport { .. })), "{e}");
    seen.push(format!("{e} | {e:?}"));

    // The factory with the key in its (injected) environment.
    let settings = Settings::default().effective().unwrap();
    let env = |name: &str| (name == "OPENROUTER_API_KEY").then(|| SECRET.to_owned());
    let selected = build_decision_model(&settings, &DecisionConfig::default(), env).unwrap();
    seen.push(format!("{selected:?} {}", selected.reason));

    for text in &seen {
        assert!(!text.contains("TOPSECRET"), "{text}");
    }
    let log = logs.text();
    for line in [
        "decisions api failed",
        "decisions api answered",
        "chat judge failed",
        "chat judge answered",
    ] {
        assert!(
            log.contains(line),
            "the adapters log their calls ({line}): {log}"
        );
    }
    assert!(!log.contains("TOPSECRET"), "{log}");
}
