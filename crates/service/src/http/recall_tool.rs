//! The `recall_history` tool the coordinator is offered: lossless recall of the session's
//! folded turns, answered from the store (compaction-core's `search` and `expand_turns`).
//!
//! Bounded: at most [`MAX_CALLS_PER_TURN`] calls a turn (then the model is asked again
//! without tools and must answer), each result cut at [`MAX_RESULT_TOKENS`] tokens
//! (4 characters a token). The server stores each call and its result as the turn's function
//! call and function response events ([`ReplyChunk::ToolCall`], [`ReplyChunk::ToolResult`]),
//! so ADK's prompt builder sees them too; recall never searches its own results
//! (`compaction_core::store_support::searchable_text` leaves this tool's parts out).
//!
//! Arguments: `{"query": "words"}` or `{"turns": "A..B"}` (or `{"turns": [A, B]}`); a bad
//! argument is answered as an error text the model reads, never a failed turn.

use std::sync::Arc;

use compaction_core::RECALL_TOOL_NAME;
use compaction_core::store_support::check_limit;
use compaction_core::{RecallHit, RecallQuery, SessionKey, SessionStore};
use serde_json::{Value, json};

/// Calls a turn may make.
#[cfg_attr(not(feature = "openai"), allow(dead_code))]
pub(super) const MAX_CALLS_PER_TURN: usize = 3;
/// The largest tool result, in tokens (4 characters a token).
pub(super) const MAX_RESULT_TOKENS: usize = 1_500;
/// Hits a search returns to the model.
const TOOL_HITS: usize = 5;
/// The widest turn range one call expands.
const MAX_TOOL_TURNS: usize = 10;

/// The store and session a turn's recall calls are answered from.
#[derive(Clone)]
pub struct RecallTool {
    store: Arc<dyn SessionStore>,
    key: SessionKey,
}

impl std::fmt::Debug for RecallTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallTool")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl PartialEq for RecallTool {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && Arc::ptr_eq(&self.store, &other.store)
    }
}

impl RecallTool {
    /// Recall over `key`'s history in `store`.
    pub fn new(store: Arc<dyn SessionStore>, key: SessionKey) -> Self {
        RecallTool { store, key }
    }

    /// The tool in OpenAI's `tools` form.
    pub fn definition() -> Value {
        json!({
            "type": "function",
            "function": {
                "name": RECALL_TOOL_NAME,
                "description": "Recall the exact text of earlier turns of this conversation that \
                    the summary folded. Give `query` (words that must all occur) to search, or \
                    `turns` (\"A..B\", as the summary's \"(turn N)\" pointers name them) to read \
                    turns verbatim.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Words to search for."},
                        "turns": {"type": "string", "description": "A turn range such as \"3..5\"."}
                    }
                }
            }
        })
    }

    /// Searches for `words` (the offline stand-in's call).
    pub async fn search(&self, words: &str) -> Option<Vec<RecallHit>> {
        let query = RecallQuery::parse(words).ok()?;
        self.store.search(&self.key, &query, TOOL_HITS).await.ok()
    }

    /// Answers one call with `arguments` (the model's JSON text): the hits or the turns as
    /// JSON text, or an error text; cut at `MAX_RESULT_TOKENS` (1,500 tokens).
    pub async fn answer(&self, arguments: &str) -> String {
        let text = match serde_json::from_str::<Value>(arguments) {
            Ok(args) => self.answer_args(&args).await,
            Err(_) => error_text("arguments must be a JSON object"),
        };
        cap(text)
    }

    async fn answer_args(&self, args: &Value) -> String {
        if let Some(query) = args.get("query").and_then(Value::as_str) {
            let query = match RecallQuery::parse(query) {
                Ok(q) => q,
                Err(e) => return error_text(&e.to_string()),
            };
            let limit = check_limit(Some(TOOL_HITS)).unwrap_or(TOOL_HITS);
            return match self.store.search(&self.key, &query, limit).await {
                Ok(hits) => {
                    json!({ "hits": hits.iter().map(hit_json).collect::<Vec<_>>() }).to_string()
                }
                Err(e) => error_text(&e.to_string()),
            };
        }
        let Some((first, last)) = args.get("turns").and_then(turn_range) else {
            return error_text("give `query` (words) or `turns` (\"A..B\")");
        };
        let last = last.min(first + MAX_TOOL_TURNS - 1);
        match self.store.expand_turns(&self.key, first, last).await {
            Ok(events) => {
                let turns: Vec<Value> = events.iter().map(|e| hit_json(&e.to_hit())).collect();
                json!({ "events": turns }).to_string()
            }
            Err(e) => error_text(&e.to_string()),
        }
    }
}

/// `{turn, author, text, folded}`: what the model needs of a hit.
fn hit_json(hit: &RecallHit) -> Value {
    json!({
        "turn": hit.turn,
        "author": hit.author,
        "text": hit.text,
        "folded": hit.covered_by.is_some(),
    })
}

fn turn_range(value: &Value) -> Option<(usize, usize)> {
    let number = |v: &Value| -> Option<usize> {
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .or_else(|| v.as_str()?.trim().parse().ok())
    };
    let (first, last) = match value {
        Value::Array(pair) if pair.len() == 2 => (number(&pair[0])?, number(&pair[1])?),
        Value::String(s) => match s.split_once("..") {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => (s.trim().parse().ok()?, s.trim().parse().ok()?),
        },
        other => (number(other)?, number(other)?),
    };
    (first >= 1 && first <= last).then_some((first, last))
}

fn error_text(message: &str) -> String {
    json!({ "error": message }).to_string()
}

/// Cuts `text` at [`MAX_RESULT_TOKENS`] tokens, on a character boundary, saying so.
fn cap(text: String) -> String {
    let max = MAX_RESULT_TOKENS * 4;
    match text.char_indices().nth(max) {
        None => text,
        Some((at, _)) => format!("{}… [cut at {MAX_RESULT_TOKENS} tokens]", &text[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_ranges_come_in_three_forms_and_bad_ones_are_refused() {
        assert_eq!(turn_range(&json!("3..5")), Some((3, 5)));
        assert_eq!(turn_range(&json!([2, 4])), Some((2, 4)));
        assert_eq!(turn_range(&json!(7)), Some((7, 7)));
        for bad in [
            json!("0..2"),
            json!("5..3"),
            json!("x"),
            json!(null),
            json!([1]),
        ] {
            assert_eq!(turn_range(&bad), None, "{bad}");
        }
    }

    #[test]
    fn a_long_result_is_cut_and_says_so() {
        let long = "é".repeat(MAX_RESULT_TOKENS * 4 + 10);
        let cut = cap(long);
        assert!(cut.ends_with("[cut at 1500 tokens]"));
        assert_eq!(
            cut.chars().filter(|&c| c == 'é').count(),
            MAX_RESULT_TOKENS * 4
        );
    }
}
