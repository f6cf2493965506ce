//! The reference service on 127.0.0.1 as the tests run it: the async SQLite store in a temp
//! dir, the engine with the lanes, a test coordinator; an SSE reader; a summarizer the test
//! releases.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use compaction_core::{
    AdapterError, DecisionModel, Engine, ModelInfo, SessionKey, Settings, Summarizer, Summary,
    SummaryRequest, Telemetry, async_trait,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use service::http::{Coordinator, SelectedCoordinator, ServeOptions, Server};
use service::{LaneConfig, Lanes, ProcessIds, SystemClock};
use session_store::SqliteStore;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_stream::StreamExt as _;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Answers once the test adds a permit; tells the test when a call starts.
pub(crate) struct GatedSummarizer {
    started: mpsc::UnboundedSender<usize>,
    release: Arc<Semaphore>,
    calls: AtomicUsize,
}

#[async_trait]
impl Summarizer for GatedSummarizer {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "gated")
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.started.send(n);
        self.release.acquire().await?.forget();
        Ok(Summary::new(format!(
            "ROLLING-SUMMARY-{n} of {} turns.",
            request.turns.len()
        )))
    }
}

pub(crate) fn gated() -> (
    Arc<GatedSummarizer>,
    mpsc::UnboundedReceiver<usize>,
    Arc<Semaphore>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let s = Arc::new(GatedSummarizer {
        started: tx,
        release: release.clone(),
        calls: AtomicUsize::new(0),
    });
    (s, rx, release)
}

pub(crate) struct Running {
    pub(crate) base: String,
    pub(crate) store: Arc<SqliteStore>,
    pub(crate) server: Server,
    pub(crate) http: reqwest::Client,
    pub(crate) stop: Option<oneshot::Sender<()>>,
    pub(crate) served: tokio::task::JoinHandle<std::io::Result<bool>>,
    _dir: tempfile::TempDir,
}

pub(crate) fn settings() -> Settings {
    Settings {
        adaptive_compaction_min_turns: 3,
        adaptive_compaction_retention_turns: 2,
        adaptive_compaction_token_floor: 10,
        ..Settings::default()
    }
}

pub(crate) async fn start(
    coordinator: Arc<dyn Coordinator>,
    decision: Arc<dyn DecisionModel>,
    summarizer: Arc<dyn Summarizer>,
    options: ServeOptions,
) -> Running {
    start_traced(coordinator, decision, summarizer, options, None, lanes()).await
}

/// The lanes of [`start`]: the next turn waits up to 30 s for an evaluation.
pub(crate) fn lanes() -> LaneConfig {
    LaneConfig::default().max_wait(Duration::from_secs(30))
}

/// [`start`], with the engine's spans going to `telemetry` and the lanes configured.
pub(crate) async fn start_traced(
    coordinator: Arc<dyn Coordinator>,
    decision: Arc<dyn DecisionModel>,
    summarizer: Arc<dyn Summarizer>,
    options: ServeOptions,
    telemetry: Option<Arc<dyn Telemetry>>,
    lanes: LaneConfig,
) -> Running {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(SqliteStore::open(dir.path().join("sessions.db")).expect("store"));
    let clock = Arc::new(SystemClock::default());
    let ids = Arc::new(ProcessIds::default());
    let engine = Engine::builder(
        decision,
        summarizer,
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .settings(settings());
    let engine = match telemetry {
        Some(telemetry) => engine.telemetry(telemetry),
        None => engine,
    }
    .build()
    .expect("engine");
    let lanes = Lanes::new(Arc::new(engine), lanes);
    let server = Server::new(
        store.clone(),
        lanes,
        SelectedCoordinator {
            coordinator,
            reason: "test coordinator".to_owned(),
        },
        clock,
        ids,
        options,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(server.clone().serve(listener, async {
        let _ = stopped.await;
    }));
    Running {
        base,
        store,
        server,
        http: reqwest::Client::new(),
        stop: Some(stop),
        served,
        _dir: dir,
    }
}

/// One SSE event as the client read it.
#[derive(Debug, Clone)]
pub(crate) struct Sse {
    pub(crate) event: String,
    pub(crate) data: String,
}

/// Reads SSE events from a response until it ends, handing each to `seen` as it arrives.
pub(crate) async fn read_sse(response: reqwest::Response, mut seen: impl FnMut(&Sse)) -> Vec<Sse> {
    read_sse_while(response, |e| {
        seen(e);
        true
    })
    .await
}

/// Reads SSE events from a response until it ends or `more` answers false for one (which is
/// kept). Comment blocks (keep-alives) are skipped.
pub(crate) async fn read_sse_while(
    response: reqwest::Response,
    mut more: impl FnMut(&Sse) -> bool,
) -> Vec<Sse> {
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    while let Some(chunk) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if block.trim_start().starts_with(':') {
                continue;
            }
            let mut event = Sse {
                event: "message".into(),
                data: String::new(),
            };
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event.event = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    event.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            let go_on = more(&event);
            events.push(event);
            if !go_on {
                return events;
            }
        }
    }
    events
}

impl Running {
    pub(crate) async fn create(&self, id: &str) -> SessionKey {
        let r = self
            .http
            .post(format!("{}/v1/sessions", self.base))
            .json(&json!({"app": "app", "user": "user", "id": id}))
            .send()
            .await
            .expect("create");
        assert_eq!(r.status(), StatusCode::CREATED);
        SessionKey::new("app", "user", id)
    }

    pub(crate) fn url(&self, key: &SessionKey, tail: &str) -> String {
        format!(
            "{}/v1/sessions/{}/{}/{}{tail}",
            self.base, key.app_name, key.user_id, key.session_id
        )
    }

    pub(crate) async fn chat(&self, key: &SessionKey, message: &str) -> Vec<Sse> {
        let r = self
            .http
            .post(self.url(key, "/chat"))
            .json(&json!({ "message": message }))
            .send()
            .await
            .expect("chat");
        assert_eq!(r.status(), StatusCode::OK);
        read_sse(r, |_| {}).await
    }

    pub(crate) async fn stop(mut self) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.served.await.expect("join").expect("serve")
    }
}

pub(crate) fn done(events: &[Sse]) -> Value {
    let last = events.last().expect("events");
    assert_eq!(last.event, "done", "{events:?}");
    serde_json::from_str(&last.data).expect("done data")
}

pub(crate) fn text_of(events: &[Sse]) -> String {
    events
        .iter()
        .filter(|e| e.event == "delta")
        .map(|e| e.data.as_str())
        .collect()
}

/// A chat-completions stream as OpenAI-compatible servers send it.
pub(crate) fn completion_stream(words: &[&str], prompt_tokens: u64) -> String {
    let mut body = String::new();
    for w in words {
        body.push_str(&format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": w}}]})
        ));
    }
    body.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": words.len()}})
    ));
    body
}

pub(crate) async fn coordinator_mock(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

pub(crate) fn sse_template(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}
