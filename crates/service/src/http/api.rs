//! The service's error answer and request parsing: `ApiError` (`{"error": {status, message}}`),
//! a JSON object body with named fields, and a session key from the route.

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use compaction_core::{SessionKey, StoreError};
use serde_json::{Map, Value};

use super::server::AppState;

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

/// A part of a session key (app, user, id) the server accepts: not blank, no `/` (it is a path
/// segment) and no control character (NUL and the rest are refused the same way on every store).
pub(super) fn valid_key_part(v: &str) -> bool {
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
