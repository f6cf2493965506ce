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
use service::http::{OfflineCoordinator, ServeOptions};

/// Two turns about plating folded into a compaction, then a retained turn.
async fn folded(rig: &Running, key: &SessionKey) -> (Vec<Event>, String) {
    let mut f = EventFactory::starting_at(4_000_000_000.0);
    let mut events = f.conversational_turn("i1", "What is lithium plating?", "Metal on the anode.");
    events.extend(f.research_turn("i2", "plating onset", "Onset at 4C."));
    let (start, end) = (events[0].timestamp, events[events.len() - 1].timestamp);
    let compaction = f.compaction("c1", start, end, "Turns 1–2: plating.");
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
    assert!(rig.stop().await);
}
