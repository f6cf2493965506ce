//! The OpenAI Decisions adapter against wiremock servers on 127.0.0.1, built through the
//! factory as `decision_adapter: "openai-decisions"`; and the README's recipe for a local
//! System One server, configured exactly as the README says.

mod common;

use common::{SECRET, render_request, spec_probe};
use compaction_core::{Settings, TokenUsage};
use decision_client::openai_decisions::DecisionsRequest;
use decision_client::{AdapterChoice, DecisionConfig, DecisionError, build_decision_model};
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PATH: &str = "/v1/decisions";

fn ok(body: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

/// The adapter as the factory builds it from a settings object pointing at `server`.
fn from_config(server: &MockServer) -> decision_client::Selected {
    let settings = Settings::default().effective().unwrap();
    let config = json!({
        "decision_adapter": "openai-decisions",
        "decision_api_base_url": server.uri(),
        "decision_api_path": PATH,
        "decision_api_key_env": "OPENAI_API_KEY",
    });
    let config = DecisionConfig::from_map(config.as_object().unwrap()).unwrap();
    build_decision_model(&settings, &config, |name| {
        (name == "OPENAI_API_KEY").then(|| SECRET.to_owned())
    })
    .unwrap()
}

#[tokio::test]
async fn the_exact_request_body_and_a_predicate_answer() {
    let server = MockServer::start().await;
    let probe = spec_probe();
    Mock::given(method("POST"))
        .and(path(PATH))
        .and(header("authorization", format!("Bearer {SECRET}").as_str()))
        .and(body_json(
            serde_json::to_value(DecisionsRequest::from_probe(&probe)).unwrap(),
        ))
        .respond_with(ok(json!({
            "answers": [{"type": "predicate", "name": "compaction_warranted", "probability": 0.86}],
            "model": "gpt-decide-2026-11",
            "usage": {"input_tokens": 512, "output_tokens": 1}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let selected = from_config(&server);
    assert_eq!(selected.adapter, AdapterChoice::OpenAiDecisions);
    assert!(
        selected
            .reason
            .starts_with("OpenAI Decisions http://127.0.0.1:"),
        "{}",
        selected.reason
    );
    let answer = selected.model.decide(&probe).await.unwrap();
    assert_eq!(answer.probability, 0.86);
    assert_eq!(answer.served_model.as_deref(), Some("gpt-decide-2026-11"));
    assert_eq!(answer.usage, Some(TokenUsage::new(Some(512), Some(1))));
    assert_eq!(selected.model.info().system, "openai");
    let received = server.received_requests().await.unwrap();
    insta::assert_json_snapshot!("openai_decisions_request", render_request(&received[0]));
}

#[tokio::test]
async fn a_refusal_is_a_failed_probe() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .respond_with(ok(json!({
            "answers": [{"type": "refusal", "name": "compaction_warranted"}],
            "model": "gpt-decide-2026-11"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let error = from_config(&server)
        .model
        .decide(&spec_probe())
        .await
        .unwrap_err();
    // A refusal is a failed probe of kind Refused.
    assert_eq!(
        compaction_core::failure_kind(error.as_ref()),
        compaction_core::FailureKind::Refused
    );
    let error = compaction_core::unclassified(error);
    let typed = error
        .downcast_ref::<DecisionError>()
        .expect("a DecisionError");
    assert!(
        matches!(typed, DecisionError::Refused { question, .. } if question == "compaction_warranted"),
        "{typed}"
    );
    assert!(!error.to_string().contains(SECRET));
}

#[tokio::test]
async fn a_server_error_is_a_failed_probe_that_names_the_status() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let error = from_config(&server)
        .model
        .decide(&spec_probe())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("503"), "{error}");
}

/// The README's "Local System One server" recipe: its JSON block, with the server's address
/// in place of the README's, builds the `decisions` adapter that posts the spec's System One
/// request to `/v1/systemone` with no key.
#[tokio::test]
async fn the_readme_recipe_for_a_local_system_one_server_works() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let marker = "<!-- recipe: local-system-one -->";
    let start = readme.find(marker).expect("the README has the recipe") + marker.len();
    let block = &readme[start..];
    let open = block.find("```json\n").expect("a json block") + "```json\n".len();
    let close = block[open..].find("```").unwrap() + open;
    let recipe: serde_json::Value = serde_json::from_str(&block[open..close]).unwrap();
    let base = recipe["decision_api_base_url"].as_str().unwrap().to_owned();
    assert_eq!(base, "http://127.0.0.1:8080", "the README's address");
    assert_eq!(recipe["decision_api_path"], "/v1/systemone");

    let server = MockServer::start().await;
    let probe = spec_probe();
    Mock::given(method("POST"))
        .and(path("/v1/systemone"))
        .and(body_json(serde_json::to_value(&probe).unwrap()))
        .respond_with(ok(json!({
            "answers": {"compaction_warranted": {"type": "noul", "noul": 0.91}},
            "model": "local-system-one"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let mut config = recipe.as_object().unwrap().clone();
    config.insert("decision_api_base_url".into(), json!(server.uri()));
    let model = recipe["adaptive_compaction_decision_model"]
        .as_str()
        .unwrap();
    let settings = Settings {
        adaptive_compaction_decision_model: model.to_owned(),
        ..Settings::default()
    };
    let settings = settings.effective().unwrap();
    let selected = build_decision_model(
        &settings,
        &DecisionConfig::from_map(&config).unwrap(),
        |_| None,
    )
    .unwrap();
    assert_eq!(selected.adapter, AdapterChoice::Decisions);
    let answer = selected.model.decide(&probe).await.unwrap();
    assert_eq!(answer.probability, 0.91);
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
}
