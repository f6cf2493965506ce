//! The recall routes on 127.0.0.1 over the real SQLite store: the search answers what the
//! store's port answers, a compaction's turns come back verbatim, and bad input is a 400 or
//! 404 JSON error naming the parameter, never an SQL error.

mod common;

use std::sync::Arc;

use common::*;
use compaction_core::testing::{EventFactory, ScriptedDecisionModel};
use compaction_core::{Event, RecallQuery, Revision, SessionKey, SessionStore};
use reqwest::StatusCode;
use serde_json::Value;
use service::http::{OfflineCoordinator, OpenAiCompatible, ServeOptions};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request};

/// Two turns about plating folded into a compaction, then a retained turn.
async fn folded(rig: &Running, key: &SessionKey) -> (Vec<Event>, String) {
    // An hour ago: the server's clock stamps the next turn after them.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let mut f = EventFactory::starting_at((now.as_secs() - 3_600) as f64);
    let mut events = f.conversational_turn("i1", "What is lithium plating?", "Metal on the anode.");
    events.extend(f.research_turn("i2", "plating onset", "Onset at 4C."));
    let (start, end) = (events[0].timestamp, events[events.len() - 1].timestamp);
    let compaction = f.compaction("c1", start, end, "Turns 1–2: anode chemistry.");
    let id = compaction.id.clone();
    events.push(compaction);
    events.extend(f.conversational_turn("i3", "And SEI?", "A passivation layer."));
    for (i, e) in events.iter().enumerate() {
        rig.store
            .append(key, Revision(i as u64), e.clone())
            .await
            .expect("append");
    }
    (events, id)
}

async fn get(rig: &Running, url: String) -> (StatusCode, Value) {
    let r = rig.http.get(url).send().await.expect("get");
    let status = r.status();
    (status, r.json().await.expect("json body"))
}

#[tokio::test]
async fn recall_routes_answer_from_the_store_and_refuse_bad_input_as_json() {
    let (summarizer, _started, _release) = gated();
    let rig = start(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("r").await;
    let (events, id) = folded(&rig, &key).await;

    let (status, body) = get(&rig, rig.url(&key, "/recall?q=Plating&limit=5")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let want = rig
        .store
        .search(&key, &RecallQuery::parse("plating").unwrap(), 5)
        .await
        .unwrap();
    assert_eq!(body["hits"], serde_json::to_value(&want).unwrap());
    assert_eq!(want.len(), 3);
    assert!(
        want.iter()
            .all(|h| h.covered_by.as_deref() == Some(id.as_str()))
    );

    let (status, body) = get(&rig, rig.url(&key, &format!("/compactions/{id}/turns"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let got: Vec<Event> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| serde_json::from_value(e["event"].clone()).unwrap())
        .collect();
    let covered: Vec<Event> = events[..8]
        .iter()
        .filter(|e| e.is_unscoped())
        .cloned()
        .collect();
    assert_eq!(got, covered);
    assert_eq!(body["events"][0]["turn"], 1);

    let bad = [
        (
            "/recall",
            StatusCode::BAD_REQUEST,
            "parameter `q` is missing",
        ),
        (
            "/recall?q=%20",
            StatusCode::BAD_REQUEST,
            "the query is empty",
        ),
        ("/recall?q=%22*-", StatusCode::BAD_REQUEST, "holds no word"),
        (
            "/recall?q=x&limit=0",
            StatusCode::BAD_REQUEST,
            "from 1 to 100",
        ),
        (
            "/recall?q=x&limit=ten",
            StatusCode::BAD_REQUEST,
            "whole number",
        ),
        (
            "/recall?q=x&pipeline=maybe",
            StatusCode::BAD_REQUEST,
            "true or false",
        ),
        (
            "/compactions/nope/turns",
            StatusCode::NOT_FOUND,
            "no compaction event \"nope\"",
        ),
    ];
    let long = format!("/recall?q={}", "a".repeat(501));
    for (tail, status, message) in
        bad.iter()
            .copied()
            .chain([(long.as_str(), StatusCode::BAD_REQUEST, "at most 500")])
    {
        let (got, body) = get(&rig, rig.url(&key, tail)).await;
        assert_eq!(got, status, "{tail}: {body}");
        assert_eq!(body["error"]["status"], status.as_u16());
        let text = body["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{tail}: {text}");
    }
    for q in [
        "%22plating",
        "plating*",
        "NEAR(plating%20onset)",
        "-plating",
    ] {
        let (status, body) = get(&rig, rig.url(&key, &format!("/recall?q={q}"))).await;
        assert_eq!(status, StatusCode::OK, "{q}: {body}");
    }
    let other = SessionKey::new("app", "user", "missing");
    let (status, body) = get(&rig, rig.url(&other, "/recall?q=plating")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // A control character in the session's key is the client's error, on both routes.
    for tail in ["/recall?q=plating", "/compactions/nope/turns"] {
        let url = rig.url(&SessionKey::new("app", "us%01er", "missing"), tail);
        let (status, body) = get(&rig, url).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{tail}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("control character")
        );
    }
    assert!(rig.stop().await);
}

/// A streamed call of `recall_history` with `arguments`, split over three chunks.
fn tool_call_stream(id: &str, arguments: &str) -> String {
    let (a, b) = arguments.split_at(arguments.len() / 2);
    let chunks = [
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id,
            "type": "function", "function": {"name": "recall_history", "arguments": ""}}]}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "function": {"arguments": a}}]}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "function": {"arguments": b}}]}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ];
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

