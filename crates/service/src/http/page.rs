//! The chat and preferences page (served at `/`): plain HTML, CSS and JavaScript modules
//! embedded in the binary (no build step, nothing fetched from elsewhere), and the endpoints
//! only the page needs beside the service's own: the sessions this server has served, the
//! prompt tokens per turn with and without compaction, and the preferences
//! ([`super::settings`]).
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /` | the page |
//! | `GET /assets/{name}` | its scripts and stylesheet |
//! | `GET /v1/sessions` | the sessions created or opened here since the start, with title and last activity, most recent first (in memory: the store port lists no sessions) |
//! | `GET /v1/sessions/{app}/{user}/{id}/tokens` | prompt tokens per turn and for the next prompt, with and without compaction |
//! | `GET /v1/settings` | the eight settings with their types, hints, clamp warning |
//! | `PUT /v1/settings` | save `{key: value, ...}` through config-ssot; 422 names the field |
//! | `GET /v1/settings/events` | SSE: the current `settings`, then every change |

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use compaction_core::{SessionKey, SessionStore, StoreError};
use config_ssot::{ConfigError, ConfigStore};
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::settings::SettingsHub;
use crate::lane::Lanes;

/// The page's files: name, content type, text.
const ASSETS: [(&str, &str, &str); 8] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../assets/index.html"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../../assets/app.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/api.js"),
    ),
    (
        "chat.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/chat.js"),
    ),
    (
        "drawer.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/drawer.js"),
    ),
    (
        "markdown.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/markdown.js"),
    ),
    (
        "prefs.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/prefs.js"),
    ),
];

/// The session state key holding the title the page shows (its first question, shortened,
/// until renamed).
pub(super) const TITLE_KEY: &str = "page:title";

/// How many sessions `GET /v1/sessions` lists.
const SESSIONS_LISTED: usize = 200;

/// The page's state beside the server's.
pub(super) struct Page {
    store: Arc<dyn SessionStore>,
    lanes: Lanes,
    stopping: watch::Receiver<bool>,
    sessions: Mutex<VecDeque<SessionKey>>,
    settings: OnceLock<Arc<SettingsHub>>,
}

impl Page {
    pub(super) fn new(
        store: Arc<dyn SessionStore>,
        lanes: Lanes,
        stopping: watch::Receiver<bool>,
    ) -> Arc<Page> {
        Arc::new(Page {
            store,
            lanes,
            stopping,
            sessions: Mutex::new(VecDeque::new()),
            settings: OnceLock::new(),
        })
    }

    /// A session created here: first in the page's list.
    pub(super) fn remember(&self, key: &SessionKey) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|k| k != key);
        sessions.push_front(key.clone());
        sessions.truncate(SESSIONS_LISTED);
    }

    /// Watches the settings file of `store` and serves the preferences API over it.
    pub(super) fn watch_settings(&self, store: ConfigStore) -> Result<(), ConfigError> {
        let hub = SettingsHub::start(store, self.lanes.clone())?;
        // A second call keeps the first watcher (the hub dropped here stops its thread).
        let _ = self.settings.set(hub);
        Ok(())
    }

    pub(super) fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/", get(index))
            .route("/assets/{name}", get(asset))
            .route("/v1/sessions", get(list_sessions))
            .route("/v1/sessions/{app}/{user}/{id}/tokens", get(tokens))
            .route("/v1/settings", get(get_settings).put(put_settings))
            .route("/v1/settings/events", get(settings_events))
            .with_state(self.clone())
    }

    fn hub(&self) -> Option<Arc<SettingsHub>> {
        self.settings.get().cloned()
    }
}

fn no_settings() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "this server was started without a settings file: no preferences",
        None,
    )
}

/// `{"error": {"status": 422, "message": "...", "field": "<key>"}}` (`field` only when the
/// error is about one key): the shape of every error of the service.
fn error(status: StatusCode, message: impl Into<String>, field: Option<&str>) -> Response {
    let mut body = json!({ "status": status.as_u16(), "message": message.into() });
    if let Some(field) = field {
        body["field"] = json!(field);
    }
    (status, axum::Json(json!({ "error": body }))).into_response()
}

fn store_error(e: StoreError) -> Response {
    match e {
        StoreError::NotFound(key) => error(
            StatusCode::NOT_FOUND,
            format!("session {key} not found"),
            None,
        ),
        e => error(StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}"), None),
    }
}

fn file(name: &str) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, text)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *text,
        )
            .into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no asset `{name}`"), None),
    }
}

async fn index() -> Response {
    file("index.html")
}

async fn asset(Path(name): Path<String>) -> Response {
    if name == "index.html" {
        return error(StatusCode::NOT_FOUND, "the page is at /", None);
    }
    file(&name)
}

/// The remembered sessions with their title (the session state's [`TITLE_KEY`], set by the
/// page through an event's `state_delta`; `null` until then) and last activity (the newest
/// event's timestamp, else `null`), most recent activity first. Each is read with the port's
/// tail window of one event, not the whole history; a session the store no longer has is
/// left out.
async fn list_sessions(State(page): State<Arc<Page>>) -> Response {
    let keys: Vec<SessionKey> = page
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    let mut sessions: Vec<(f64, usize, Value)> = Vec::with_capacity(keys.len());
    for (order, k) in keys.iter().enumerate() {
        let (title, last) = match page.store.load_live_tail_window(k, 1).await {
            Ok(window) => {
                let s = window.session;
                let last = s.events.last().map(|e| e.timestamp.seconds());
                (title(page.store.as_ref(), k, &s.state).await, last)
            }
            Err(StoreError::NotFound(_)) => continue,
            Err(e) => return store_error(e),
        };
        // Never active: first, by creation, newest first (the list's own order).
        sessions.push((
            last.unwrap_or(f64::INFINITY),
            order,
            json!({ "app": k.app_name, "user": k.user_id, "id": k.session_id,
                    "title": title, "last_activity": last }),
        ));
    }
    sessions.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let sessions: Vec<Value> = sessions.into_iter().map(|(_, _, v)| v).collect();
    axum::Json(json!({ "sessions": sessions })).into_response()
}

/// The session's title: the state's [`TITLE_KEY`] when set, else its first question.
pub(super) async fn title(
    store: &dyn SessionStore,
    key: &SessionKey,
    state: &Map<String, Value>,
) -> Option<String> {
    match state.get(TITLE_KEY) {
        Some(Value::String(t)) if !t.trim().is_empty() => Some(t.clone()),
        _ => first_question(store, key).await,
    }
}

/// The characters of a title made from the first question.
const TITLE_CHARS: usize = 60;

/// The session's first question, shortened to [`TITLE_CHARS`] (with an ellipsis); `None`
/// before the first turn or when the store cannot say.
pub(super) async fn first_question(store: &dyn SessionStore, key: &SessionKey) -> Option<String> {
    let events = store.expand_turns(key, 1, 1).await.ok()?;
    let text = events
        .iter()
        .find(|r| r.event.is_user())
        .map(|r| r.event.text())?;
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(if text.chars().count() > TITLE_CHARS {
        let cut: String = text.chars().take(TITLE_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    } else {
        text
    })
}

/// Prompt tokens per completed turn, with and without compaction ([`super::token_series`]).
async fn tokens(
    State(page): State<Arc<Page>>,
    Path((app, user, id)): Path<(String, String, String)>,
) -> Response {
    let key = match super::api::route_key(app, user, id) {
        Ok(key) => key,
        Err(refusal) => return refusal.into_response(),
    };
    let session = match page.store.load(&key).await {
        Ok(session) => session,
        Err(e) => return store_error(e),
    };
    let context = match page.store.load_context(&key).await {
        Ok(context) => context,
        Err(e) => return store_error(e),
    };
    axum::Json(super::token_series::token_series(&session.events, &context)).into_response()
}

async fn get_settings(State(page): State<Arc<Page>>) -> Response {
    match page.hub() {
        Some(hub) => axum::Json(hub.snapshot("start")).into_response(),
        None => no_settings(),
    }
}

const SETTINGS_FORM: &str =
    r#"a JSON object of settings, e.g. {"adaptive_compaction_threshold": 0.8}"#;

/// Saves the settings a page sent. Values may be JSON values or the text typed in a field;
/// config-ssot parses each as its key requires and validates them together, so its errors
/// (422, naming the field) are the ones `compaction config set` gives.
async fn put_settings(State(page): State<Arc<Page>>, body: Body) -> Response {
    let Some(hub) = page.hub() else {
        return no_settings();
    };
    let bytes: Bytes = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body over 65536 bytes",
                None,
            );
        }
    };
    let body: Map<String, Value> = match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("request body must be a JSON object: expected {SETTINGS_FORM}"),
                None,
            );
        }
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("request body is not JSON ({e}): expected {SETTINGS_FORM}"),
                None,
            );
        }
    };
    let mut pairs = Vec::new();
    for (key, value) in body {
        let text = match value {
            Value::String(s) => s,
            Value::Bool(_) | Value::Number(_) => value.to_string(),
            other => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "field `{key}` must be a boolean, a number or a string, got {other}: \
                         expected {SETTINGS_FORM}"
                    ),
                    Some(&key),
                );
            }
        };
        pairs.push((key, text));
    }
    match tokio::task::spawn_blocking(move || hub.save(&pairs)).await {
        Ok(Ok(snapshot)) => axum::Json(snapshot).into_response(),
        Ok(Err(e)) => config_error(&e),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the save did not finish: {e}"),
            None,
        ),
    }
}

/// A value error names its field (422); a file nobody can use is a conflict (409); the
/// rest is the file system's (503). Nothing was written in any case.
fn config_error(e: &ConfigError) -> Response {
    let status = match e {
        _ if e.key().is_some() => StatusCode::UNPROCESSABLE_ENTITY,
        ConfigError::Io { .. }
        | ConfigError::PermissionDenied { .. }
        | ConfigError::NoDataDirectory { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::CONFLICT,
    };
    error(status, e.to_string(), e.key())
}

async fn settings_events(State(page): State<Arc<Page>>) -> Response {
    let Some(hub) = page.hub() else {
        return no_settings();
    };
    let mut changes = hub.subscribe();
    let first = hub.snapshot("start");
    let mut stopping = page.stopping.clone();
    let (tx, rx) = mpsc::channel::<SseEvent>(16);
    tokio::spawn(async move {
        let event = |data: &Value| SseEvent::default().event("settings").data(data.to_string());
        if tx.send(event(&first)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                () = async { let _ = stopping.wait_for(|stop| *stop).await; } => return,
                () = tx.closed() => return,
                change = changes.recv() => match change {
                    Ok(snapshot) => {
                        if tx.send(event(&snapshot)).await.is_err() {
                            return;
                        }
                    }
                    // Missed some: the latest state is what matters.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if tx.send(event(&hub.snapshot("file"))).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    let stream = tokio_stream::StreamExt::map(ReceiverStream::new(rx), Ok::<_, Infallible>);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
