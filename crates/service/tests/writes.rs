//! Writes that would break a session are refused with the JSON error shape and store nothing;
//! every refusal, 404 and 405 included, carries that shape; a turn a crash left open is closed
//! before the session's next turn. The reference server on 127.0.0.1 over a SQLite file.

mod common;

use std::sync::Arc;

use common::*;
use compaction_core::SessionStore;
use compaction_core::testing::ScriptedDecisionModel;
use reqwest::StatusCode;
use serde_json::{Value, json};
use service::http::{OfflineCoordinator, ServeOptions};

async fn rig() -> Running {
    let (summarizer, _s, _r) = gated();
    start(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
    )
    .await
}

/// Sends `body` as an external write with `if_match`; the status and the error message.
async fn write(rig: &Running, path: &str, if_match: &str, body: Value) -> (StatusCode, String) {
    let r = rig
        .http
        .post(path)
        .header("if-match", if_match)
        .json(&body)
        .send()
        .await
        .expect("send");
    let status = r.status();
    let body: Value = r.json().await.expect("a JSON body");
    if !status.is_success() {
        assert_eq!(body["error"]["status"], status.as_u16(), "{body}");
    }
    (
        status,
        body["error"]["message"].as_str().unwrap_or("").to_owned(),
    )
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs_f64()
}

#[tokio::test]
async fn writes_that_would_break_the_session_are_refused_and_store_nothing() {
    let rig = rig().await;
    let key = rig.create("s").await;
    let events = rig.url(&key, "/events");
    let note = |extra: Value| {
        let mut e = json!({"author": "pipeline", "content": {"role": "model", "parts": [{"text": "a note"}]}});
        if let (Value::Object(e), Value::Object(x)) = (&mut e, extra) {
            e.extend(x);
        }
        e
    };
    let cases: Vec<(&str, &str, Value, StatusCode, &str)> = vec![
        (
            "far-future timestamp",
            "\"0\"",
            note(json!({"timestamp": 1e300})),
            StatusCode::BAD_REQUEST,
            "`timestamp`",
        ),
        (
            "468 s ahead",
            "\"0\"",
            note(json!({"timestamp": now() + 468.0})),
            StatusCode::BAD_REQUEST,
            "`timestamp`",
        ),
        (
            "empty id",
            "\"0\"",
            note(json!({"id": ""})),
            StatusCode::BAD_REQUEST,
            "`id`",
        ),
        (
            "empty author",
            "\"0\"",
            note(json!({"author": " "})),
            StatusCode::BAD_REQUEST,
            "`author`",
        ),
        (
            "NUL in the author",
            "\"0\"",
            note(json!({"author": "a\u{0}b"})),
            StatusCode::BAD_REQUEST,
            "`author`",
        ),
        (
            "unterminated If-Match",
            "\"0",
            note(json!({})),
            StatusCode::BAD_REQUEST,
            "If-Match",
        ),
        (
            "signed If-Match",
            "\"+0\"",
            note(json!({})),
            StatusCode::BAD_REQUEST,
            "If-Match",
        ),
        (
            "weak If-Match",
            "W/\"0\"",
            note(json!({})),
            StatusCode::BAD_REQUEST,
            "If-Match",
        ),
        (
            "bare If-Match",
            "0",
            note(json!({})),
            StatusCode::BAD_REQUEST,
            "If-Match",
        ),
        (
            "a reversed compaction",
            "\"0\"",
            json!({"author": "user", "actions": {"compaction": {"start_timestamp": 20.0, "end_timestamp": 10.0, "compacted_content": {"role": "model", "parts": [{"text": "s"}]}}}}),
            StatusCode::BAD_REQUEST,
            "start_timestamp",
        ),
        (
            "a compaction of events the session does not hold",
            "\"0\"",
            json!({"author": "user", "actions": {"compaction": {"start_timestamp": 10.0, "end_timestamp": 20.0, "compacted_content": {"role": "model", "parts": [{"text": "s"}]}}}}),
            StatusCode::BAD_REQUEST,
            "within the session's events",
        ),
    ];
    for (name, if_match, body, status, names) in cases {
        let (got, message) = write(&rig, &events, if_match, body).await;
        assert_eq!(got, status, "{name}: {message}");
        assert!(message.contains(names), "{name}: {message}");
    }
    assert_eq!(rig.store.load(&key).await.expect("load").events.len(), 0);

    // A reused event id is the client's conflict: 409, nothing written.
    let (ok, _) = write(&rig, &events, "\"0\"", note(json!({"id": "n1"}))).await;
    assert_eq!(ok, StatusCode::CREATED);
    let (dup, message) = write(&rig, &events, "\"1\"", note(json!({"id": "n1"}))).await;
    assert_eq!(dup, StatusCode::CONFLICT, "{message}");
    assert_eq!(rig.store.load(&key).await.expect("load").events.len(), 1);

    // The session still works.
    let turn = rig.chat(&key, "Still fine?").await;
    assert_eq!(done(&turn)["turn"], 1);
    assert!(rig.stop().await);
}

