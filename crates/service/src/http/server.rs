//! The reference service: axum routes over the lanes, the store port and the coordinator.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use compaction_core::{
    Clock, ContextEntry, Event, IdGenerator, Revision, SessionKey, SessionStore, StoreError,
    Timestamp,
};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::coordinator::{Coordinator, SelectedCoordinator};
use crate::lane::{LaneReport, Lanes};

/// The largest chat message accepted by default: 1 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The server's options.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The largest `message` of a chat request, in bytes (default 1 MiB); larger: 413.
    pub max_message_bytes: usize,
    /// The author of the coordinator's events (default `coordinator`).
    pub coordinator_author: String,
    /// How many evaluation reports `GET .../outcomes` keeps, over all sessions (default 4096).
    pub reports_kept: usize,
    /// How long shutdown waits for running turns and evaluations (default 30 s).
    pub shutdown_bound: Duration,
    /// What the request guard allows beyond loopback same-origin use (see [`super::guard`]).
    pub guard: super::guard::GuardOptions,
    /// Timeouts and limits of connections, bodies, writes, the coordinator and shutdown.
    pub limits: super::listener::Limits,
    /// The turn span shows `__REDACTED__` instead of the user's message (OpenInference's
    /// `OPENINFERENCE_HIDE_INPUTS`; the host reads it).
    pub hide_inputs: bool,
    /// The turn span shows `__REDACTED__` instead of the reply (`OPENINFERENCE_HIDE_OUTPUTS`).
    pub hide_outputs: bool,
    /// How far ahead of the server's clock an external event's timestamp may be (default 60 s);
    /// further: 400 naming `timestamp`, since a later event of the session could never follow it.
    pub max_clock_skew: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            coordinator_author: "coordinator".to_owned(),
            reports_kept: 4096,
            shutdown_bound: Duration::from_secs(30),
            guard: super::guard::GuardOptions::default(),
            max_clock_skew: Duration::from_secs(60),
            limits: super::listener::Limits::default(),
            hide_inputs: false,
            hide_outputs: false,
        }
    }
}

impl ServeOptions {
    /// Sets [`ServeOptions::max_message_bytes`].
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets [`ServeOptions::limits`].
    pub fn limits(mut self, limits: super::listener::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets [`ServeOptions::hide_inputs`] and [`ServeOptions::hide_outputs`].
    pub fn hide(mut self, inputs: bool, outputs: bool) -> Self {
        self.hide_inputs = inputs;
        self.hide_outputs = outputs;
        self
    }

    /// Sets [`ServeOptions::guard`].
    pub fn guard(mut self, guard: super::guard::GuardOptions) -> Self {
        self.guard = guard;
        self
    }

    /// Sets [`ServeOptions::shutdown_bound`].
    pub fn shutdown_bound(mut self, bound: Duration) -> Self {
        self.shutdown_bound = bound;
        self
    }
}

/// The reference service: build it, take its [`Server::router`] or [`Server::serve`] it.
#[derive(Clone)]
pub struct Server {
    pub(super) state: Arc<AppState>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("coordinator", &self.state.coordinator_reason)
            .field("options", &self.state.options)
            .finish_non_exhaustive()
    }
}

pub(super) struct AppState {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) lanes: Lanes,
    pub(super) coordinator: Arc<dyn Coordinator>,
    coordinator_reason: String,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) ids: Arc<dyn IdGenerator>,
    pub(super) options: ServeOptions,
    pub(super) reports: Mutex<VecDeque<Arc<LaneReport>>>,
    stopping: watch::Sender<bool>,
    /// Raised when the shutdown's grace period has passed: running chat streams store what they
    /// streamed as partial and end.
    pub(super) cancel: watch::Sender<bool>,
    page: Arc<super::page::Page>,
}

