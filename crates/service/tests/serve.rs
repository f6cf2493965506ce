//! The reference service on 127.0.0.1 with real parts: the async SQLite store in a temp dir,
//! wiremock upstreams for the coordinator, the engine with the lanes. Order is checked with
//! channels and the mocks' received requests, never with sleeps.

mod common;

use std::sync::Arc;

use common::*;
use compaction_core::testing::ScriptedDecisionModel;
use compaction_core::{
    AdapterError, ModelInfo, SessionStore, assemble_context, async_trait, compaction_history,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use service::http::{
    Coordinator, CoordinatorRequest, OfflineCoordinator, OpenAiCompatible, ReplyChunk, ReplyStream,
    ServeOptions,
};
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use wiremock::ResponseTemplate;
/// A turn streams deltas and one `done`; its events are stored as the coordinator's; the
/// evaluation's outcome is published on the events stream and kept for `/outcomes`.
#[tokio::test]
async fn a_turn_streams_then_its_evaluation_is_published() {
    let decision = Arc::new(ScriptedDecisionModel::constant(0.1));
    let (summarizer, _started, _release) = gated();
    let rig = start(
        Arc::new(OfflineCoordinator::default()),
        decision,
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("s").await;
    let events_stream = rig
        .http
        .get(rig.url(&key, "/events"))
        .send()
        .await
        .expect("events");
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_sse(events_stream, move |e| {
        let _ = seen_tx.send(e.clone());
    }));
    let events = rig.chat(&key, "What limits fast charging?").await;
    assert!(events.iter().filter(|e| e.event == "delta").count() > 3);
    assert_eq!(events.iter().filter(|e| e.event == "done").count(), 1);
    let done = done(&events);
    assert_eq!(done["turn"], 1);
    assert!(done["prompt_tokens"].as_u64().expect("tokens") > 0);
    assert!(text_of(&events).contains("What limits fast charging?"));
    let compaction = seen_rx.recv().await.expect("compaction event");
    assert_eq!(compaction.event, "compaction");
    let report: Value = serde_json::from_str(&compaction.data).expect("report");
    assert_eq!(report["outcome"]["outcome"], "fast-exit");
    let outcomes: Value = rig
        .http
        .get(rig.url(&key, "/outcomes"))
        .send()
        .await
        .expect("outcomes")
        .json()
        .await
        .expect("json");
    assert_eq!(outcomes.as_array().map(Vec::len), Some(1));
    let session = rig.store.load(&key).await.expect("load");
    assert_eq!(session.events.len(), 2);
    assert_eq!(session.events[1].author, "coordinator");
    assert_eq!(
        session.events[1].prompt_tokens(),
        done["prompt_tokens"].as_u64()
    );
    assert!(rig.stop().await, "shutdown drained");
    // Shutdown ends the events stream.
    let _ = reader.await.expect("reader");
}

/// The stream closes while the evaluation is held; turn N+1 waits for it and its upstream
/// request holds the new summary and exactly the K retained turns, never the folded one.
#[tokio::test]
async fn the_next_turn_waits_and_is_sent_the_compacted_context() {
    let upstream =
        coordinator_mock(sse_template(completion_stream(&["An ", "answer."], 20_000))).await;
    let (summarizer, mut started, release) = gated();
    let rig = start(
        Arc::new(OpenAiCompatible::new(
            &format!("{}/v1", upstream.uri()),
            "coordinator-model",
            None,
        )),
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer.clone(),
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("s").await;
    for n in 1..=2 {
        let events = rig.chat(&key, &format!("QUESTION-{n}")).await;
        assert_eq!(done(&events)["turn"], n);
    }
    // Turn 3 completes the envelope; its stream ends (EOF) while the summarizer has not
    // answered: the evaluation never holds the stream.
    let events = rig.chat(&key, "QUESTION-3").await;
    assert_eq!(done(&events)["prompt_tokens"], 20_000);
    assert_eq!(
        started.recv().await,
        Some(1),
        "the evaluation ran after the stream"
    );
    // Turn 4 is submitted while turn 3's compaction runs: it waits.
    let next = {
        let (http, url) = (rig.http.clone(), rig.url(&key, "/chat"));
        tokio::spawn(async move {
            let r = http
                .post(url)
                .json(&json!({"message": "QUESTION-4"}))
                .send()
                .await
                .expect("chat");
            read_sse(r, |_| {}).await
        })
    };
    // Released only once turn 4 is known to wait in its lane.
    while rig.server.lanes().waiting_turns() == 0 {
        tokio::task::yield_now().await;
    }
    release.add_permits(1);
    let events = next.await.expect("join");
    let done4 = done(&events);
    assert_eq!(done4["lane_wait"], "waited", "{done4}");
    let received = upstream.received_requests().await.expect("recorded");
    assert_eq!(received.len(), 4);
    let body: Value = serde_json::from_slice(&received[3].body).expect("json");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    let messages: Vec<(String, String)> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                m["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let rendered: Vec<String> = messages
        .iter()
        .map(|(r, c)| format!("{r}: {}", c.replace('\n', " | ")))
        .collect();
    insta::assert_json_snapshot!("turn_4_coordinator_messages", rendered);
    assert!(messages[0].1.contains("ROLLING-SUMMARY-1"));
    let all: String = messages.iter().map(|(_, c)| c.as_str()).collect();
    assert!(!all.contains("QUESTION-1"), "the folded turn is never sent");
    assert_eq!(
        messages.iter().filter(|(r, _)| r == "user").count(),
        3,
        "K = 2 retained questions plus the new one"
    );
    assert!(rig.stop().await);
}

/// A stale `If-Match` answers 409 naming both revisions and writes nothing; a REST write
/// during a compaction drops it as stale, reports it, and the history stays consistent.
#[tokio::test]
async fn rest_writes_use_if_match_and_make_a_racing_compaction_stale() {
    let (summarizer, mut started, release) = gated();
    let rig = start(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("s").await;
    let event =
        json!({"author": "user", "content": {"role": "user", "parts": [{"text": "a note"}]}});
    let stale = rig
        .http
        .post(rig.url(&key, "/events"))
        .header("If-Match", "\"99\"")
        .json(&event)
        .send()
        .await
        .expect("post");
    assert_eq!(stale.status(), StatusCode::CONFLICT);
    let body: Value = stale.json().await.expect("json");
    insta::assert_json_snapshot!("stale_if_match", body);
    assert_eq!(rig.store.load(&key).await.expect("load").events.len(), 0);

    // Subscribed before the first turn: each turn's evaluation reports once, and turn 2's
    // may still be running when its stream has ended, so both are read before turn 3.
    let mut reports = rig.server.lanes().subscribe();
    for n in 1..=2 {
        let _ = rig.chat(&key, &format!("Question {n}?")).await;
    }
    for _ in 1..=2 {
        let r = reports.recv().await.expect("report");
        assert_eq!(r.outcomes[0].label(), "fast-exit", "{r:?}");
    }
    let _ = rig.chat(&key, "Question 3?").await;
    assert_eq!(started.recv().await, Some(1));
    // The external writer reads the ETag and writes while the summary is being written.
    let etag = rig
        .http
        .get(rig.url(&key, ""))
        .send()
        .await
        .expect("get")
        .headers()
        .get("etag")
        .expect("etag")
        .to_str()
        .expect("ascii")
        .to_owned();
    let written = rig
        .http
        .post(rig.url(&key, "/events"))
        .header("If-Match", etag)
        .json(&event)
        .send()
        .await
        .expect("post");
    assert_eq!(written.status(), StatusCode::CREATED);
    release.add_permits(2);
    let report = loop {
        let r = reports.recv().await.expect("report");
        if r.turn_id.is_empty() || r.outcomes.len() > 1 || r.key == key {
            break r;
        }
    };
    assert_eq!(report.outcomes[0].label(), "stale-dropped");
    let session = rig.store.load(&key).await.expect("load");
    assert_eq!(
        rig.store.compaction_history(&key).await.expect("history"),
        compaction_history(&session.events)
    );
    assert_eq!(
        rig.store.load_context(&key).await.expect("context"),
        assemble_context(&session.events)
    );
    assert!(rig.stop().await);
}

/// A coordinator that sends one delta, then waits until the test lets it go on.
struct Hanging {
    hold: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Coordinator for Hanging {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "hanging")
    }
    async fn stream(&self, _: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        let (tx, rx) = mpsc::channel(4);
        let hold = self.hold.clone();
        tokio::spawn(async move {
            let _ = tx.send(Ok(ReplyChunk::Delta("Half an ".into()))).await;
            hold.notified().await;
            let _ = tx.send(Ok(ReplyChunk::Delta("answer.".into()))).await;
        });
        Ok(rx)
    }
}

/// A chat sent while the session's previous reply still streams waits at most
/// `max_turn_wait`, then answers 409 and stores nothing; the running turn is unaffected.
#[tokio::test]
async fn a_chat_while_the_previous_reply_streams_is_refused_after_the_bound() {
    let hold = Arc::new(tokio::sync::Notify::new());
    let (summarizer, _s, _r) = gated();
    let rig = start_traced(
        Arc::new(Hanging { hold: hold.clone() }),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
        None,
        lanes().max_turn_wait(std::time::Duration::from_millis(200)),
    )
    .await;
    let key = rig.create("s").await;
    let first = rig
        .http
        .post(rig.url(&key, "/chat"))
        .json(&json!({"message": "Tell me everything."}))
        .send()
        .await
        .expect("chat");
    let mut body = first.bytes_stream();
    let chunk = body.next().await.expect("first chunk").expect("bytes");
    assert!(String::from_utf8_lossy(&chunk).contains("Half an"));
    let second = rig
        .http
        .post(rig.url(&key, "/chat"))
        .json(&json!({"message": "And another thing?"}))
        .send()
        .await
        .expect("chat");
    assert_eq!(second.status(), StatusCode::CONFLICT);
    let error: Value = second.json().await.expect("json");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("still running")),
        "{error}"
    );
    let session = rig.store.load(&key).await.expect("load");
    assert!(
        session
            .events
            .iter()
            .all(|e| e.text() != "And another thing?"),
        "the refused message was not stored"
    );
    hold.notify_waiters();
    drop(body);
    assert!(rig.stop().await);
}

/// A client gone mid-stream leaves the partial reply stored as partial and no evaluation.
#[tokio::test]
async fn a_client_gone_mid_stream_leaves_a_partial_reply() {
    let hold = Arc::new(tokio::sync::Notify::new());
    let decision = Arc::new(ScriptedDecisionModel::constant(0.9));
    let (summarizer, _s, _r) = gated();
    let rig = start(
        Arc::new(Hanging { hold: hold.clone() }),
        decision.clone(),
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("s").await;
    let response = rig
        .http
        .post(rig.url(&key, "/chat"))
        .json(&json!({"message": "Tell me everything."}))
        .send()
        .await
        .expect("chat");
    let mut body = response.bytes_stream();
    let first = body.next().await.expect("first chunk");
    assert!(String::from_utf8_lossy(&first.expect("bytes")).contains("Half an"));
    drop(body);
    // The server sees the client gone and stores what was streamed.
    let mut reports = rig.server.lanes().subscribe();
    let partial = loop {
        let session = rig.store.load(&key).await.expect("load");
        if let Some(e) = session.events.iter().find(|e| e.is_partial()) {
            break e.clone();
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(partial.text(), "Half an ");
    hold.notify_waiters();
    assert_eq!(decision.calls(), 0);
    assert!(
        reports.try_recv().is_err(),
        "no evaluation of a partial turn"
    );
    assert!(rig.stop().await);
}

/// An upstream failure answers an SSE `error`, stores the turn as errored, evaluates nothing.
#[tokio::test]
async fn an_upstream_failure_is_an_error_event_and_an_errored_turn() {
    let upstream = coordinator_mock(ResponseTemplate::new(500)).await;
    let (summarizer, _s, _r) = gated();
    let rig = start(
        Arc::new(OpenAiCompatible::new(
            &format!("{}/v1", upstream.uri()),
            "m",
            Some("sk-secret-key-123".into()),
        )),
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("s").await;
    let events = rig.chat(&key, "Hello?").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].event, "error");
    let data: Value = serde_json::from_str(&events[0].data).expect("json");
    let message = data["message"].as_str().expect("message");
    assert!(!message.contains("sk-secret"), "{message}");
    let message = message.replace(&upstream.uri(), "http://UPSTREAM");
    insta::assert_snapshot!("upstream_error_message", message);
    let session = rig.store.load(&key).await.expect("load");
    assert_eq!(session.events.len(), 2);
    assert_eq!(
        session.events[1].error_code.as_deref(),
        Some("UPSTREAM_ERROR")
    );
    let outcomes: Value = rig
        .http
        .get(rig.url(&key, "/outcomes"))
        .send()
        .await
        .expect("outcomes")
        .json()
        .await
        .expect("json");
    assert_eq!(outcomes, json!([]));
    assert!(rig.stop().await);
}

/// Bad input: each answer's status and body.
#[tokio::test]
async fn bad_input_gets_a_status_and_a_message_naming_the_field() {
    let (summarizer, _s, _r) = gated();
    let rig = start(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default().max_message_bytes(1024),
    )
    .await;
    let key = rig.create("s").await;
    let chat = rig.url(&key, "/chat");
    let cases: Vec<(&str, reqwest::RequestBuilder)> = vec![
        (
            "malformed json",
            rig.http
                .post(&chat)
                .header("content-type", "application/json")
                .body("{\"message\": "),
        ),
        (
            "missing field",
            rig.http.post(&chat).json(&json!({"text": "hi"})),
        ),
        (
            "wrong type",
            rig.http.post(&chat).json(&json!({"message": 3})),
        ),
        (
            "empty message",
            rig.http.post(&chat).json(&json!({"message": "  "})),
        ),
        (
            "unknown field",
            rig.http.post(&chat).json(&json!({"message": "hi", "x": 1})),
        ),
        (
            "message too large",
            rig.http
                .post(&chat)
                .json(&json!({"message": "x".repeat(2048)})),
        ),
        (
            "unknown session",
            rig.http
                .post(format!("{}/v1/sessions/app/user/nope/chat", rig.base))
                .json(&json!({"message": "hi"})),
        ),
        (
            "session without app",
            rig.http
                .post(format!("{}/v1/sessions", rig.base))
                .json(&json!({"user": "u"})),
        ),
        (
            "duplicate session",
            rig.http
                .post(format!("{}/v1/sessions", rig.base))
                .json(&json!({"app": "app", "user": "user", "id": "s"})),
        ),
        (
            "write without If-Match",
            rig.http
                .post(rig.url(&key, "/events"))
                .json(&json!({"author": "user"})),
        ),
        (
            "write with a bad If-Match",
            rig.http
                .post(rig.url(&key, "/events"))
                .header("If-Match", "latest")
                .json(&json!({"author": "user"})),
        ),
        (
            "no such route",
            rig.http.get(format!("{}/v2/nothing", rig.base)),
        ),
    ];
    let mut answers = Vec::new();
    for (name, request) in cases {
        let r = request.send().await.expect("send");
        let status = r.status().as_u16();
        let body: Value = r.json().await.expect("json body");
        assert_eq!(body["error"]["status"], status, "{name}");
        answers.push(json!({ "case": name, "status": status, "body": body }));
    }
    insta::assert_json_snapshot!("bad_input_answers", answers);
    assert_eq!(rig.store.load(&key).await.expect("load").events.len(), 0);
    assert!(rig.stop().await);
}

/// 100 sessions × 12 turns at once through the offline stand-in: no error; every session has
/// one live summary and a history the store and the core agree on; lanes freed afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_of_twelve_turns_run_concurrently() {
    let dir = tempfile::tempdir().expect("dir");
    let settings = settings();
    let offline = summarizer::build_summarizer(
        &settings.clone().effective().expect("settings"),
        &summarizer::SummarizerConfig::default(),
        |_| None,
    )
    .expect("offline summarizer");
    drop(dir);
    let rig = start(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        offline.summarizer,
        ServeOptions::default(),
    )
    .await;
    let mut reports = rig.server.lanes().subscribe();
    let counter = tokio::spawn(async move {
        let mut n = 0;
        while n < 1200 {
            match reports.recv().await {
                Ok(r) => {
                    assert!(r.deadline_passed.is_none());
                    n += 1;
                }
                Err(e) => panic!("reports: {e}"),
            }
        }
        n
    });
    let mut sessions = Vec::new();
    for i in 0..100 {
        let key = rig.create(&format!("load-{i}")).await;
        let (http, url) = (rig.http.clone(), rig.url(&key, "/chat"));
        sessions.push(tokio::spawn(async move {
            for t in 1..=12 {
                let r = http
                    .post(&url)
                    .json(&json!({"message": format!("Question {t} of session {i}?")}))
                    .send()
                    .await
                    .expect("chat");
                assert_eq!(r.status(), StatusCode::OK);
                let events = read_sse(r, |_| {}).await;
                assert_eq!(done(&events)["turn"], t, "{events:?}");
            }
            key
        }));
    }
    let mut keys = Vec::new();
    for s in sessions {
        keys.push(s.await.expect("session"));
    }
    assert_eq!(counter.await.expect("reports"), 1200);
    for key in &keys {
        let session = rig.store.load(key).await.expect("load");
        let context = rig.store.load_context(key).await.expect("context");
        assert!(context.summary().is_some(), "{key} has a live summary");
        assert_eq!(context, assemble_context(&session.events));
        let history = rig.store.compaction_history(key).await.expect("history");
        assert_eq!(history, compaction_history(&session.events));
        assert_eq!(history.iter().filter(|c| !c.subsumed).count(), 1, "{key}");
    }
    assert_eq!(rig.server.lanes().active_lanes(), 0, "lanes freed");
    assert!(rig.stop().await);
}

/// A coordinator that streams one delta, then fails.
struct FailsMidStream;

#[async_trait]
impl Coordinator for FailsMidStream {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "fails-mid-stream")
    }
    async fn stream(&self, _: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        let (tx, rx) = mpsc::channel(4);
        tx.send(Ok(ReplyChunk::Delta("Half an ".into())))
            .await
            .expect("room");
        tx.send(Err("connection reset by the upstream".into()))
            .await
            .expect("room");
        Ok(rx)
    }
}

