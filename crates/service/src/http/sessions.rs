//! The session routes: health, readiness, creating a session, reading it (with its ETag),
//! appending an event against a revision, the compaction events and the outcomes.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use compaction_core::{ContextEntry, Event, Revision, SessionKey, StoreError, Timestamp};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::lane::LaneReport;

use super::api::{ApiError, ApiResult, json_object, route_key, string_field, valid_key_part};
use super::server::AppState;

pub(super) async fn healthz(State(s): State<Arc<AppState>>) -> impl IntoResponse {
    axum::Json(json!({
        "status": if *s.stopping.borrow() { "stopping" } else { "ok" },
        "coordinator": s.coordinator_reason,
        "active_lanes": s.lanes.active_lanes(),
    }))
}

/// Readiness: the store answers (a probe of a session key nobody uses; not found is ready).
pub(super) async fn readyz(State(s): State<Arc<AppState>>) -> Response {
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

pub(super) async fn create_session(
    State(s): State<Arc<AppState>>,
    body: Body,
) -> ApiResult<Response> {
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

fn set_etag(response: &mut Response, revision: Revision) {
    if let Ok(v) = HeaderValue::from_str(&format!("\"{revision}\"")) {
        response.headers_mut().insert(header::ETAG, v);
    }
}

pub(super) async fn get_session(
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

pub(super) async fn compaction_events(
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

pub(super) async fn outcomes(
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

pub(super) async fn append_event(
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