impl Server {
    /// A server over `store`, evaluating in `lanes`, answering with `coordinator`.
    pub fn new(
        store: Arc<dyn SessionStore>,
        lanes: Lanes,
        coordinator: SelectedCoordinator,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        options: ServeOptions,
    ) -> Self {
        let stopping = watch::channel(false).0;
        let page = super::page::Page::new(store.clone(), lanes.clone(), stopping.subscribe());
        Server {
            state: Arc::new(AppState {
                store,
                lanes,
                coordinator: coordinator.coordinator,
                coordinator_reason: coordinator.reason,
                clock,
                ids,
                options,
                reports: Mutex::new(VecDeque::new()),
                stopping,
                cancel: watch::channel(false).0,
                page,
            }),
        }
    }

    /// Which coordinator answers, and why (the banner's words).
    pub fn coordinator(&self) -> &str {
        &self.state.coordinator_reason
    }

    /// The lanes.
    pub fn lanes(&self) -> &Lanes {
        &self.state.lanes
    }

    /// Serves the preferences over the settings file of `store` (the page's panel and
    /// `/v1/settings`): loads it, runs the lanes on its settings, and from then on applies
    /// every change (saved by the page or written by another process) from the next
    /// evaluation on. Without it the page has no preferences panel.
    pub fn watch_settings(
        &self,
        store: config_ssot::ConfigStore,
    ) -> Result<(), config_ssot::ConfigError> {
        self.state.page.watch_settings(store)
    }

    /// The routes (see the README for each), behind the request guard ([`super::guard`]),
    /// which allows loopback hosts and the configured ones.
    pub fn router(&self) -> Router {
        self.guarded_router(None)
    }

    /// The routes behind the guard, which also allows `bound`'s address as a host.
    fn guarded_router(&self, bound: Option<std::net::SocketAddr>) -> Router {
        let guard = Arc::new(super::guard::Guard::new(
            self.state.options.guard.clone(),
            bound,
        ));
        // The guard runs first (outermost); the error shape applies to what the routes answer.
        self.routes()
            .layer(axum::middleware::from_fn(super::shape::json_errors))
            .layer(axum::middleware::from_fn_with_state(
                guard,
                super::guard::guard,
            ))
    }

    fn routes(&self) -> Router {
        Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .route("/v1/sessions", post(create_session))
            .route("/v1/sessions/{app}/{user}/{id}", get(get_session))
            .route(
                "/v1/sessions/{app}/{user}/{id}/chat",
                post(super::chat::chat),
            )
            .route(
                "/v1/sessions/{app}/{user}/{id}/events",
                get(compaction_events).post(append_event),
            )
            .route("/v1/sessions/{app}/{user}/{id}/outcomes", get(outcomes))
            .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
            .with_state(self.state.clone())
            .merge(super::recall::router(self.state.store.clone()))
            .merge(super::history::router(
                self.state.store.clone(),
                self.state.page.clone(),
            ))
            .merge(self.state.page.router())
            .method_not_allowed_fallback(|| async {
                ApiError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "this route does not take that method (see the README's route table)",
                )
            })
    }

    /// Serves on `listener` (see [`super::listener`]: the connection cap, hyper's header and
    /// idle timeouts, `TCP_NODELAY`) until `shutdown` completes; then stops taking turns, ends
    /// the event streams, lets running turns and evaluations finish within
    /// [`super::listener::Limits::grace`] (evaluations also within
    /// [`ServeOptions::shutdown_bound`]), and cancels what remains: chat streams store what they
    /// streamed as partial, and no compaction is half-written (its append is one transaction).
    /// True when everything ended by itself in time.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<bool> {
        let state = self.state.clone();
        tokio::spawn(async move {
            shutdown.await;
            state.stopping.send_replace(true);
        });
        let router = self.guarded_router(listener.local_addr().ok());
        let limits = self.state.options.limits.clone();
        let mut stopping = self.state.stopping.subscribe();
        let connections = super::listener::serve(
            listener,
            router,
            &limits,
            self.state.stopping.subscribe(),
            &self.state.cancel,
        );
        let stop_started = async {
            let _ = stopping.wait_for(|s| *s).await.map(|_| ());
            tokio::time::Instant::now()
        };
        let (drained, started) = tokio::join!(connections, stop_started);
        let left = limits.grace.saturating_sub(started.elapsed());
        let bound = left.min(self.state.options.shutdown_bound);
        Ok(self.state.lanes.shutdown(bound).await && drained)
    }
}

