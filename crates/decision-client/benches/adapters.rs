//! Adapter overhead: each HTTP adapter against a loopback wiremock server (the whole probe:
//! serialize, POST, parse), and the offline model on a 500-token decision state.
//!
//! `cargo bench -p adaptive-compaction-decision-client --bench adapters -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use std::time::Duration;

use compaction_core::{CharsPerToken, DecisionState, ProbeRequest, TokenEstimator};
use criterion::{Criterion, criterion_group, criterion_main};
use decision_client::http::ApiKey;
use decision_client::{ChatLogprobsJudge, DecisionsApi, offline};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A research-style decision state of about 500 tokens (by the core's chars/4 estimate).
fn state_500_tokens() -> DecisionState {
    let pair = "**User**: Do silicon-graphite composite anodes suffer from the same lithium plating issues during fast charging?\n**Assistant**: Silicon composites suffer less from plating due to slightly higher working potentials, but face massive particle pulverization from 300% volume expansion and continuous SEI growth.";
    let mut earlier = Vec::new();
    let latest = "**User**: What are the current levelized cost of storage (LCOS) estimates for vanadium redox flow batteries in grid peaking applications?\n**Assistant**: Stack materials and vanadium electrolyte prices dominate capex, resulting in an estimated LCOS between $0.20 and $0.35/kWh.".to_owned();
    while CharsPerToken.estimate(&earlier.join("\n\n")) + CharsPerToken.estimate(&latest) < 500 {
        earlier.push(pair);
    }
    DecisionState {
        earlier_discussion: earlier.join("\n\n"),
        latest_turn: latest,
        turns: Vec::new(),
        older: Vec::new(),
    }
}

fn benches(c: &mut Criterion) {
    let state = state_500_tokens();
    let request = ProbeRequest::new("inception/mercury-decide", state.clone());
    c.bench_function("offline_lexical_500_tokens", |b| {
        b.iter(|| offline::probability(std::hint::black_box(&state)))
    });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = runtime.block_on(MockServer::start());
    runtime.block_on(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "answers": {"compaction_warranted": {"type": "noul", "noul": 0.86}},
                "usage": {"input_tokens": 412, "output_tokens": 0},
                "choices": [{"logprobs": {"content": [{"token": "yes", "logprob": -0.2,
                    "top_logprobs": [{"token": "yes", "logprob": -0.2}, {"token": "no", "logprob": -1.7}]}]}}]
            })))
            .mount(&server),
    );
    let key = Some(ApiKey::new("sk-bench"));
    let decisions = DecisionsApi::new(
        format!("{}/api/alpha/decisions", server.uri()),
        "inception/mercury-decide",
        key.clone(),
        Duration::from_secs(10),
    )
    .expect("adapter");
    let chat = ChatLogprobsJudge::new(
        format!("{}/v1/chat/completions", server.uri()),
        "judge",
        key,
        Duration::from_secs(10),
        10,
    )
    .expect("adapter");
    c.bench_function("decisions_api_loopback", |b| {
        b.iter(|| runtime.block_on(decisions.probe(&request)).expect("probe"))
    });
    c.bench_function("chat_logprobs_loopback", |b| {
        b.iter(|| runtime.block_on(chat.probe(&request)).expect("probe"))
    });
}

criterion_group!(adapters, benches);
criterion_main!(adapters);
