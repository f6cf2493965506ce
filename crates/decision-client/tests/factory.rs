//! The factory picks the adapter from settings, the decision-client keys and an injected
//! environment, and says why.

use std::collections::HashMap;
use std::time::Duration;

use compaction_core::Settings;
use decision_client::{DecisionAdapter, DecisionConfig, build_decision_model};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn config(v: serde_json::Value) -> DecisionConfig {
    DecisionConfig::from_map(v.as_object().unwrap()).unwrap()
}

/// Without a key and without the embedding model's files (no cache directory in this
/// environment), `auto` is the lexical model and says how to install the files.
#[test]
fn auto_without_a_key_or_model_files_is_offline_and_says_so() {
    let settings = Settings::default().effective().unwrap();
    for blank in [&[][..], &[("OPENROUTER_API_KEY", "   ")][..]] {
        let s = build_decision_model(&settings, &DecisionConfig::default(), env(blank)).unwrap();
        assert_eq!(s.adapter, DecisionAdapter::Offline);
        assert!(
            s.reason
                .starts_with("offline lexical model: OPENROUTER_API_KEY is not set; "),
            "{}",
            s.reason
        );
        let install = if cfg!(feature = "embedding") {
            "cargo xtask fetch-model"
        } else {
            "`embedding` feature"
        };
        assert!(s.reason.contains(install), "{}", s.reason);
        assert_eq!(s.model.info().system, "offline");
    }
}

/// `embedding` needs its files: without them it is an error naming what is missing; `local`
/// falls back to the lexical model.
#[test]
fn embedding_without_its_files_is_an_error_and_local_falls_back() {
    let settings = Settings::default().effective().unwrap();
    let dir = std::env::temp_dir().join(format!("ac-no-model-{}", std::process::id()));
    let err = build_decision_model(
        &settings,
        &config(json!({"decision_adapter": "embedding", "decision_embedding_model_dir": dir})),
        env(&[]),
    )
    .unwrap_err()
    .to_string();
    let expected = if cfg!(feature = "embedding") {
        "config.json: missing"
    } else {
        "`embedding` feature"
    };
    assert!(err.contains(expected), "{err}");
    let s = build_decision_model(
        &settings,
        &config(json!({"decision_adapter": "local", "decision_embedding_model_dir": dir})),
        env(&[("OPENROUTER_API_KEY", "sk-1")]),
    )
    .unwrap();
    assert_eq!(s.adapter, DecisionAdapter::Offline);
    assert!(
        s.reason
            .starts_with("offline lexical model: decision_adapter is \"local\"; "),
        "{}",
        s.reason
    );
}

#[test]
fn auto_with_a_key_is_the_decisions_api_on_openrouter() {
    let settings = Settings::default().effective().unwrap();
    let s = build_decision_model(
        &settings,
        &DecisionConfig::default(),
        env(&[("OPENROUTER_API_KEY", "sk-1")]),
    )
    .unwrap();
    assert_eq!(s.adapter, DecisionAdapter::Decisions);
    assert_eq!(
        s.reason,
        "Decisions API https://openrouter.ai/api/alpha/decisions with model inception/mercury-decide: OPENROUTER_API_KEY is set"
    );
    let info = s.model.info();
    assert_eq!(
        (
            info.system.as_str(),
            info.provider.as_str(),
            info.model.as_str()
        ),
        ("openrouter", "openrouter.ai", "inception/mercury-decide")
    );
}

