//! The whole conversation, paged: what the page shows after a reload (every turn, folded or
//! not), from the store port's lossless-recall pieces (`expand_turns`, `expand`,
//! `compaction_history`) with turn numbers as lossless recall defines them (`compaction_core::store_support::scan::turns_before`).
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /v1/sessions/{app}/{user}/{id}/history?before=N&limit=M` | the turns `N-M ..= N-1` (the newest when `before` is absent) |
//!
//! The answer is `{"turns": [...], "total_turns", "title", "earlier", "compactions": [...]}`
//! (`title`: the session state's `page:title`, else its first question, shortened): a turn is
//! `{turn, covered_by, summary, events: [{event_id, author, text, timestamp}]}` where
//! `covered_by` is the id of the rendered compaction that folds it and `summary` that
//! compaction's number in the history (1-based, oldest first); `earlier` is the `before` of the
//! previous page (`null` at the first turn). A compaction is `{number, event_id, subsumed,
//! summary_chars, first_turn, last_turn, covered_tokens, summary_tokens, receipt}`, tokens by
//! the core's estimator, `receipt` as the store holds it (or null). The route never writes; it
//! remembers the session in the page's list (a session opened by its address after a restart is
//! listed again).
//!
//! Cost: two port calls for the turns, one `expand` per compaction (each is the store's
//! indexed read where it has one; the port's defaults read the whole session).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use compaction_core::ExpandError;
use compaction_core::RecalledEvent;
use compaction_core::{CharsPerToken, SessionKey, SessionStore, StoreError, TokenEstimator as _};
use serde_json::{Value, json};

use super::api::{ApiError, ApiResult, route_key};
use super::page::Page;

/// Turns one page holds when the caller names no limit.
const DEFAULT_LIMIT: usize = 50;
/// The most turns one page holds.
const MAX_LIMIT: usize = 200;
const FORM: &str = "?before=<turn number, 1 or more>&limit=<1-200>";

/// The history route over `store`; sessions read are remembered in `page`'s list.
pub(super) fn router(store: Arc<dyn SessionStore>, page: Arc<Page>) -> Router {
    Router::new()
        .route("/v1/sessions/{app}/{user}/{id}/history", get(history))
        .with_state((store, page))
}

/// A whole number from `params[name]` within `1..=max`.
fn number(params: &HashMap<String, String>, name: &str, max: usize) -> ApiResult<Option<usize>> {
    let Some(text) = params.get(name) else {
        return Ok(None);
    };
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(Some(n)),
        _ => Err(ApiError::bad_request(format!(
            "parameter `{name}` must be a whole number from 1 to {max}, got {text:?}: expected {FORM}"
        ))),
    }
}

/// The session's turn count: the port's refusal of an impossible range names it.
async fn turn_count(store: &dyn SessionStore, key: &SessionKey) -> ApiResult<usize> {
    match store.expand_turns(key, usize::MAX, usize::MAX).await {
        Err(StoreError::Expand {
            error: ExpandError::TurnsOutOfRange { turns, .. },
            ..
        }) => Ok(turns),
        Err(e) => Err(ApiError::store(e)),
        Ok(_) => Err(ApiError::store(StoreError::Backend(
            compaction_core::classified(
                compaction_core::FailureKind::Other,
                "the store expanded an impossible turn range",
            ),
        ))),
    }
}

async fn history(
    State((store, page)): State<(Arc<dyn SessionStore>, Arc<Page>)>,
    Path((app, user, id)): Path<(String, String, String)>,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<axum::Json<Value>> {
    let before = number(&params, "before", usize::MAX)?;
    let limit = number(&params, "limit", MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
    let key = route_key(app, user, id)?;
    let total = turn_count(store.as_ref(), &key).await?;
    let last = before.map_or(total, |b| (b - 1).min(total));
    let first = last.saturating_sub(limit - 1).max(1);
    let events = if last == 0 {
        Vec::new()
    } else {
        store
            .expand_turns(&key, first, last)
            .await
            .map_err(ApiError::store)?
    };
    let entries = store
        .compaction_history(&key)
        .await
        .map_err(ApiError::store)?;
    let numbers: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, c)| (c.event_id.as_str(), i + 1))
        .collect();
    let mut compactions = Vec::with_capacity(entries.len());
    for (i, c) in entries.iter().enumerate() {
        let covered = store
            .expand(&key, &c.event_id)
            .await
            .map_err(ApiError::store)?;
        let turns = covered.iter().filter_map(|r| r.turn);
        let text: String = covered
            .iter()
            .map(|r| compaction_core::store_support::searchable_text(&r.event))
            .collect::<Vec<_>>()
            .join("\n");
        compactions.push(json!({
            "number": i + 1,
            "event_id": c.event_id,
            "subsumed": c.subsumed,
            "summary_chars": c.summary_chars,
            "first_turn": turns.clone().min(),
            "last_turn": turns.max(),
            "covered_tokens": CharsPerToken.estimate(&text),
            // The core's estimator counts characters: the summary's are known.
            "summary_tokens": c.summary_chars.div_ceil(4),
            "receipt": c.receipt,
        }));
    }
    let state = store
        .load_live_tail_window(&key, 1)
        .await
        .map_err(ApiError::store)?
        .session
        .state;
    let title = super::page::title(store.as_ref(), &key, &state).await;
    page.remember(&key);
    Ok(axum::Json(json!({
        "turns": by_turn(&events, &numbers),
        "total_turns": total,
        "title": title,
        "earlier": (first > 1).then_some(first),
        "compactions": compactions,
    })))
}

/// The events grouped by turn, each turn with the compaction that folds it.
fn by_turn(events: &[RecalledEvent], numbers: &HashMap<&str, usize>) -> Vec<Value> {
    let mut turns: Vec<Value> = Vec::new();
    for r in events {
        let Some(turn) = r.turn else { continue };
        let text = compaction_core::store_support::searchable_text(&r.event);
        if text.trim().is_empty() {
            continue;
        }
        if turns.last().is_none_or(|t| t["turn"] != json!(turn)) {
            let summary = r.covered_by.as_deref().and_then(|id| numbers.get(id));
            turns.push(json!({
                "turn": turn, "covered_by": r.covered_by, "summary": summary, "events": [],
            }));
        }
        if let Some(Value::Array(list)) = turns.last_mut().map(|t| &mut t["events"]) {
            list.push(json!({
                "event_id": r.event.id,
                "author": r.event.author,
                "text": text,
                "timestamp": r.event.timestamp,
            }));
        }
    }
    turns
}