/// Ctrl-C or SIGTERM, whichever comes first.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// An error answer: `{"error": {"status": 400, "message": "..."}}`.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub(super) fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub(super) fn store(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(key) => {
                ApiError::new(StatusCode::NOT_FOUND, format!("session {key} not found"))
            }
            StoreError::AlreadyExists(key) => ApiError::new(
                StatusCode::CONFLICT,
                format!("session {key} already exists"),
            ),
            StoreError::Stale {
                key,
                expected,
                actual,
            } => ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "session {key} is at revision {actual}, not {expected} (If-Match): \
                     nothing written"
                ),
            ),
            e @ StoreError::Expand { .. } => ApiError::new(StatusCode::NOT_FOUND, e.to_string()),
            e @ StoreError::NonIncreasingTimestamp { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
            }
            // A reused event id (the store's unique key): the client's conflict, not ours.
            e if e.kind() == compaction_core::FailureKind::AlreadyExists => {
                ApiError::new(StatusCode::CONFLICT, format!("{e}: nothing written"))
            }
            e => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}")),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        super::shape::error(self.status, self.message)
    }
}

pub(super) type ApiResult<T> = Result<T, ApiError>;

/// The request body as a JSON object, read up to `limit` bytes (413 beyond) within the body
/// timeout (408 after it).
pub(super) async fn json_object(
    s: &AppState,
    body: Body,
    limit: usize,
    expected: &str,
) -> ApiResult<Map<String, Value>> {
    let timeout = s.options.limits.body_read;
    let read = tokio::time::timeout(timeout, axum::body::to_bytes(body, limit))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within {timeout:?}"),
            )
        })?;
    let bytes: Bytes = read.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over {limit} bytes"),
        )
    })?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(format!(
            "request body must be a JSON object: {expected}"
        ))),
        Err(e) => Err(ApiError::bad_request(format!(
            "request body is not JSON ({e}): expected {expected}"
        ))),
    }
}

pub(super) fn string_field<'a>(
    body: &'a Map<String, Value>,
    field: &str,
    expected: &str,
) -> ApiResult<Option<&'a str>> {
    match body.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::bad_request(format!(
            "field `{field}` must be a string, got {}: expected {expected}",
            type_name(other)
        ))),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

async fn healthz(State(s): State<Arc<AppState>>) -> impl IntoResponse {
    axum::Json(json!({
        "status": if *s.stopping.borrow() { "stopping" } else { "ok" },
        "coordinator": s.coordinator_reason,
        "active_lanes": s.lanes.active_lanes(),
    }))
}

/// Readiness: the store answers (a probe of a session key nobody uses; not found is ready).
async fn readyz(State(s): State<Arc<AppState>>) -> Response {
    let probe = SessionKey::new("readyz", "readyz", "readyz");
    let ready = match s.store.gate_snapshot(&probe).await {
        Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
        Err(e) => Err(e.to_string()),
    };
    let stopping = *s.stopping.borrow();
    match ready {
        Ok(()) if !stopping => axum::Json(json!({ "status": "ready" })).into_response(),
        Ok(()) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "stopping").into_response(),
        Err(e) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}")).into_response()
        }
    }
}

const CREATE_FORM: &str = r#"{"app": "<app>", "user": "<user>", "id": "<session id>"}"#;

