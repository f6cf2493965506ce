//! Lossless recall over HTTP: the store port's `search` and `expand`, read-only.
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /v1/sessions/{app}/{user}/{id}/recall?q=TEXT&limit=N&pipeline=true` | `{"hits": [...]}`, best first |
//! | `GET /v1/sessions/{app}/{user}/{id}/compactions/{event_id}/turns` | `{"events": [...]}`: the covered events verbatim |
//!
//! A hit is `{turn, event_id, author, timestamp, snippet, text, covered_by}` (compaction-core's
//! `RecallHit`); an expanded event is `{turn, covered_by, event}` with the event as stored.
//! A bad query, limit or session key answers 400, an unknown session or compaction 404, each as
//! `{"error": {"status", "message"}}` naming the parameter and the expected form.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use compaction_core::RecalledEvent;
use compaction_core::store_support as recall;
use compaction_core::{RecallQuery, SessionStore};
use serde_json::{Value, json};

use super::api::{ApiError, ApiResult, route_key};

/// The recall routes over `store`.
pub(super) fn router(store: Arc<dyn SessionStore>) -> Router {
    Router::new()
        .route("/v1/sessions/{app}/{user}/{id}/recall", get(search))
        .route(
            "/v1/sessions/{app}/{user}/{id}/compactions/{event_id}/turns",
            get(expand),
        )
        .with_state(store)
}

const SEARCH_FORM: &str = "?q=<words>&limit=<1-100>[&pipeline=true]";

/// `GET .../recall`.
async fn search(
    State(store): State<Arc<dyn SessionStore>>,
    Path((app, user, id)): Path<(String, String, String)>,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<axum::Json<Value>> {
    let bad = |message: String| ApiError::bad_request(format!("{message}: expected {SEARCH_FORM}"));
    let text = params
        .get("q")
        .ok_or_else(|| bad("parameter `q` is missing".to_owned()))?;
    let query = RecallQuery::parse(text).map_err(|e| bad(format!("parameter `q`: {e}")))?;
    let limit = match params.get("limit") {
        None => None,
        Some(n) => Some(n.parse::<usize>().map_err(|_| {
            bad(format!(
                "parameter `limit` must be a whole number, got {n:?}"
            ))
        })?),
    };
    let limit = recall::check_limit(limit).map_err(|e| bad(format!("parameter `limit`: {e}")))?;
    let pipeline = match params.get("pipeline").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(bad(format!(
                "parameter `pipeline` must be true or false, got {other:?}"
            )));
        }
    };
    let key = route_key(app, user, id)?;
    let hits = store
        .search(&key, &query.with_pipeline(pipeline), limit)
        .await
        .map_err(ApiError::store)?;
    Ok(axum::Json(json!({ "hits": hits })))
}

/// `GET .../compactions/{event_id}/turns`.
async fn expand(
    State(store): State<Arc<dyn SessionStore>>,
    Path((app, user, id, event_id)): Path<(String, String, String, String)>,
) -> ApiResult<axum::Json<Value>> {
    let key = route_key(app, user, id)?;
    let events = store
        .expand(&key, &event_id)
        .await
        .map_err(ApiError::store)?;
    Ok(axum::Json(
        json!({ "events": events.iter().map(recalled_json).collect::<Vec<_>>() }),
    ))
}

/// `{turn, covered_by, text, event}`.
pub(super) fn recalled_json(recalled: &RecalledEvent) -> Value {
    json!({
        "turn": recalled.turn,
        "covered_by": recalled.covered_by,
        "text": recall::searchable_text(&recalled.event),
        "event": recalled.event,
    })
}
