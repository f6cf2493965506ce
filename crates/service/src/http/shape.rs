//! One error shape for every refusal: an answer with an error status that is not already JSON
//! (an extractor's `text/plain` rejection such as a path that does not decode, an empty 404 or
//! 405 from a nested router) is rewritten as `{"error": {"status", "message"}}`, keeping its
//! status, its headers and its text as the message. Requests whose target or headers are larger
//! than the service reads are refused here with 414 and 431 in the same shape (hyper's own
//! bare 431 is left only for heads beyond its read buffer, about 400 KB).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The longest request target served, in bytes.
pub(crate) const MAX_URI_BYTES: usize = 8 * 1024;
/// The most header bytes (names and values) served.
pub(crate) const MAX_HEADER_BYTES: usize = 32 * 1024;
/// The most of a non-JSON error body kept as the message.
const MAX_MESSAGE_BYTES: usize = 4 * 1024;

/// The service's one error answer: `{"error": {"status", "message"}}` with `status`.
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(body_of(status, &message.into()))).into_response()
}

fn body_of(status: StatusCode, message: &str) -> serde_json::Value {
    json!({ "error": { "status": status.as_u16(), "message": message } })
}

/// The middleware: the size refusals, then the shape of whatever answers.
pub(crate) async fn json_errors(request: Request, next: Next) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        return error(
            StatusCode::URI_TOO_LONG,
            format!("the request target is {target} bytes, over the limit of {MAX_URI_BYTES}"),
        );
    }
    let headers: usize = request
        .headers()
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    if headers > MAX_HEADER_BYTES {
        return error(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request headers are {headers} bytes, over the limit of {MAX_HEADER_BYTES}"
            ),
        );
    }
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_MESSAGE_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("refused")
            .to_lowercase()
    } else {
        text
    };
    let body = body_of(status, &message).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}
