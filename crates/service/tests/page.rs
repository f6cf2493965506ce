//! The chat and preferences page, with real parts: the server on 127.0.0.1 with the offline
//! decision model, summarizer and coordinator, the async SQLite store and the settings file
//! in a temp dir, and (for the browser tests) Debian's headless Chromium driven through
//! chromedriver with fantoccini. Nothing waits on a timer: the page is awaited with
//! fantoccini's wait-for-element (CSS or XPath conditions), the server with its SSE events.
//!
//! Without `/usr/bin/chromedriver` (or `$CHROMEDRIVER`) the browser tests say so and pass,
//! except under `CI=true`, where a missing driver fails them (`.ci/run` installs it).
// A skipped browser test, the screenshots' paths and the file-to-page latency are told to the
// person running the tests.
#![allow(clippy::print_stderr)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{read_sse, read_sse_while};
use compaction_core::{
    AdapterError, CharsPerToken, Engine, ModelInfo, SessionKey, SessionStore, Settings,
    TokenEstimator as _, async_trait,
};
use config_ssot::ConfigStore;
use fantoccini::{Client, ClientBuilder, Locator, key::Key};
use reqwest::StatusCode;
use serde_json::{Value, json};
use service::http::{
    Coordinator, CoordinatorRequest, OfflineCoordinator, ReplyChunk, ReplyStream,
    SelectedCoordinator, ServeOptions, Server,
};
use service::{LaneConfig, Lanes, ProcessIds, SystemClock};
use session_store::SqliteStore;
use tokio::sync::{mpsc, oneshot};

// ---------------------------------------------------------------------------------------------
// The server

/// The offline stand-in's reply followed by a paragraph of explanation (a research assistant
/// answers at length; the offline summarizer keeps the findings, not the prose), streamed word
/// by word. A question containing `[hold]` streams its first word and then waits for the test
/// to release it (to type while a reply streams).
struct HeldCoordinator {
    hold: Mutex<Option<oneshot::Receiver<()>>>,
}

const EXPLANATION: &str = " In short, the answer depends on how the question is framed, on \
    which mechanisms dominate under the conditions you care about, and on how the studies you \
    rely on measured them; the literature agrees on the broad picture but not on the details, \
    so it is worth reading the primary sources before drawing a firm conclusion, and worth \
    asking again once the scope of the question is narrower.";

#[async_trait]
impl Coordinator for HeldCoordinator {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "offline-stand-in-at-length")
    }

    async fn stream(&self, request: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        let hold = if request.question.contains("[hold]") {
            self.hold.lock().unwrap().take()
        } else {
            None
        };
        let reply = OfflineCoordinator::reply(request) + EXPLANATION;
        let prompt_tokens = request.estimated_prompt_tokens();
        let completion_tokens = CharsPerToken.estimate(&reply) as u64;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut hold = hold;
            for (i, word) in reply.split_inclusive(' ').enumerate() {
                if tx
                    .send(Ok(ReplyChunk::Delta(word.to_owned())))
                    .await
                    .is_err()
                {
                    return;
                }
                if i == 0
                    && let Some(hold) = hold.take()
                {
                    let _ = hold.await;
                }
            }
            let _ = tx
                .send(Ok(ReplyChunk::Usage {
                    prompt_tokens,
                    completion_tokens,
                }))
                .await;
        });
        Ok(rx)
    }
}

struct Running {
    base: String,
    store: Arc<SqliteStore>,
    server: Server,
    config: PathBuf,
    http: reqwest::Client,
    release: Option<oneshot::Sender<()>>,
    stop: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The settings the page tests start from: K = 2, min_turns 3, a floor every turn passes,
/// and τ = 0.5.
fn start_settings(s: &mut Settings) {
    s.adaptive_compaction_retention_turns = 2;
    s.adaptive_compaction_min_turns = 3;
    s.adaptive_compaction_token_floor = 10;
    s.adaptive_compaction_threshold = 0.5;
}

/// Answers p = 0.2, then 0.9, then 0.2, … (probes in the order they come).
#[derive(Default)]
struct Alternating(std::sync::atomic::AtomicUsize);

#[async_trait]
impl compaction_core::DecisionModel for Alternating {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "alternating")
    }
    async fn decide(
        &self,
        _: &compaction_core::ProbeRequest,
    ) -> Result<compaction_core::DecisionAnswer, AdapterError> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(compaction_core::DecisionAnswer::new(if n % 2 == 1 {
            0.9
        } else {
            0.2
        }))
    }
}

async fn start() -> Running {
    start_with(true).await
}