#[test]
fn explicit_choices_are_honoured() {
    let settings = Settings::default().effective().unwrap();
    let key = env(&[("OPENROUTER_API_KEY", "sk-1")]);
    let s = build_decision_model(
        &settings,
        &config(json!({"decision_adapter": "offline"})),
        &key,
    )
    .unwrap();
    assert_eq!(
        (s.adapter, s.reason.as_str()),
        (
            DecisionAdapter::Offline,
            "offline lexical model (configured)"
        )
    );
    let s = build_decision_model(
        &settings,
        &config(json!({"decision_adapter": "decisions", "decision_api_base_url": "http://localhost:30000", "decision_api_path": "/v1/decisions"})),
        env(&[]),
    )
    .unwrap();
    assert_eq!(s.adapter, DecisionAdapter::Decisions);
    assert!(
        s.reason
            .ends_with("without a key: OPENROUTER_API_KEY is not set"),
        "{}",
        s.reason
    );
    assert_eq!(s.model.info().provider, "localhost:30000");
    let s = build_decision_model(
        &settings,
        &config(json!({"decision_adapter": "chat-logprobs", "decision_chat_base_url": "http://localhost:11434", "decision_chat_model": "qwen3:4b"})),
        env(&[]),
    )
    .unwrap();
    assert_eq!(s.adapter, DecisionAdapter::ChatLogprobs);
    assert_eq!(
        s.reason,
        "chat logprobs judge http://localhost:11434/v1/chat/completions with model qwen3:4b (configured), without a key: OPENROUTER_API_KEY is not set"
    );
    assert_eq!(
        (
            s.model.info().system.as_str(),
            s.model.info().model.as_str()
        ),
        ("openai", "qwen3:4b")
    );
}

#[tokio::test]
async fn the_built_adapter_uses_the_configured_endpoint_key_variable_and_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/decisions"))
        .and(header("authorization", "Bearer sk-inception"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"answers": {"compaction_warranted": {"noul": 0.9}}}))
                .set_delay(Duration::from_millis(600)),
        )
        .mount(&server)
        .await;
    let settings = Settings::default().effective().unwrap();
    let make = |timeout: f64| {
        config(json!({
            "decision_api_base_url": server.uri(),
            "decision_api_path": "/v1/decisions",
            "decision_api_key_env": "INCEPTION_API_KEY",
            "decision_timeout_secs": timeout
        }))
    };
    let vars = env(&[("INCEPTION_API_KEY", "sk-inception")]);
    let request = compaction_core::ProbeRequest::new(
        &settings.decision_model,
        compaction_core::DecisionState {
            earlier_discussion: "**User**: a\n**Assistant**: b".into(),
            latest_turn: "**User**: c\n**Assistant**: d".into(),
            turns: Vec::new(),
            older: Vec::new(),
        },
    );
    let slow = build_decision_model(&settings, &make(0.2), &vars).unwrap();
    assert!(
        slow.model.decide(&request).await.is_err(),
        "0.2 s timeout against a 0.6 s reply"
    );
    let patient = build_decision_model(&settings, &make(5.0), &vars).unwrap();
    assert_eq!(
        patient.model.decide(&request).await.unwrap().probability,
        0.9
    );
}

/// A key pasted where its variable's name belongs reaches neither the config error (Display
/// or Debug) nor, for a config built by hand, any selection reason.
#[test]
fn a_pasted_key_never_reaches_a_config_error_or_a_reason() {
    const SECRETS: [&str; 2] = [
        "sk-or-v1-0123456789abcdefTOPSECRET",
        "gsk_abcdefTOPSECRET0123",
    ];
    let mut seen = Vec::new();
    for key in ["decision_api_key_env", "decision_chat_api_key_env"] {
        for secret in SECRETS {
            let err =
                DecisionConfig::from_map(json!({ key: secret }).as_object().unwrap()).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(key) && text.contains("put it in an environment variable"),
                "{text}"
            );
            seen.push(format!("{err} | {err:?}"));
        }
    }
    let settings = Settings::default().effective().unwrap();
    for secret in SECRETS {
        for adapter in [
            DecisionAdapter::Auto,
            DecisionAdapter::Decisions,
            DecisionAdapter::OpenAiDecisions,
            DecisionAdapter::ChatLogprobs,
        ] {
            let by_hand = DecisionConfig {
                adapter,
                api_key_env: secret.to_owned(),
                chat_api_key_env: secret.to_owned(),
                ..DecisionConfig::default()
            };
            // Unset, and then set under that very name.
            for vars in [env(&[]), env(&[(secret, "sk-real")])] {
                let s = build_decision_model(&settings, &by_hand, vars).unwrap();
                seen.push(format!("{} | {s:?}", s.reason));
            }
        }
    }
    for text in &seen {
        assert!(!text.contains("TOPSECRET"), "{text}");
    }
    assert!(
        seen.iter()
            .any(|t| t.contains("<invalid variable name, not shown> is not set")),
        "{seen:?}"
    );
}