#[tokio::test]
async fn keys_with_control_characters_are_refused() {
    let rig = rig().await;
    for body in [
        json!({"app": "a\u{0}", "user": "u", "id": "s"}),
        json!({"app": "a", "user": "u\u{7}", "id": "s"}),
        json!({"app": "a", "user": "u", "id": "s\n"}),
    ] {
        let r = rig
            .http
            .post(format!("{}/v1/sessions", rig.base))
            .json(&body)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
    }
    let r = rig
        .http
        .get(format!("{}/v1/sessions/a%00/u/s", rig.base))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["error"]["status"], 400);
    assert!(rig.stop().await);
}

#[tokio::test]
async fn every_refusal_has_the_json_shape_and_readyz_reflects_the_store() {
    let rig = rig().await;
    let key = rig.create("s").await;
    for (method, path, status) in [
        (reqwest::Method::DELETE, "/healthz".to_owned(), 405),
        (
            reqwest::Method::PUT,
            rig.url(&key, "/chat").replace(&rig.base, ""),
            405,
        ),
        (reqwest::Method::GET, "/v9/none".to_owned(), 404),
    ] {
        let r = rig
            .http
            .request(method.clone(), format!("{}{path}", rig.base))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), status, "{method} {path}");
        let body: Value = r.json().await.expect("a JSON error body");
        assert_eq!(body["error"]["status"], status, "{method} {path}");
    }
    let options = rig
        .http
        .request(reqwest::Method::OPTIONS, rig.url(&key, "/chat"))
        .send()
        .await
        .expect("send");
    assert_eq!(options.status(), StatusCode::NO_CONTENT);
    assert!(options.headers().contains_key("allow"));
    let ready = rig
        .http
        .get(format!("{}/readyz", rig.base))
        .send()
        .await
        .expect("send");
    assert_eq!(ready.status(), StatusCode::OK);
    assert!(rig.stop().await);
}

/// A query stored with no reply after it (the process was killed mid-stream) is closed by an
/// `interrupted` reply before the next turn: the history alternates again, and the coordinator's
/// prompt sees the old question as unanswered.
#[tokio::test]
async fn a_turn_left_open_by_a_crash_is_closed_before_the_next_turn() {
    let rig = rig().await;
    let key = rig.create("s").await;
    let (status, message) = write(
        &rig,
        &rig.url(&key, "/events"),
        "\"0\"",
        json!({"author": "user", "invocation_id": "cut", "content": {"role": "user", "parts": [{"text": "A question the crash cut off?"}]}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{message}");
    let turn = rig.chat(&key, "The next question?").await;
    let text: String = turn
        .iter()
        .filter(|e| e.event == "delta")
        .map(|e| e.data.as_str())
        .collect();
    assert!(
        text.contains("I read 2 earlier messages"),
        "the stand-in saw the cut question and its interrupted reply: {text}"
    );
    let session = rig.store.load(&key).await.expect("load");
    let authors: Vec<(&str, Option<&str>)> = session
        .events
        .iter()
        .map(|e| (e.author.as_str(), e.error_code.as_deref()))
        .collect();
    assert_eq!(
        authors,
        [
            ("user", None),
            ("coordinator", Some(compaction_core::INTERRUPTED_CODE)),
            ("user", None),
            ("coordinator", None),
        ]
    );
    assert_eq!(session.events[1].invocation_id, "cut");
    // Turns are numbered as recall numbers them: the interrupted turn is turn 1.
    assert_eq!(
        done(&turn)["turn"],
        2,
        "numbered after the interrupted turn"
    );
    assert!(rig.stop().await);
}

/// The refusals that used to come from the framework with a text body (a path that does not
/// decode) and the size limits of the request target and headers carry the JSON shape too.
#[tokio::test]
async fn framework_refusals_and_size_limits_have_the_json_shape() {
    let rig = rig().await;
    let long = "x".repeat(9 * 1024);
    let cases = [
        (format!("{}/v1/sessions/a/%FF%FE/s", rig.base), None, 400),
        (format!("{}/v1/sessions/a/u/{long}", rig.base), None, 414),
        (
            format!("{}/healthz", rig.base),
            Some("y".repeat(40 * 1024)),
            431,
        ),
    ];
    for (url, big_header, status) in cases {
        let mut request = rig.http.get(&url);
        if let Some(value) = big_header {
            request = request.header("x-padding", value);
        }
        let r = request.send().await.expect("send");
        assert_eq!(r.status().as_u16(), status, "{}", &url[..url.len().min(80)]);
        let body: Value = r.json().await.expect("a JSON error body");
        assert_eq!(body["error"]["status"], status);
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    assert!(rig.stop().await);
}