async fn create_session(State(s): State<Arc<AppState>>, body: Body) -> ApiResult<Response> {
    let body = json_object(&s, body, 64 * 1024, CREATE_FORM).await?;
    let field = |name: &str| -> ApiResult<String> {
        match string_field(&body, name, CREATE_FORM)? {
            Some(v) if valid_key_part(v) => Ok(v.to_owned()),
            Some(_) => Err(ApiError::bad_request(format!(
                "field `{name}` must be non-empty and contain no `/` and no control character: \
                 expected {CREATE_FORM}"
            ))),
            None => Err(ApiError::bad_request(format!(
                "missing field `{name}`: expected {CREATE_FORM}"
            ))),
        }
    };
    let (app, user) = (field("app")?, field("user")?);
    let id = match body.get("id") {
        None => s.ids.next_id(),
        Some(_) => field("id")?,
    };
    let key = route_key(app, user, id)?;
    let session = s
        .store
        .create_session(&key, Map::new())
        .await
        .map_err(ApiError::store)?;
    s.page.remember(&key);
    let mut response = (
        StatusCode::CREATED,
        axum::Json(json!({
            "app": key.app_name, "user": key.user_id, "id": key.session_id,
            "revision": session.revision,
        })),
    )
        .into_response();
    set_etag(&mut response, session.revision);
    Ok(response)
}

/// A part of a session key (app, user, id) the server accepts: not blank, no `/` (it is a path
/// segment) and no control character (NUL and the rest are refused the same way on every store).
fn valid_key_part(v: &str) -> bool {
    !v.trim().is_empty() && !v.contains('/') && !v.chars().any(char::is_control)
}

/// The session key of a route, refused with 400 when a part is not [`valid_key_part`].
pub(super) fn route_key(app: String, user: String, id: String) -> ApiResult<SessionKey> {
    for (name, part) in [("app", &app), ("user", &user), ("id", &id)] {
        if !valid_key_part(part) {
            return Err(ApiError::bad_request(format!(
                "the session's {name} in the path must be non-empty with no control character"
            )));
        }
    }
    Ok(SessionKey::new(app, user, id))
}

fn set_etag(response: &mut Response, revision: Revision) {
    if let Ok(v) = HeaderValue::from_str(&format!("\"{revision}\"")) {
        response.headers_mut().insert(header::ETAG, v);
    }
}