/// The test server; `watch` false: started without a settings file (no preferences).
async fn start_with(watch: bool) -> Running {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir
        .path()
        .join("zocrates-data")
        .join("zocrates_config.json");
    let settings_store = ConfigStore::open(config.clone());
    let file = settings_store
        .update(start_settings)
        .expect("settings file");
    let effective = file.effective().clone();
    let store = Arc::new(SqliteStore::open(dir.path().join("sessions.db")).expect("store"));
    let clock = Arc::new(SystemClock::default());
    let ids = Arc::new(ProcessIds::default());
    // A decision model whose verdicts do not depend on which local model is installed (the
    // page shows whatever the engine decided; these tests need both verdicts, in a known
    // order): every other probe compresses.
    let decision = Arc::new(Alternating::default());
    let summarizer = summarizer::build_summarizer(&effective, &Default::default(), |_| None)
        .expect("offline summarizer");
    // Built on the defaults on purpose: watching the file puts its settings in force.
    let engine = Engine::builder(
        decision,
        summarizer.summarizer,
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .build()
    .expect("engine");
    let lanes = Lanes::new(
        Arc::new(engine),
        LaneConfig::default().max_wait(Duration::from_secs(30)),
    );
    let (release, hold) = oneshot::channel();
    let server = Server::new(
        store.clone(),
        lanes,
        SelectedCoordinator {
            coordinator: Arc::new(HeldCoordinator {
                hold: Mutex::new(Some(hold)),
            }),
            reason: "offline stand-in".to_owned(),
        },
        clock,
        ids,
        ServeOptions::default(),
    );
    if watch {
        server
            .watch_settings(settings_store)
            .expect("watch settings");
        assert_eq!(server.lanes().engine().settings().threshold, 0.5);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.clone().serve(listener, async {
        let _ = stopped.await;
    }));
    Running {
        base,
        store,
        server,
        config,
        http: reqwest::Client::new(),
        release: Some(release),
        stop: Some(stop),
        _dir: dir,
    }
}

impl Running {
    async fn create(&self, id: &str) -> SessionKey {
        let r = self
            .http
            .post(format!("{}/v1/sessions", self.base))
            .json(&json!({"app": "page", "user": "local", "id": id}))
            .send()
            .await
            .expect("create");
        assert_eq!(r.status(), StatusCode::CREATED);
        SessionKey::new("page", "local", id)
    }

    fn url(&self, key: &SessionKey, tail: &str) -> String {
        format!(
            "{}/v1/sessions/{}/{}/{}{tail}",
            self.base, key.app_name, key.user_id, key.session_id
        )
    }

    /// One turn through the API; returns the `done` event's data.
    async fn chat(&self, key: &SessionKey, message: &str) -> Value {
        let r = self
            .http
            .post(self.url(key, "/chat"))
            .json(&json!({ "message": message }))
            .send()
            .await
            .expect("chat");
        assert_eq!(r.status(), StatusCode::OK);
        let events = read_sse(r, |_| {}).await;
        let done = events
            .iter()
            .find(|e| e.event == "done")
            .unwrap_or_else(|| panic!("no done event: {events:?}"));
        serde_json::from_str(&done.data).expect("done json")
    }

    async fn put_settings(&self, body: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .put(format!("{}/v1/settings", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .expect("put settings");
        let status = r.status();
        (status, r.json().await.expect("json body"))
    }

    fn file_bytes(&self) -> Vec<u8> {
        std::fs::read(&self.config).expect("settings file")
    }

    fn file_json(&self) -> Value {
        serde_json::from_slice(&self.file_bytes()).expect("settings file is JSON")
    }
}

/// Redacts the temp dir from an error body.
fn redacted(body: &Value, running: &Running) -> Value {
    let text = body
        .to_string()
        .replace(&running.config.display().to_string(), "[config]");
    serde_json::from_str(&text).expect("json")
}

// ---------------------------------------------------------------------------------------------
// The API behind the page (no browser)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shell_and_its_modules_are_served_from_the_binary() {
    let running = start().await;
    let r = running.http.get(&running.base).send().await.expect("get /");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    let html = r.text().await.expect("html");
    insta::assert_snapshot!("page_shell", html);
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing is fetched from elsewhere"
    );
    for name in [
        "app.js",
        "api.js",
        "chat.js",
        "drawer.js",
        "markdown.js",
        "prefs.js",
        "app.css",
    ] {
        let r = running
            .http
            .get(format!("{}/assets/{name}", running.base))
            .send()
            .await
            .expect("asset");
        assert_eq!(r.status(), StatusCode::OK, "{name}");
        let body = r.text().await.expect("text");
        for external in ["https://", "@import", "fonts.googleapis"] {
            assert!(!body.contains(external), "{name} refers to {external}");
        }
    }
    let r = running
        .http
        .get(format!("{}/assets/nope.js", running.base))
        .send()
        .await
        .expect("asset");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    insta::assert_json_snapshot!("unknown_asset", r.json::<Value>().await.expect("json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_listed_newest_first_with_their_tokens_per_turn() {
    let running = start().await;
    let a = running.create("first").await;
    let b = running.create("second").await;
    let list: Value = running
        .http
        .get(format!("{}/v1/sessions", running.base))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["second", "first"]);
    let _ = b;
    for question in RESEARCH {
        running.chat(&a, question).await;
    }
    let tokens: Value = running
        .http
        .get(running.url(&a, "/tokens"))
        .send()
        .await
        .expect("tokens")
        .json()
        .await
        .expect("json");
    let turns = tokens["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), RESEARCH.len());
    // Before any compaction the prompt sent is the whole history: both figures agree.
    assert_eq!(turns[0]["with"], turns[0]["without"], "{tokens}");
    // The next prompt: the compacted assembly, and the same assembly over every event.
    let context = running.store.load_context(&a).await.expect("context");
    assert!(context.summary().is_some(), "compacted by now");
    let with = CoordinatorRequest::assemble(&context, "").estimated_prompt_tokens();
    let session = running.store.load(&a).await.expect("load");
    let everything = compaction_core::assemble_around(
        None,
        session
            .events
            .iter()
            .filter(|e| e.compaction().is_none())
            .cloned(),
    );
    let without = CoordinatorRequest::assemble(&everything, "").estimated_prompt_tokens();
    assert_eq!(tokens["next"], json!({ "with": with, "without": without }));
    assert!(
        with < without,
        "the summary drops the explanations: {tokens}"
    );
    let r = running
        .http
        .get(format!(
            "{}/v1/sessions/page/local/nope/tokens",
            running.base
        ))
        .send()
        .await
        .expect("tokens");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_errors_name_the_field_in_config_ssots_words_and_write_nothing() {
    let running = start().await;
    let before = running.file_bytes();
    let cases = [
        (
            "threshold_out_of_range",
            r#"{"adaptive_compaction_threshold": 1.5}"#,
        ),
        (
            "integer_as_words",
            r#"{"adaptive_compaction_min_turns": "four"}"#,
        ),
        (
            "floor_above_ceiling",
            r#"{"adaptive_compaction_token_floor": 300000}"#,
        ),
        ("unknown_key", r#"{"adaptive_compaction_treshold": 0.9}"#),
        (
            "empty_model",
            r#"{"adaptive_compaction_decision_model": " "}"#,
        ),
        ("nested_value", r#"{"enable_adaptive_compaction": [true]}"#),
        ("not_an_object", r#"[1, 2]"#),
        ("not_json", r#"{"adaptive_compaction_threshold": "#),
    ];
    let mut bodies = serde_json::Map::new();
    for (name, body) in cases {
        let (status, answer) = running.put_settings(body).await;
        assert!(
            status == StatusCode::UNPROCESSABLE_ENTITY || status == StatusCode::BAD_REQUEST,
            "{name}: {status}"
        );
        bodies.insert(name.to_owned(), redacted(&answer, &running));
        assert_eq!(running.file_bytes(), before, "{name}: the file was written");
    }
    insta::assert_json_snapshot!("settings_errors", bodies);
    // The words are config-ssot's, as `compaction config set` prints them.
    let direct = ConfigStore::open(running.config.clone())
        .set("adaptive_compaction_threshold", "1.5")
        .expect_err("out of range")
        .to_string();
    let (_, answer) = running
        .put_settings(r#"{"adaptive_compaction_threshold": "1.5"}"#)
        .await;
    assert_eq!(answer["error"]["message"], json!(direct));
    assert_eq!(answer["error"]["field"], "adaptive_compaction_threshold");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_settings_file_the_preferences_say_so() {
    let running = start_with(false).await;
    let r = running
        .http
        .get(format!("{}/v1/settings", running.base))
        .send()
        .await
        .expect("get settings");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    insta::assert_json_snapshot!("no_settings", r.json::<Value>().await.expect("json"));
    let (status, _) = running
        .put_settings(r#"{"adaptive_compaction_threshold": 0.9}"#)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let r = running
        .http
        .get(format!("{}/v1/settings/events", running.base))
        .send()
        .await
        .expect("settings events");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        running.server.lanes().engine().settings().threshold,
        0.75,
        "the engine keeps the settings it was built with"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_settings_apply_from_the_next_turn_whoever_wrote_them() {
    let running = start().await;
    let key = running.create("live").await;
    let events = running
        .http
        .get(format!("{}/v1/settings/events", running.base))
        .send()
        .await
        .expect("settings events");
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<Value>();
    tokio::spawn(read_sse_while(events, move |e| {
        assert_eq!(e.event, "settings");
        seen_tx
            .send(serde_json::from_str(&e.data).expect("json"))
            .is_ok()
    }));
    let first = seen.recv().await.expect("the current settings first");
    assert_eq!(first["settings"]["adaptive_compaction_threshold"], 0.5);
    assert!(first["clamp_warning"].is_null());

    // Saved by a page: in the file, in the engine, and announced.
    let (status, _) = running
        .put_settings(
            r#"{"enable_adaptive_compaction": false, "adaptive_compaction_min_turns": "1"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(running.file_json()["enable_adaptive_compaction"], false);
    let saved = seen.recv().await.expect("the page's save");
    assert_eq!(saved["changed_by"], "page");
    let clamp = compaction_core::Settings {
        adaptive_compaction_min_turns: 1,
        adaptive_compaction_retention_turns: 2,
        ..Settings::default()
    }
    .effective()
    .expect("valid")
    .clamp_warning
    .expect("clamped")
    .to_string();
    assert_eq!(saved["clamp_warning"], json!(clamp));
    let mut reports = running.server.lanes().subscribe();
    for question in RESEARCH.iter().take(4) {
        running.chat(&key, question).await;
        let report = reports.recv().await.expect("report");
        let outcome = report.outcome().expect("outcome").to_string();
        assert_eq!(outcome, "exit: adaptive compaction disabled");
    }

    // Written by another process's writer (what `compaction config set` calls).
    let config = running.config.clone();
    tokio::task::spawn_blocking(move || {
        ConfigStore::open(config)
            .set("enable_adaptive_compaction", "true")
            .expect("config set")
    })
    .await
    .expect("join");
    let changed = seen.recv().await.expect("the file's change");
    assert_eq!(changed["changed_by"], "file");
    assert_eq!(changed["settings"]["enable_adaptive_compaction"], true);
    assert!(running.server.lanes().engine().settings().enabled);
    running.chat(&key, RESEARCH[4]).await;
    let report = reports.recv().await.expect("report");
    assert_ne!(
        report.outcome().expect("outcome").to_string(),
        "exit: adaptive compaction disabled",
        "the next turn runs on the new settings"
    );

    // A file nobody can use: the last good settings stay, and the page hears why.
    std::fs::write(&running.config, b"{\"adaptive_compaction_threshold\": ").expect("corrupt");
    let rejected = seen.recv().await.expect("the rejection");
    assert!(
        rejected["problem"]
            .as_str()
            .is_some_and(|p| p.contains("invalid JSON")),
        "{rejected}"
    );
    assert_eq!(rejected["settings"]["enable_adaptive_compaction"], true);
    assert!(running.server.lanes().engine().settings().enabled);
}

// ---------------------------------------------------------------------------------------------
// The browser

/// chromedriver in its own process group with its own TMPDIR; the group is killed on drop.
struct Chromedriver {
    child: Child,
    url: String,
    _tmp: tempfile::TempDir,
}

impl Chromedriver {
    /// `None` (with a message) when no driver is installed, except under `CI=true`.
    fn start() -> Option<Chromedriver> {
        let path = std::env::var_os("CHROMEDRIVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/chromedriver"));
        if !path.exists() {
            let why = format!(
                "{} not found: install Debian's chromium and chromium-driver (.ci/run does)",
                path.display()
            );
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{why}");
            }
            eprintln!("SKIPPED: {why}");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let tmp = tempfile::tempdir().expect("chromedriver temp dir");
        let mut command = Command::new(&path);
        command
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().expect("spawn chromedriver");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut said = Vec::new();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("started successfully") => break,
                Some(Ok(line)) => said.push(line),
                _ => panic!("chromedriver did not start: {said:?}"),
            }
        }
        // Keep reading what it says, so a full pipe never blocks it.
        std::thread::spawn(move || lines.for_each(drop));
        Some(Chromedriver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _tmp: tmp,
        })
    }

    async fn browser(&self) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", "--window-size=1280,800", "--lang=en-US"],
            }),
        );
        // The console, read back with `console_errors`.
        caps.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a browser session")
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

/// Chromedriver's browser log (what the page's console said since the last read).
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_owned()),
        )
    }
}

/// The page's console errors since the last read: uncaught exceptions, unhandled rejections
/// and `console.error` (a failed request's own network line is the browser's, not the page's).
async fn console_errors(browser: &Client) -> Vec<String> {
    let log = browser
        .issue_cmd(BrowserLog)
        .await
        .expect("the browser log");
    log.as_array()
        .expect("log entries")
        .iter()
        .filter(|e| e["level"] == "SEVERE" && e["source"] != "network")
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Where the run writes its screenshots (the reviewed ones are committed under
/// docs/screenshots/).
fn screenshot(name: &str, png: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    let path = dir.join(name);
    std::fs::write(&path, png).expect("write screenshot");
    eprintln!("screenshot: {}", path.display());
    path
}

const WAIT: Duration = Duration::from_secs(20);

async fn wait_css(browser: &Client, css: &str) -> fantoccini::elements::Element {
    browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("waiting for {css}: {e}"))
}

/// Waits for `xpath`; a timeout tells the console's errors too.
async fn wait_xpath(browser: &Client, xpath: &str) -> fantoccini::elements::Element {
    match browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::XPath(xpath))
        .await
    {
        Ok(element) => element,
        Err(e) => panic!(
            "waiting for {xpath}: {e}; console: {:?}",
            console_errors(browser).await
        ),
    }
}

/// The letters of `text`, in order (what Markdown rendering keeps of it).
fn letters(text: &str) -> String {
    text.chars().filter(|c| c.is_alphabetic()).collect()
}

/// A research conversation: a topic, drill-downs, then a pivot.
const RESEARCH: [&str; 6] = [
    "What limits the fast charging of lithium-ion cells?",
    "How does lithium plating at the anode depend on temperature?",
    "Can you recap the main mechanisms in a short list?",
    "Switching gears: how do solid-state electrolytes change the picture?",
    "Which sulfide electrolytes have the highest ionic conductivity?",
    "Moving on, what do recent reviews say about their interface stability?",
];

/// Opens the page at `base` in a 1280×800 window and waits until its script is ready.
async fn open_page(browser: &Client, base: &str) {
    browser.set_window_size(1280, 800).await.expect("size");
    browser.goto(base).await.expect("open the page");
    wait_css(browser, "body[data-ready='true']").await;
}

/// Narrows the window to 400 px and checks that nothing is wider than it.
async fn assert_fits_400_px(browser: &Client) {
    browser.set_window_size(400, 800).await.expect("narrow");
    let fits = browser
        .execute(
            "return document.documentElement.scrollWidth <= window.innerWidth;",
            vec![],
        )
        .await
        .expect("measure");
    assert_eq!(fits, json!(true), "horizontal overflow at 400 px");
}

async fn type_into(browser: &Client, css: &str, text: &str) {
    let input = wait_css(browser, css).await;
    input.clear().await.expect("clear");
    input.send_keys(text).await.expect("type");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_research_conversation_streams_compacts_and_shows_its_context() {
    let Some(driver) = Chromedriver::start() else {
        return;
    };
    let mut running = start().await;
    let browser = driver.browser().await;
    let result = async {
        open_page(&browser, &running.base).await;
        let mut reports = running.server.lanes().subscribe();
        let mut compacted = false;
        for (i, question) in RESEARCH.iter().enumerate() {
            let n = i + 1;
            // Enter sends.
            let input = wait_css(&browser, "#input").await;
            input
                .send_keys(&format!("{question}{}", char::from(Key::Enter)))
                .await
                .expect("type and send");
            // The reply streamed in, then its badge came from the events stream.
            let badge = wait_xpath(
                &browser,
                &format!(
                    "(//li[contains(@class,'assistant')])[{n}]\
                     /span[contains(@class,'badge') and not(contains(@class,'pending'))]"
                ),
            )
            .await;
            let report = reports.recv().await.expect("the turn's report");
            let text = badge.text().await.expect("badge text");
            let outcome = report.outcome().expect("outcome");
            let expected = match outcome.label() {
                "fast-exit" | "nothing-to-compact"
                    if compacted && outcome.detail().contains("completed turn") =>
                {
                    format!("exit ({} since the last compaction)", outcome.detail())
                }
                "fast-exit" | "nothing-to-compact" => format!("exit ({})", outcome.detail()),
                "continue" => format!(
                    "CONTINUE p={:.2}",
                    outcome.probability().expect("p").value()
                ),
                "compressed" => {
                    let folded = outcome.compaction().expect("compaction").slice_turns;
                    format!(
                        "COMPRESS folded {folded} turn{}",
                        if folded == 1 { "" } else { "s" }
                    )
                }
                other => panic!("turn {n}: unexpected outcome {other}: {outcome}"),
            };
            assert_eq!(text, expected, "turn {n}");
            compacted |= outcome.label() == "compressed";
            let reply = browser
                .find(Locator::XPath(&format!(
                    "(//li[contains(@class,'assistant')])[{n}]/div[@class='text']"
                )))
                .await
                .expect("reply")
                .text()
                .await
                .expect("reply text");
            assert!(
                reply.starts_with("(offline stand-in) You asked:") && reply.contains(question),
                "turn {n}: {reply}"
            );
        }
        let compress = wait_css(&browser, "li.assistant .badge.compress").await;
        assert!(
            compress
                .text()
                .await
                .expect("text")
                .starts_with("COMPRESS folded")
        );
        let line = wait_xpath(
            &browser,
            "//p[@id='tokens-line'][contains(., 'Next prompt:')]",
        )
        .await
        .text()
        .await
        .expect("tokens line");
        assert!(
            line.contains("with compaction") && line.contains("without"),
            "{line}"
        );
        browser
            .execute(
                "document.querySelector('li.assistant .badge.compress')\
                 .scrollIntoView({block: 'center'});",
                vec![],
            )
            .await
            .expect("scroll to the badge");
        screenshot("chat.png", &browser.screenshot().await.expect("screenshot"));

        // The context drawer: the live summary first, then the retained turns, and the history.
        wait_css(&browser, "#tab-context")
            .await
            .click()
            .await
            .expect("open context");
        wait_css(&browser, "#drawer:not([data-loading])").await;
        let summary = wait_css(&browser, "#context-entries li.entry.summary .text").await;
        let sessions: Value = running
            .http
            .get(format!("{}/v1/sessions", running.base))
            .send()
            .await
            .expect("sessions")
            .json()
            .await
            .expect("json");
        let s = &sessions["sessions"][0];
        let key = SessionKey::new(
            s["app"].as_str().expect("app"),
            s["user"].as_str().expect("user"),
            s["id"].as_str().expect("id"),
        );
        let context = running.store.load_context(&key).await.expect("context");
        let live = context.summary().expect("a live summary");
        // Rendered as Markdown: the same words, without the marks.
        assert_eq!(
            letters(&summary.text().await.expect("summary text")),
            letters(&live.compaction.summary_text())
        );
        let retained = browser
            .find_all(Locator::Css("#context-entries li.entry:not(.summary)"))
            .await
            .expect("retained");
        assert_eq!(retained.len(), context.events().count());
        let history = running
            .store
            .compaction_history(&key)
            .await
            .expect("history");
        let shown = browser
            .find_all(Locator::Css("#history li.compaction"))
            .await
            .expect("history");
        assert_eq!(shown.len(), history.len());
        let subsumed = browser
            .find_all(Locator::Css("#history li.compaction.subsumed"))
            .await
            .expect("subsumed");
        assert_eq!(
            subsumed.len(),
            history.iter().filter(|c| c.subsumed).count()
        );
        // Issue 30: each compaction's receipt, as the store holds it ("N findings kept, …").
        let receipts = browser
            .find_all(Locator::Css(
                "#history li.compaction details.receipt summary",
            ))
            .await
            .expect("receipts");
        let stored: Vec<String> = history
            .iter()
            .filter_map(|c| c.receipt.as_ref().map(|r| r.headline()))
            .collect();
        assert!(
            !stored.is_empty(),
            "the offline summarizer records a receipt"
        );
        assert_eq!(receipts.len(), stored.len());
        for (shown, want) in receipts.iter().zip(&stored) {
            assert_eq!(&shown.text().await.expect("receipt"), want);
        }
        // Lossless recall: a compaction's original turns, verbatim, and the history search.
        let live_id = &live.event_id;
        let expanded = running.store.expand(&key, live_id).await.expect("expand");
        let button = wait_xpath(
            &browser,
            "//ol[@id='history']/li[contains(@class,'live')]\
             //button[contains(., 'show the original turns')]",
        )
        .await;
        button.click().await.expect("show the original turns");
        wait_css(&browser, "#history li.live ol.original-turns li.original").await;
        let originals = browser
            .find_all(Locator::Css(
                "#history li.live ol.original-turns li.original .text",
            ))
            .await
            .expect("originals");
        assert_eq!(originals.len(), expanded.len());
        let first = originals[0].text().await.expect("first original");
        assert_eq!(first, RESEARCH[0]);
        let query = compaction_core::RecallQuery::parse("plating").expect("query");
        let hits = running
            .store
            .search(&key, &query, 20)
            .await
            .expect("search");
        assert!(hits.iter().any(|h| h.covered_by.is_some()), "{hits:?}");
        type_into(&browser, "#recall-query", "plating").await;
        wait_css(&browser, "#recall-search")
            .await
            .click()
            .await
            .expect("search");
        wait_css(&browser, "#recall-hits li.hit.folded mark").await;
        let shown = browser
            .find_all(Locator::Css("#recall-hits li.hit"))
            .await
            .expect("hits");
        assert_eq!(shown.len(), hits.len());
        let mark = wait_css(&browser, "#recall-hits li.hit mark").await;
        assert_eq!(mark.text().await.expect("mark").to_lowercase(), "plating");
        browser
            .execute(
                "document.getElementById('recall-status').scrollIntoView({block: 'start'});",
                vec![],
            )
            .await
            .expect("scroll to the hits");
        screenshot(
            "recall.png",
            &browser.screenshot().await.expect("screenshot"),
        );
        wait_css(&browser, "#token-chart svg polyline.series.with").await;
        wait_css(&browser, "#token-chart svg polyline.series.without").await;
        screenshot(
            "context.png",
            &browser.screenshot().await.expect("screenshot"),
        );

        // The textarea stays typable while a reply streams (Shift+Enter breaks a line).
        wait_css(&browser, "#tab-context")
            .await
            .click()
            .await
            .expect("close drawer");
        let input = wait_css(&browser, "#input").await;
        input
            .send_keys(&format!(
                "[hold] And the cathode side?{}",
                char::from(Key::Enter)
            ))
            .await
            .expect("send the held question");
        wait_xpath(
            &browser,
            "//li[contains(@class,'assistant') and contains(@class,'streaming')]\
             /div[@class='text'][string-length(normalize-space(.)) > 0]",
        )
        .await;
        input.click().await.expect("focus");
        input
            .send_keys(&format!(
                "typed while{}{}{}it streams",
                char::from(Key::Shift),
                char::from(Key::Enter),
                char::from(Key::Null)
            ))
            .await
            .expect("type while streaming");
        let typed = input
            .prop("value")
            .await
            .expect("value")
            .unwrap_or_default();
        assert_eq!(typed, "typed while\nit streams");
        assert!(input.prop("disabled").await.expect("disabled").as_deref() != Some("true"));
        assert!(
            browser
                .find(Locator::Css("li.assistant.streaming"))
                .await
                .is_ok(),
            "the reply is still streaming"
        );
        let _ = running.release.take().expect("held once").send(());
        wait_xpath(
            &browser,
            &format!(
                "(//li[contains(@class,'assistant')])[{}]\
                 /span[contains(@class,'badge') and not(contains(@class,'pending'))]",
                RESEARCH.len() + 1
            ),
        )
        .await;

        // Readable at 400 px: nothing wider than the window.
        assert_fits_400_px(&browser).await;
        screenshot(
            "chat-narrow.png",
            &browser.screenshot().await.expect("screenshot"),
        );
    }
    .await;
    browser.close().await.expect("close the browser");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferences_save_to_the_file_and_follow_it() {
    let Some(driver) = Chromedriver::start() else {
        return;
    };
    let running = start().await;
    let browser = driver.browser().await;
    let result = async {
        open_page(&browser, &running.base).await;
        wait_css(&browser, "#tab-prefs")
            .await
            .click()
            .await
            .expect("open preferences");
        let threshold = "#pref-adaptive_compaction_threshold";
        wait_css(&browser, &format!("{threshold}[data-saved='0.5']")).await;
        let fields = browser
            .find_all(Locator::Css("#prefs-fields .field"))
            .await
            .expect("fields");
        assert_eq!(fields.len(), 8, "the eight spec keys");

        // Saved in the page: found in the file on disk, and in the engine.
        type_into(&browser, threshold, "0.9").await;
        wait_css(&browser, "#prefs-save")
            .await
            .click()
            .await
            .expect("save");
        wait_xpath(
            &browser,
            "//span[@id='prefs-status'][starts-with(., 'Saved')]",
        )
        .await;
        assert_eq!(running.file_json()["adaptive_compaction_threshold"], 0.9);
        assert_eq!(running.server.lanes().engine().settings().threshold, 0.9);

        // Changed on disk by another writer (`compaction config set`'s call): the page follows.
        let config = running.config.clone();
        let written = Instant::now();
        tokio::task::spawn_blocking(move || {
            ConfigStore::open(config)
                .set("adaptive_compaction_threshold", "0.35")
                .expect("config set")
        })
        .await
        .expect("join");
        wait_css(&browser, &format!("{threshold}[data-saved='0.35']")).await;
        eprintln!(
            "the page showed the file's change after {:?}",
            written.elapsed()
        );
        let value = wait_css(&browser, threshold)
            .await
            .prop("value")
            .await
            .expect("value");
        assert_eq!(value.as_deref(), Some("0.35"));
        wait_xpath(
            &browser,
            "//span[@id='prefs-status'][contains(., 'file on disk')]",
        )
        .await;

        // The min_turns clamp warning, in compaction-core's words.
        type_into(&browser, "#pref-adaptive_compaction_min_turns", "1").await;
        wait_css(&browser, "#prefs-save")
            .await
            .click()
            .await
            .expect("save");
        let warning = wait_css(&browser, "#clamp-warning:not([hidden])").await;
        let clamp = running
            .server
            .lanes()
            .engine()
            .settings()
            .clamp_warning
            .expect("clamped")
            .to_string();
        assert_eq!(warning.text().await.expect("warning"), clamp);

        // An invalid value: the field's error, config-ssot's words, and the file untouched.
        let before = running.file_bytes();
        type_into(&browser, threshold, "1.5").await;
        wait_css(&browser, "#prefs-save")
            .await
            .click()
            .await
            .expect("save");
        let error = wait_css(
            &browser,
            ".field.invalid #err-adaptive_compaction_threshold",
        )
        .await;
        let expected = format!(
            "{}: adaptive_compaction_threshold must be a number in [0.0, 1.0], got 1.5; the \
             file was left untouched",
            running.config.display()
        );
        assert_eq!(error.text().await.expect("error"), expected);
        assert_eq!(running.file_bytes(), before, "the file is untouched");
        screenshot(
            "preferences.png",
            &browser.screenshot().await.expect("screenshot"),
        );

        assert_fits_400_px(&browser).await;
    }
    .await;
    browser.close().await.expect("close the browser");
    result
}

// ---------------------------------------------------------------------------------------------
// The whole conversation (issue 33): the history route, the address, titles

/// Twelve questions on three topics (invented): enough turns for two compactions at K = 2.
const LONG: [&str; 12] = [
    "What sets the efficiency limit of a single-junction solar cell?",
    "How does the band gap enter that limit?",
    "Can you recap the main losses in a short list?",
    "Switching gears: how do perovskite cells degrade under humidity?",
    "Which encapsulation methods slow that degradation?",
    "Can you recap the degradation routes in a short list?",
    "Moving on, what limits the round-trip efficiency of pumped hydro storage?",
    "How does head height change the economics?",
    "Can you recap the trade-offs in a short list?",
    "Switching gears again: how do flow batteries store energy in liquids?",
    "What makes vanadium electrolytes expensive?",
    "Moving on, are organic redox molecules a realistic alternative?",
];

/// `LONG`'s title: its first question shortened to 60 characters.
const LONG_TITLE: &str = "What sets the efficiency limit of a single-junction solar c…";

/// `LONG` through the API, each turn's evaluation awaited; returns the session's key.
async fn long_conversation(running: &Running, id: &str) -> SessionKey {
    let key = running.create(id).await;
    let mut reports = running.server.lanes().subscribe();
    for question in LONG {
        running.chat(&key, question).await;
        reports.recv().await.expect("the turn's report");
    }
    key
}

async fn get_json(running: &Running, url: &str) -> (StatusCode, Value) {
    let r = running.http.get(url).send().await.expect("get");
    let status = r.status();
    (status, r.json().await.expect("a JSON body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_route_pages_every_turn_with_the_compaction_that_folds_it() {
    let running = start().await;
    let key = long_conversation(&running, "long").await;
    let entries = running
        .store
        .compaction_history(&key)
        .await
        .expect("history");
    assert!(entries.len() >= 2, "two compactions: {entries:?}");
    let whole = running
        .store
        .expand_turns(&key, 1, LONG.len())
        .await
        .expect("expand");
    // Newest page first, then the one before it: together every turn, in order, once.
    let (status, newest) = get_json(&running, &running.url(&key, "/history?limit=5")).await;
    assert_eq!(status, StatusCode::OK, "{newest}");
    assert_eq!(newest["total_turns"], LONG.len());
    assert_eq!(newest["earlier"], 8);
    assert_eq!(newest["title"], LONG_TITLE);
    let (_, older) = get_json(&running, &running.url(&key, "/history?before=8&limit=50")).await;
    assert_eq!(older["earlier"], Value::Null);
    let turns: Vec<&Value> = older["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .chain(newest["turns"].as_array().expect("turns"))
        .collect();
    assert_eq!(turns.len(), LONG.len());
    for (i, turn) in turns.iter().enumerate() {
        assert_eq!(turn["turn"], i + 1);
        assert_eq!(turn["events"][0]["author"], "user");
        assert_eq!(turn["events"][0]["text"], LONG[i]);
        // The compaction named is the one the store's recall says covers the turn.
        let covered = whole
            .iter()
            .find(|r| r.turn == Some(i + 1))
            .expect("the turn's events")
            .covered_by
            .clone();
        assert_eq!(
            turn["covered_by"].as_str(),
            covered.as_deref(),
            "turn {}",
            i + 1
        );
        if let Some(id) = covered {
            let number = entries
                .iter()
                .position(|c| c.event_id == id)
                .expect("listed")
                + 1;
            assert_eq!(turn["summary"], number);
        }
    }
    // Each compaction by turn numbers and tokens.
    let compactions = newest["compactions"].as_array().expect("compactions");
    assert_eq!(compactions.len(), entries.len());
    for (c, entry) in compactions.iter().zip(&entries) {
        let covered = running
            .store
            .expand(&key, &entry.event_id)
            .await
            .expect("expand");
        let first = covered.iter().filter_map(|r| r.turn).min();
        assert_eq!(c["event_id"], entry.event_id.as_str());
        assert_eq!(c["first_turn"], json!(first));
        assert_eq!(c["subsumed"], entry.subsumed);
        assert!(
            c["covered_tokens"].as_u64().expect("tokens")
                > c["summary_tokens"].as_u64().expect("tokens")
        );
    }
    // Bad input: the field and the form named, in the service's error shape.
    for (tail, status) in [
        ("/history?limit=0", StatusCode::BAD_REQUEST),
        ("/history?limit=abc", StatusCode::BAD_REQUEST),
        ("/history?before=0", StatusCode::BAD_REQUEST),
    ] {
        let (got, body) = get_json(&running, &running.url(&key, tail)).await;
        assert_eq!(got, status, "{tail}: {body}");
        assert_eq!(body["error"]["status"], status.as_u16());
        assert!(
            body["error"]["message"]
                .as_str()
                .expect("message")
                .contains("expected ?before="),
            "{body}"
        );
    }
    let unknown = SessionKey::new("page", "local", "nobody");
    let (got, body) = get_json(&running, &running.url(&unknown, "/history")).await;
    assert_eq!(got, StatusCode::NOT_FOUND, "{body}");
    let (got, body) = get_json(
        &running,
        &format!("{}/v1/sessions/page/local/bad%07id/history", running.base),
    )
    .await;
    assert_eq!(got, StatusCode::BAD_REQUEST, "{body}");
}

/// The text of every element `css` selects, shown or not.
async fn texts(browser: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in browser.find_all(Locator::Css(css)).await.expect("find") {
        out.push(
            e.prop("textContent")
                .await
                .expect("text")
                .unwrap_or_default(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reload_every_turn_is_readable_and_the_same_session_is_open() {
    let Some(driver) = Chromedriver::start() else {
        return;
    };
    let running = start().await;
    let key = long_conversation(&running, "long").await;
    let other = running.create("other").await;
    let entries = running
        .store
        .compaction_history(&key)
        .await
        .expect("history");
    assert!(entries.len() >= 2, "two compactions: {entries:?}");
    let browser = driver.browser().await;
    let result = async {
        open_page(&browser, &running.base).await;
        wait_css(&browser, "#empty-state:not([hidden])").await;
        // Open it from the list (titled by its first question), then reload.
        let item = wait_xpath(
            &browser,
            &format!("//ul[@id='session-list']//button[contains(., '{}')]", &LONG[0][..30]),
        )
        .await;
        item.click().await.expect("open from the list");
        wait_css(&browser, "#messages li.msg.summary").await;
        let hash = browser.execute("return location.hash;", vec![]).await.expect("hash");
        assert_eq!(hash, json!("#/page/local/long"));
        browser.refresh().await.expect("reload");
        wait_css(&browser, "body[data-ready='true']").await;
        wait_css(&browser, "#messages li.msg.summary").await;
        let title = wait_css(&browser, "#session-title").await.text().await.expect("title");
        assert_eq!(title, LONG_TITLE);
        // Every question and every reply, in order, folded or not.
        let asked = texts(&browser, "#messages li.msg.user .text").await;
        assert_eq!(asked, LONG.map(str::to_owned).to_vec());
        let replies = texts(&browser, "#messages li.msg.assistant .text").await;
        assert_eq!(replies.len(), LONG.len());
        for (reply, question) in replies.iter().zip(LONG) {
            assert!(reply.contains(question), "{reply}");
        }
        // Folded turns are collapsed, each naming its summary; the live summary sits after them.
        let whole = running.store.expand_turns(&key, 1, LONG.len()).await.expect("expand");
        let folded: Vec<usize> = (1..=LONG.len())
            .filter(|t| whole.iter().any(|r| r.turn == Some(*t) && r.covered_by.is_some()))
            .collect();
        assert!(!folded.is_empty());
        let heads = texts(&browser, "#messages li.msg.folded details:not([open]) > summary").await;
        assert_eq!(heads.len(), folded.len());
        let live_number = entries.iter().position(|c| !c.subsumed).expect("live") + 1;
        assert!(heads[0].starts_with(&format!("Turn {} · in summary #{live_number}", folded[0])), "{heads:?}");
        let order = browser
            .execute(
                "const items = [...document.querySelectorAll('#messages > li')];\
                 const s = items.findIndex((li) => li.classList.contains('summary'));\
                 const f = items.map((li, i) => li.classList.contains('folded') ? i : -1).filter((i) => i >= 0);\
                 return s > Math.max(...f) && s < items.length - 1;",
                vec![],
            )
            .await
            .expect("order");
        assert_eq!(order, json!(true), "the summary sits after the folded turns");
        // Expand one folded turn: its question is shown.
        wait_css(&browser, "#messages li.msg.folded summary").await.click().await.expect("expand");
        let shown = wait_css(&browser, "#messages li.msg.folded details[open] li.msg.user .text")
            .await
            .text()
            .await
            .expect("text");
        assert_eq!(shown, LONG[folded[0] - 1]);
        browser
            .execute(
                "document.querySelector('#messages li.msg.summary').scrollIntoView({block: 'end'});",
                vec![],
            )
            .await
            .expect("scroll to the summary");
        screenshot("history.png", &browser.screenshot().await.expect("screenshot"));

        // Back and forward move between sessions.
        let second = wait_xpath(&browser, "//ul[@id='session-list']//button[@title='page / local / other']").await;
        second.click().await.expect("open the other session");
        wait_xpath(&browser, "//*[@id='session-title'][contains(., 'other')]").await;
        browser.back().await.expect("back");
        wait_xpath(&browser, &format!("//*[@id='session-title'][. = '{LONG_TITLE}']")).await;
        browser.forward().await.expect("forward");
        wait_xpath(&browser, "//*[@id='session-title'][contains(., 'other')]").await;

        // A rename is stored in the session's state and listed.
        browser.back().await.expect("back");
        wait_xpath(&browser, &format!("//*[@id='session-title'][. = '{LONG_TITLE}']")).await;
        type_into(&browser, "#rename-input", "Energy questions").await;
        wait_css(&browser, "#rename").await.click().await.expect("rename");
        wait_xpath(&browser, "//ul[@id='session-list']//button[contains(., 'Energy questions')]").await;
        let state = running.store.load(&key).await.expect("load").state;
        assert_eq!(state["page:title"], "Energy questions");
        // Out of the coordinator's view: the next prompt's context holds no page event.
        let context = running.store.load_context(&key).await.expect("context");
        assert!(context.events().all(|e| e.author != "page"));
        let _ = other;
        assert_eq!(console_errors(&browser).await, Vec::<String>::new());
    }
    .await;
    browser.close().await.expect("close the browser");
    result
}

// ---------------------------------------------------------------------------------------------
// A page that survives the network (issue 33): a proxy between the page and the server

/// What a proxy answers when the upstream is down: an HTML page, not the service's JSON.
const BAD_GATEWAY: &[u8] = b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\n\
    content-length: 52\r\nconnection: close\r\n\r\n<html><body><h1>502 Bad Gateway</h1></body></html>\n";

/// A TCP proxy on 127.0.0.1 in front of the server: the real network between the page and the
/// service, which can stop a reply where a marker appears in it and drop its connection when
/// told (once; the test first sees the partial reply on the page), and
/// answer the next chat request with a proxy's HTML 502 page (once).
struct Proxy {
    base: String,
    cut_at: Arc<Mutex<Option<Vec<u8>>>>,
    drop_now: Arc<tokio::sync::Notify>,
    bad_gateway: Arc<std::sync::atomic::AtomicBool>,
}

async fn proxy(upstream: &str) -> Proxy {
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let cut_at = Arc::new(Mutex::new(None));
    let drop_now = Arc::new(tokio::sync::Notify::new());
    let bad_gateway = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let faults = Faults {
        cut_at: cut_at.clone(),
        drop_now: drop_now.clone(),
        bad_gateway: bad_gateway.clone(),
    };
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(relay(client, upstream.clone(), faults.clone()));
        }
    });
    Proxy {
        base,
        cut_at,
        drop_now,
        bad_gateway,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The proxy's faults, shared by its connections.
#[derive(Clone)]
struct Faults {
    cut_at: Arc<Mutex<Option<Vec<u8>>>>,
    drop_now: Arc<tokio::sync::Notify>,
    bad_gateway: Arc<std::sync::atomic::AtomicBool>,
}

/// One connection through the proxy.
async fn relay(client: tokio::net::TcpStream, upstream: String, faults: Faults) {
    let Faults {
        cut_at,
        drop_now,
        bad_gateway,
    } = faults;
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
        return;
    };
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let mut seen = Vec::new();
    loop {
        tokio::select! {
            read = from_client.read(&mut up) => {
                let n = match read { Ok(0) | Err(_) => return, Ok(n) => n };
                let chunk = &up[..n];
                if chunk.starts_with(b"POST ")
                    && find(chunk, b"/chat ").is_some()
                    && bad_gateway.swap(false, Ordering::SeqCst)
                {
                    let _ = to_client.write_all(BAD_GATEWAY).await;
                    return;
                }
                if to_server.write_all(chunk).await.is_err() {
                    return;
                }
            }
            read = from_server.read(&mut down) => {
                let n = match read { Ok(0) | Err(_) => return, Ok(n) => n };
                let chunk = &down[..n];
                let marker = cut_at.lock().unwrap().clone();
                if let Some(marker) = marker {
                    let before = seen.len();
                    seen.extend_from_slice(chunk);
                    if let Some(at) = find(&seen, &marker) {
                        // Up to the marker, then the connection is gone mid-reply.
                        let keep = at.saturating_sub(before).min(n);
                        let _ = to_client.write_all(&chunk[..keep]).await;
                        cut_at.lock().unwrap().take();
                        drop_now.notified().await;
                        return;
                    }
                }
                if to_client.write_all(chunk).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_cut_mid_stream_fails_with_retry_and_a_502_page_shows_its_status() {
    let Some(driver) = Chromedriver::start() else {
        return;
    };
    let running = start().await;
    let proxy = proxy(&running.base).await;
    let browser = driver.browser().await;
    let result = async {
        open_page(&browser, &proxy.base).await;
        let empty = wait_css(&browser, "#empty-state")
            .await
            .text()
            .await
            .expect("text");
        assert!(empty.starts_with("Open or start a session"), "{empty}");
        wait_css(&browser, "#new-session")
            .await
            .click()
            .await
            .expect("new session");
        let empty = wait_css(&browser, "#messages li.empty")
            .await
            .text()
            .await
            .expect("text");
        assert_eq!(empty, "No turns yet: ask your first question below.");
        // A first turn through the proxy, whole.
        let input = wait_css(&browser, "#input").await;
        input
            .send_keys(&format!(
                "What limits wind turbine size?{}",
                char::from(Key::Enter)
            ))
            .await
            .expect("send");
        wait_css(&browser, "li.assistant .badge:not(.pending)").await;

        // The connection drops mid-reply: the partial text stays, marked failed, with a Retry.
        *proxy.cut_at.lock().unwrap() = Some(b"zzcut".to_vec());
        let question = "How do blade materials zzcut fatigue at sea?";
        input
            .send_keys(&format!("{question}{}", char::from(Key::Enter)))
            .await
            .expect("send");
        wait_xpath(
            &browser,
            "(//li[contains(@class,'assistant')])[2][contains(@class,'streaming')]\
             /div[@class='text'][contains(., 'You asked')]",
        )
        .await;
        proxy.drop_now.notify_one();
        let failed = wait_css(&browser, "li.assistant.failed").await;
        let partial = failed
            .find(Locator::Css(".text"))
            .await
            .expect("text")
            .text()
            .await
            .expect("text");
        assert!(partial.starts_with("(offline stand-in)"), "{partial}");
        assert!(!partial.contains("zzcut"), "{partial}");
        let badge = failed
            .find(Locator::Css(".badge.failed"))
            .await
            .expect("badge")
            .text()
            .await
            .expect("text");
        assert!(
            badge.starts_with("failed: the reply was cut off"),
            "{badge}"
        );
        assert!(
            browser
                .find(Locator::Css("li.assistant.streaming"))
                .await
                .is_err(),
            "nothing streams for good"
        );
        screenshot(
            "stream-cut.png",
            &browser.screenshot().await.expect("screenshot"),
        );
        failed
            .find(Locator::Css("button.retry"))
            .await
            .expect("Retry")
            .click()
            .await
            .expect("retry");
        let retried = wait_xpath(
            &browser,
            "(//li[contains(@class,'assistant')])[2][not(contains(@class,'failed'))]\
             /span[contains(@class,'badge') and not(contains(@class,'pending'))]",
        )
        .await;
        assert!(!retried.text().await.expect("badge").starts_with("failed"));
        let reply = browser
            .find(Locator::XPath(
                "(//li[contains(@class,'assistant')])[2]/div[@class='text']",
            ))
            .await
            .expect("reply")
            .text()
            .await
            .expect("text");
        assert!(reply.contains(question), "{reply}");
        assert_eq!(
            browser
                .find_all(Locator::Css("li.msg.user"))
                .await
                .expect("asked")
                .len(),
            2
        );

        // A proxy's HTML 502: the status, not a parse error.
        proxy
            .bad_gateway
            .store(true, std::sync::atomic::Ordering::SeqCst);
        input
            .send_keys(&format!(
                "And offshore foundations?{}",
                char::from(Key::Enter)
            ))
            .await
            .expect("send");
        let failed = wait_xpath(
            &browser,
            "(//li[contains(@class,'assistant')])[3][contains(@class,'failed')]",
        )
        .await;
        let badge = failed
            .find(Locator::Css(".badge"))
            .await
            .expect("badge")
            .text()
            .await
            .expect("text");
        assert_eq!(badge, "failed: HTTP 502 Bad Gateway");
        failed
            .find(Locator::Css("button.retry"))
            .await
            .expect("a Retry");
        assert_eq!(console_errors(&browser).await, Vec::<String>::new());
    }
    .await;
    browser.close().await.expect("close the browser");
    result
}

// ---------------------------------------------------------------------------------------------
// Readable compaction (issue 33): the summary as Markdown, safely; the drawer at its top

/// A summary as a model might write it, with markup that must stay text.
const MARKDOWN_SUMMARY: &str = "## Findings\n\
- **Wake losses** grow with *spacing*\n\
- Blades use `carbon` spars\n\
1. first check\n\
2. second check\n\
\n\
| material | fatigue |\n\
| --- | --- |\n\
| glass | high |\n\
\n\
<img src=x onerror=\"document.body.dataset.pwned='img'\"> <script>document.body.dataset.pwned='script'</script>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_renders_as_markdown_without_raw_html_and_panels_open_at_their_top() {
    let Some(driver) = Chromedriver::start() else {
        return;
    };
    let running = start().await;
    let key = running.create("md").await;
    running.chat(&key, "What limits wind farm spacing?").await;
    running.chat(&key, "And blade fatigue offshore?").await;
    // A compaction of turn 1 written by another tool through the events route.
    let turn_1 = running
        .store
        .expand_turns(&key, 1, 1)
        .await
        .expect("turn 1");
    let (start_ts, end_ts) = (
        turn_1.first().expect("events").event.timestamp,
        turn_1.last().expect("events").event.timestamp,
    );
    let r = running
        .http
        .get(running.url(&key, ""))
        .send()
        .await
        .expect("get");
    let etag = r.headers()["etag"].to_str().expect("etag").to_owned();
    let r = running
        .http
        .post(running.url(&key, "/events"))
        .header("If-Match", etag)
        .json(&json!({"author": "user", "actions": {"compaction": {
            "start_timestamp": start_ts, "end_timestamp": end_ts,
            "compacted_content": {"role": "model", "parts": [{"text": MARKDOWN_SUMMARY}]}}}}))
        .send()
        .await
        .expect("append");
    assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text().await);
    let browser = driver.browser().await;
    let result = async {
        browser.set_window_size(1280, 520).await.expect("size");
        open_page(&browser, &format!("{}/#/page/local/md", running.base)).await;
        for scope in ["#messages li.msg.summary", "#context-entries li.entry.summary"] {
            if scope.starts_with("#context") {
                wait_css(&browser, "#tab-context").await.click().await.expect("open context");
                wait_css(&browser, "#drawer:not([data-loading])").await;
            }
            let md = format!("{scope} .markdown");
            wait_css(&browser, &md).await;
            assert_eq!(texts(&browser, &format!("{md} h5")).await, ["Findings"]);
            assert_eq!(texts(&browser, &format!("{md} ul > li")).await.len(), 2);
            assert_eq!(texts(&browser, &format!("{md} ol > li")).await, ["first check", "second check"]);
            assert_eq!(texts(&browser, &format!("{md} strong")).await, ["Wake losses"]);
            assert_eq!(texts(&browser, &format!("{md} em")).await, ["spacing"]);
            assert_eq!(texts(&browser, &format!("{md} code")).await, ["carbon"]);
            assert_eq!(texts(&browser, &format!("{md} table th")).await, ["material", "fatigue"]);
            assert_eq!(texts(&browser, &format!("{md} table td")).await, ["glass", "high"]);
            // The markup is text: no element made from it, nothing run.
            let paragraph = texts(&browser, &format!("{md} p")).await.join(" ");
            assert!(paragraph.contains("<img src=x") && paragraph.contains("<script>"), "{paragraph}");
        }
        let raw = browser
            .execute(
                "return [document.querySelectorAll('img, script:not([src])').length, \
                 document.body.dataset.pwned || null];",
                vec![],
            )
            .await
            .expect("raw html");
        assert_eq!(raw, json!([0, null]));
        // The compaction history by turn numbers and tokens.
        let entry = texts(&browser, "#history li.compaction").await;
        assert_eq!(entry.len(), 1);
        assert!(entry[0].contains("#1: turn 1 folded") && entry[0].contains("tokens"), "{entry:?}");
        let folded = texts(&browser, "#messages li.msg.folded summary").await;
        assert_eq!(folded.len(), 1);
        assert!(folded[0].starts_with("Turn 1 · in summary #1"), "{folded:?}");
        // Each panel opens at its top, whatever the other was scrolled to.
        let scrolled = browser
            .execute(
                "const d = document.getElementById('drawer'); d.scrollTop = d.scrollHeight; return d.scrollTop;",
                vec![],
            )
            .await
            .expect("scroll the drawer");
        assert!(scrolled.as_f64().expect("scrollTop") > 0.0, "the drawer scrolls at this size");
        wait_css(&browser, "#tab-prefs").await.click().await.expect("preferences");
        wait_css(&browser, "#drawer-prefs:not([hidden])").await;
        let top = browser
            .execute("return document.getElementById('drawer').scrollTop;", vec![])
            .await
            .expect("scrollTop");
        assert_eq!(top, json!(0));
        browser.set_window_size(1280, 800).await.expect("size");
        wait_css(&browser, "#tab-context").await.click().await.expect("context again");
        wait_css(&browser, "#drawer:not([data-loading])").await;
        browser
            .execute(
                "document.querySelector('#context-entries li.entry.summary').scrollIntoView({block: 'start'});\
                 document.querySelector('#messages li.msg.summary').scrollIntoView({block: 'start'});",
                vec![],
            )
            .await
            .expect("scroll to the summaries");
        screenshot(
            "summary-markdown.png",
            &browser.screenshot().await.expect("screenshot"),
        );
        assert_eq!(console_errors(&browser).await, Vec::<String>::new());
    }
    .await;
    browser.close().await.expect("close the browser");
    result
}