async fn tool_rig(upstream: &MockServer) -> Running {
    let (summarizer, _started, _release) = gated();
    start(
        Arc::new(OpenAiCompatible::new(
            &format!("{}/v1", upstream.uri()),
            "m",
            None,
        )),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
    )
    .await
}

fn body_of(request: &Request) -> Value {
    serde_json::from_slice(&request.body).expect("json body")
}

/// The turn's events after its query: what the coordinator stored.
async fn turn_events(rig: &Running, key: &SessionKey, before: usize) -> Vec<Event> {
    rig.store.load(key).await.expect("load").events[before + 1..].to_vec()
}

#[tokio::test]
async fn a_streamed_tool_call_is_answered_from_the_store_and_the_completion_continues() {
    let upstream = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(sse_template(completion_stream(&["Onset ", "at 4C."], 900)))
        .with_priority(1)
        .mount(&upstream)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse_template(tool_call_stream(
            "call_1",
            r#"{"query":"onset"}"#,
        )))
        .with_priority(5)
        .mount(&upstream)
        .await;
    let rig = tool_rig(&upstream).await;
    let key = rig.create("t").await;
    let (events, _) = folded(&rig, &key).await;

    let sse = rig.chat(&key, "What was the onset again?").await;
    assert_eq!(text_of(&sse), "Onset at 4C.");
    assert_eq!(
        sse.iter().filter(|e| e.event == "tool").count(),
        2,
        "{sse:?}"
    );
    let requests = upstream.received_requests().await.expect("recorded");
    assert_eq!(requests.len(), 2);
    let first = body_of(&requests[0]);
    assert_eq!(first["tools"][0]["function"]["name"], "recall_history");
    let follow_up = body_of(&requests[1]);
    insta::assert_json_snapshot!("recall_follow_up_request", follow_up);

    let stored = turn_events(&rig, &key, events.len()).await;
    let call = stored[0].content.as_ref().unwrap().parts[0]
        .function_call
        .clone()
        .unwrap();
    assert_eq!(
        (call.name.as_str(), call.id.as_deref()),
        ("recall_history", Some("call_1"))
    );
    assert_eq!(call.args, Some(serde_json::json!({"query": "onset"})));
    let response = stored[1].content.as_ref().unwrap().parts[0]
        .function_response
        .clone()
        .unwrap();
    let result = response.response.unwrap()["result"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(result.contains("Onset at 4C."), "{result}");
    assert_eq!(
        follow_up["messages"].as_array().unwrap().last().unwrap()["content"],
        result
    );
    assert_eq!(stored[2].text(), "Onset at 4C.");
    // Recall never finds its own answers.
    let again = rig
        .store
        .search(&key, &RecallQuery::parse("onset").unwrap(), 10)
        .await;
    assert!(again.unwrap().iter().all(|h| h.event_id != stored[1].id));
    assert!(rig.stop().await);
}

#[tokio::test]
async fn a_model_that_keeps_calling_is_stopped_after_three_calls() {
    let upstream = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(|r: &Request| !String::from_utf8_lossy(&r.body).contains("\"tools\""))
        .respond_with(sse_template(completion_stream(&["Done."], 900)))
        .with_priority(1)
        .mount(&upstream)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse_template(tool_call_stream(
            "again",
            r#"{"turns":"1..2"}"#,
        )))
        .with_priority(5)
        .mount(&upstream)
        .await;
    let rig = tool_rig(&upstream).await;
    let key = rig.create("b").await;
    let (events, _) = folded(&rig, &key).await;
    let sse = rig.chat(&key, "Read me the first two turns.").await;
    assert_eq!(text_of(&sse), "Done.");
    let requests = upstream.received_requests().await.expect("recorded");
    assert_eq!(
        requests.len(),
        4,
        "three calls, then a request without tools"
    );
    let stored = turn_events(&rig, &key, events.len()).await;
    assert_eq!(stored.len(), 7, "three calls, three results, the reply");
    let result = |i: usize| {
        let part = &stored[i].content.as_ref().unwrap().parts[0];
        part.function_response.clone().unwrap().response.unwrap()["result"].clone()
    };
    assert!(
        result(1)
            .as_str()
            .unwrap()
            .contains("What is lithium plating?")
    );
    assert!(rig.stop().await);
}

#[tokio::test]
async fn the_offline_stand_in_recalls_a_term_only_folded_turns_hold() {
    let (summarizer, _started, _release) = gated();
    let rig = start(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("o").await;
    let (events, _) = folded(&rig, &key).await;
    let sse = rig.chat(&key, "Remind me about plating.").await;
    let text = text_of(&sse);
    assert!(
        text.contains("I recalled \"plating\" from folded turn"),
        "{text}"
    );
    let tools: Vec<&str> = sse
        .iter()
        .filter(|e| e.event == "tool")
        .map(|e| e.data.as_str())
        .collect();
    assert_eq!(tools.len(), 2, "{sse:?}");
    let stored = turn_events(&rig, &key, events.len()).await;
    let call = stored[0].content.as_ref().unwrap().parts[0]
        .function_call
        .clone()
        .unwrap();
    assert_eq!(call.args, Some(serde_json::json!({"query": "plating"})));
    assert!(
        stored[1].content.as_ref().unwrap().parts[0]
            .function_response
            .is_some()
    );
    // A word the prompt already shows is not recalled.
    let sse = rig.chat(&key, "More on passivation please.").await;
    assert!(sse.iter().all(|e| e.event != "tool"), "{sse:?}");
    assert!(rig.stop().await);
}