/// An upstream failure after the first delta: the client saw the delta, then gets an SSE
/// `error`; the turn is stored as errored (it never counts as completed) and nothing is
/// evaluated.
#[tokio::test]
async fn an_upstream_failure_mid_stream_is_an_error_event_and_an_errored_turn() {
    let decision = Arc::new(ScriptedDecisionModel::constant(0.9));
    let (summarizer, _s, _r) = gated();
    let rig = start(
        Arc::new(FailsMidStream),
        decision.clone(),
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("s").await;
    let mut reports = rig.server.lanes().subscribe();
    let events = rig.chat(&key, "Tell me everything.").await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["delta", "error"], "{events:?}");
    assert_eq!(events[0].data, "Half an ");
    let data: Value = serde_json::from_str(&events[1].data).expect("json");
    assert_eq!(
        data["message"],
        "coordinator failed: connection reset by the upstream"
    );
    assert_eq!(data["stored"], true);
    let session = rig.store.load(&key).await.expect("load");
    assert_eq!(session.events.len(), 2, "{:?}", session.events);
    assert_eq!(
        session.events[1].error_code.as_deref(),
        Some("UPSTREAM_ERROR")
    );
    let gate = rig.store.gate_snapshot(&key).await.expect("gate");
    assert_eq!(gate.input.completed_turns_since_compaction, 0);
    assert!(rig.stop().await);
    assert_eq!(decision.calls(), 0);
    assert!(
        reports.try_recv().is_err(),
        "no evaluation of an errored turn"
    );
}