async fn get_session(
    State(s): State<Arc<AppState>>,
    Path((app, user, id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let key = route_key(app, user, id)?;
    let revision = s
        .store
        .gate_snapshot(&key)
        .await
        .map_err(ApiError::store)?
        .revision;
    let context = s.store.load_context(&key).await.map_err(ApiError::store)?;
    let history = s
        .store
        .compaction_history(&key)
        .await
        .map_err(ApiError::store)?;
    let entries: Vec<Value> = context
        .entries
        .iter()
        .map(|entry| match entry {
            ContextEntry::Summary(summary) => json!({
                "kind": "summary",
                "event_id": summary.event_id,
                "start_timestamp": summary.compaction.start_timestamp,
                "end_timestamp": summary.compaction.end_timestamp,
                "text": summary.compaction.summary_text(),
            }),
            ContextEntry::Event(event) => json!({
                "kind": "event",
                "event_id": event.id,
                "author": event.author,
                "text": event.text(),
            }),
            // A kind of entry added to the core after this build: named, not shown.
            _ => json!({ "kind": "other" }),
        })
        .collect();
    let history: Vec<Value> = history
        .iter()
        .map(|c| {
            json!({
                "event_id": c.event_id,
                "start_timestamp": c.start_timestamp,
                "end_timestamp": c.end_timestamp,
                "summary_chars": c.summary_chars,
                "subsumed": c.subsumed,
                "receipt": c.receipt,
            })
        })
        .collect();
    let mut response = axum::Json(json!({
        "session": key.to_string(),
        "revision": revision,
        "context": entries,
        "compaction_history": history,
    }))
    .into_response();
    set_etag(&mut response, revision);
    Ok(response)
}

/// How often the server's own append is retried after another writer moved the session on.
const APPEND_ATTEMPTS: usize = 8;

/// Appends the server's own event at the session's latest revision. The lane keeps
/// evaluations out of a running turn, but an external writer may append at the same moment:
/// a stale revision is read again, and an event that another writer's later-stamped event
/// overtook is stamped again (after that event and not before the clock), so the server's
/// own timestamp conflict never fails a turn.
pub(super) async fn append_latest(
    state: &AppState,
    key: &SessionKey,
    mut event: Event,
) -> Result<Revision, StoreError> {
    let mut attempts = 1;
    loop {
        let revision = state.store.gate_snapshot(key).await?.revision;
        match state.store.append(key, revision, event.clone()).await {
            Err(StoreError::Stale { .. }) if attempts < APPEND_ATTEMPTS => {}
            Err(StoreError::NonIncreasingTimestamp { latest, .. })
                if attempts < APPEND_ATTEMPTS =>
            {
                event.timestamp = restamp(state.clock.now(), latest);
            }
            other => return other,
        }
        attempts += 1;
    }
}

/// A timestamp after `latest` and not before `now`.
fn restamp(now: Timestamp, latest: Timestamp) -> Timestamp {
    if now > latest {
        return now;
    }
    let seconds = latest.seconds();
    // The smallest step that still moves a timestamp of this size (1 µs, or the float's
    // spacing where that is coarser).
    let step = (seconds.abs() * f64::EPSILON * 2.0).max(1e-6);
    Timestamp::new(seconds + step).unwrap_or(latest)
}

async fn compaction_events(
    State(s): State<Arc<AppState>>,
    Path((app, user, id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let key = route_key(app, user, id)?;
    s.store.gate_snapshot(&key).await.map_err(ApiError::store)?;
    let mut reports = s.lanes.subscribe();
    let mut stopping = s.stopping.subscribe();
    let (tx, rx) = mpsc::channel::<SseEvent>(16);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = async { let _ = stopping.wait_for(|stop| *stop).await; } => return,
                () = tx.closed() => return,
                report = reports.recv() => match report {
                    Ok(report) if report.key == key => {
                        let Ok(event) = SseEvent::default().event("compaction").json_data(&*report) else {
                            continue;
                        };
                        if tx.send(event).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        let data = json!({ "missed": n }).to_string();
                        let _ = tx.send(SseEvent::default().event("lagged").data(data)).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    let stream = tokio_stream::StreamExt::map(ReceiverStream::new(rx), Ok::<_, Infallible>);
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

async fn outcomes(
    State(s): State<Arc<AppState>>,
    Path((app, user, id)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let key = route_key(app, user, id)?;
    s.store.gate_snapshot(&key).await.map_err(ApiError::store)?;
    let reports: Vec<Arc<LaneReport>> = s
        .reports
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|r| r.key == key)
        .cloned()
        .collect();
    let reports: Vec<&LaneReport> = reports.iter().map(AsRef::as_ref).collect();
    Ok(axum::Json(reports).into_response())
}

const EVENT_FORM: &str = r#"an ADK event such as {"author": "user", "content": {"role": "user", "parts": [{"text": "..."}]}} (id, invocation_id and timestamp are filled in when absent)"#;

async fn append_event(
    State(s): State<Arc<AppState>>,
    Path((app, user, id)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let key = route_key(app, user, id)?;
    let Some(if_match) = headers.get(header::IF_MATCH) else {
        return Err(ApiError::new(
            StatusCode::PRECONDITION_REQUIRED,
            "header `If-Match` is required: the session's revision (its ETag), for example \
             If-Match: \"7\"",
        ));
    };
    let expected = revision_of(if_match).ok_or_else(|| {
        ApiError::bad_request(format!(
            "header `If-Match` must be a revision in double quotes such as \"7\" (the session's \
             ETag), got {:?}",
            String::from_utf8_lossy(if_match.as_bytes())
        ))
    })?;
    let mut body = json_object(&s, body, s.options.max_message_bytes, EVENT_FORM).await?;
    for field in ["author", "id", "invocation_id"] {
        match string_field(&body, field, EVENT_FORM)? {
            None if field == "author" => {
                return Err(ApiError::bad_request(format!(
                    "missing field `author`: expected {EVENT_FORM}"
                )));
            }
            Some(v) if v.trim().is_empty() || v.chars().any(char::is_control) => {
                return Err(ApiError::bad_request(format!(
                    "field `{field}` must be non-empty with no control character: expected \
                     {EVENT_FORM}"
                )));
            }
            _ => {}
        }
    }
    s.store.gate_snapshot(&key).await.map_err(ApiError::store)?;
    if !body.contains_key("id") {
        body.insert("id".into(), Value::String(s.ids.next_id()));
    }
    if !body.contains_key("invocation_id") && !body.contains_key("invocationId") {
        body.insert(
            "invocation_id".into(),
            Value::String(format!("external-{}", s.ids.next_id())),
        );
    }
    if !body.contains_key("timestamp") {
        body.insert("timestamp".into(), json!(s.clock.now()));
    }
    let event: Event = serde_json::from_value(Value::Object(body)).map_err(|e| {
        ApiError::bad_request(format!("not an ADK event ({e}): expected {EVENT_FORM}"))
    })?;
    validate_external(&s, &key, &event).await?;
    let revision = s
        .store
        .append(&key, expected, event)
        .await
        .map_err(ApiError::store)?;
    let mut response = (
        StatusCode::CREATED,
        axum::Json(json!({ "revision": revision })),
    )
        .into_response();
    set_etag(&mut response, revision);
    Ok(response)
}

/// The revision of an `If-Match` value: exactly `"N"` (the ETag the server sends), nothing else.
fn revision_of(value: &HeaderValue) -> Option<Revision> {
    let digits = value
        .to_str()
        .ok()?
        .trim()
        .strip_prefix('"')?
        .strip_suffix('"')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok().map(Revision))
        .flatten()
}

/// What an external writer may not append, because the session could not be used after it: a
/// timestamp further ahead of the server's clock than [`ServeOptions::max_clock_skew`] (every
/// later event would be refused as not increasing), and a compaction whose range is reversed or
/// lies outside the session's events (it would hide or repeat the history).
async fn validate_external(s: &AppState, key: &SessionKey, event: &Event) -> ApiResult<()> {
    let limit = s.clock.now().seconds() + s.options.max_clock_skew.as_secs_f64();
    if event.timestamp.seconds() > limit {
        return Err(ApiError::bad_request(format!(
            "field `timestamp` is {} s ahead of the server's clock (at most {} s allowed): \
             expected epoch seconds, omitted to let the server stamp the event",
            (event.timestamp.seconds() - s.clock.now().seconds()).round(),
            s.options.max_clock_skew.as_secs()
        )));
    }
    let Some(compaction) = &event.actions.compaction else {
        return Ok(());
    };
    if compaction.start_timestamp > compaction.end_timestamp {
        return Err(ApiError::bad_request(format!(
            "field `actions.compaction`: start_timestamp {} is after end_timestamp {}: expected \
             start <= end",
            compaction.start_timestamp, compaction.end_timestamp
        )));
    }
    let session = s.store.load(key).await.map_err(ApiError::store)?;
    let covered = session
        .events
        .iter()
        .filter(|e| e.actions.compaction.is_none())
        .map(|e| e.timestamp);
    let (first, last) = covered.fold(
        (None, None),
        |(lo, hi): (Option<Timestamp>, Option<Timestamp>), t| {
            (
                Some(lo.map_or(t, |l| l.min(t))),
                Some(hi.map_or(t, |h| h.max(t))),
            )
        },
    );
    match (first, last) {
        (Some(first), Some(last))
            if compaction.start_timestamp >= first && compaction.end_timestamp <= last =>
        {
            Ok(())
        }
        _ => Err(ApiError::bad_request(format!(
            "field `actions.compaction`: the range {}..{} must lie within the session's events \
             ({}): a compaction covers events the session holds",
            compaction.start_timestamp,
            compaction.end_timestamp,
            match (first, last) {
                (Some(f), Some(l)) => format!("{f}..{l}"),
                _ => "none yet".to_owned(),
            }
        ))),
    }
}