/// Another writer (an ADK pipeline, a second process) appends while a reply streams, and its
/// event is stamped later than the server stamps the reply: the reply is stamped again after
/// it and stored, the turn ends with `done`, never a 400 that blames the client.
#[tokio::test]
async fn a_concurrent_writer_with_a_later_timestamp_never_fails_the_turn() {
    struct Racing {
        store: std::sync::OnceLock<(Arc<session_store::SqliteStore>, compaction_core::SessionKey)>,
    }
    #[async_trait]
    impl Coordinator for Racing {
        fn info(&self) -> ModelInfo {
            OfflineCoordinator::default().info()
        }
        async fn stream(&self, request: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
            let (store, key) = self.store.get().expect("set before the first turn");
            // The other writer's clock runs a second ahead of the server's.
            let ahead = compaction_core::Timestamp::new(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("after the epoch")
                    .as_secs_f64()
                    + 1.0,
            )
            .expect("finite");
            let note = compaction_core::Event::new(
                format!("external-{}", request.messages.len()),
                "external",
                "pipeline",
                ahead,
            );
            let revision = store.gate_snapshot(key).await.expect("snapshot").revision;
            store
                .append(key, revision, note)
                .await
                .expect("the other writer's append");
            OfflineCoordinator::default().stream(request).await
        }
    }
    let racing = Arc::new(Racing {
        store: std::sync::OnceLock::new(),
    });
    let (summarizer, _s, _r) = gated();
    let rig = start(
        racing.clone(),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("s").await;
    let _ = racing.store.set((rig.store.clone(), key.clone()));
    for n in 1..=3 {
        let events = rig.chat(&key, &format!("Question {n}?")).await;
        let done = done(&events);
        assert_eq!(done["turn"], n, "{events:?}");
    }
    let session = rig.store.load(&key).await.expect("load");
    let replies: Vec<_> = session
        .events
        .iter()
        .filter(|e| e.author == "coordinator" && e.partial.is_none())
        .collect();
    assert_eq!(replies.len(), 3, "every reply stored once");
    let stamps: Vec<f64> = session
        .events
        .iter()
        .map(|e| e.timestamp.seconds())
        .collect();
    assert!(
        stamps.windows(2).all(|w| w[0] < w[1]),
        "timestamps still increase: {stamps:?}"
    );
    assert!(rig.stop().await);
}
