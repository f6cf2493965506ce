//! State extraction (spec section 4): the clean serial Markdown dialogue the decision model
//! reads.
//!
//! # Research turns
//! A research turn is one whose invocation id appears in session state
//! `RESEARCH_TURN_HISTORY`. Its assistant response is the concise findings summary of that
//! entry, cut to [`MAX_FINDINGS_WORDS`] words; the full synthesis, tool parameters, chunk ids and
//! bibliography are left out. Accepted shapes of the state value:
//! - an array of entries, or an object mapping invocation id to entry;
//! - an entry is an object with `invocation_id` (optional in the map form) and `conclude_output`,
//!   which is either a string or an object with `findings_summary` (or `summary`).
//!
//! Conversational turns keep the coordinator's final response text untruncated.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::estimate::TokenEstimator;
use crate::history::Turn;

/// The session-state key holding research turns' conclusions.
pub const RESEARCH_TURN_HISTORY: &str = "RESEARCH_TURN_HISTORY";
/// Research findings summaries are cut to this many words.
pub const MAX_FINDINGS_WORDS: usize = 150;
/// The default token budget of the whole decision state.
pub const DEFAULT_STATE_BUDGET_TOKENS: usize = 500;

/// What the decision model reads: the conversation so far and the turn that just completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisionState {
    /// The completed turns before turn N that the live summary does not cover (turns 1..N-1
    /// before the first compaction; see ARCHITECTURE.md, "decision probe"), oldest dropped
    /// first to fit the budget, as `**User**: …\n**Assistant**: …` pairs separated by a blank
    /// line.
    pub earlier_discussion: String,
    /// Turn N as one pair.
    pub latest_turn: String,
}

/// Renders one query-response pair.
pub fn render_pair(user: &str, assistant: &str) -> String {
    format!(
        "**User**: {}\n**Assistant**: {}",
        user.trim(),
        assistant.trim()
    )
}

/// The findings summary recorded for `invocation_id`, cut to 150 words.
pub fn research_findings(state: &Map<String, Value>, invocation_id: &str) -> Option<String> {
    let history = state.get(RESEARCH_TURN_HISTORY)?;
    let entry = match history {
        Value::Array(entries) => entries
            .iter()
            .rev()
            .find(|e| e.get("invocation_id").and_then(Value::as_str) == Some(invocation_id))?,
        Value::Object(map) => map.get(invocation_id)?,
        _ => return None,
    };
    let conclude = entry.get("conclude_output")?;
    let text = match conclude {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o
            .get("findings_summary")
            .or_else(|| o.get("summary"))
            .and_then(Value::as_str)?,
        _ => return None,
    };
    // A blank summary says nothing: the turn falls back to its final text.
    (!text.trim().is_empty()).then(|| first_words(text, MAX_FINDINGS_WORDS))
}

fn first_words(text: &str, n: usize) -> String {
    text.split_whitespace()
        .take(n)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The assistant side of a completed turn, per the research/conversational rule.
pub fn assistant_response(turn: &Turn<'_>, state: &Map<String, Value>) -> String {
    research_findings(state, turn.invocation_id())
        .unwrap_or_else(|| turn.final_response().map(|e| e.text()).unwrap_or_default())
}

/// Builds the decision state from the completed turns (oldest first; the last is turn N),
/// dropping the oldest earlier turns until the whole payload fits `budget_tokens`. If turn N
/// alone exceeds the budget its text is cut to fit. Returns `None` when there is no
/// completed turn.
pub fn extract_decision_state(
    completed: &[Turn<'_>],
    state: &Map<String, Value>,
    estimator: &dyn TokenEstimator,
    budget_tokens: usize,
) -> Option<DecisionState> {
    let (latest, earlier) = completed.split_last()?;
    let latest_turn = fit(
        render_pair(&latest.user_query(), &assistant_response(latest, state)),
        estimator,
        budget_tokens,
    );
    let mut remaining = budget_tokens.saturating_sub(estimator.estimate(&latest_turn));
    let mut kept: Vec<String> = Vec::new();
    for turn in earlier.iter().rev() {
        let pair = render_pair(&turn.user_query(), &assistant_response(turn, state));
        // Two newlines separate pairs; count them against the budget too.
        let candidate = if kept.is_empty() {
            pair.clone()
        } else {
            format!("{pair}\n\n")
        };
        let cost = estimator.estimate(&candidate);
        if cost > remaining {
            break;
        }
        remaining -= cost;
        kept.push(pair);
    }
    kept.reverse();
    Some(DecisionState {
        earlier_discussion: kept.join("\n\n"),
        latest_turn,
    })
}

/// Cuts `text` to the longest char prefix the estimator prices within `budget`.
fn fit(text: String, estimator: &dyn TokenEstimator, budget: usize) -> String {
    if estimator.estimate(&text) <= budget {
        return text;
    }
    let chars: Vec<char> = text.chars().collect();
    let (mut lo, mut hi) = (0usize, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let prefix: String = chars[..mid].iter().collect();
        if estimator.estimate(&prefix) <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    chars[..lo].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::CharsPerToken;
    use crate::history::{completed_turns, coordinator_view};
    use crate::testing::EventFactory;
    use serde_json::json;

    #[test]
    fn research_turns_use_the_findings_summary_and_conversational_turns_stay_whole() {
        let mut f = EventFactory::new();
        let mut events = f.research_turn(
            "r1",
            "What causes capacity fade?",
            "LONG SYNTHESIS\n# Cited Sources\n1. X",
        );
        events.extend(f.conversational_turn("c1", "Thanks, and silicon?", "Silicon expands 300%."));
        let long_summary = (0..200)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let state = json!({ RESEARCH_TURN_HISTORY: [
            {"invocation_id": "r1", "conclude_output": {"findings_summary": long_summary}}
        ]});
        let state = state.as_object().unwrap().clone();
        let view = coordinator_view(&events);
        let turns = completed_turns(&view);
        let s = extract_decision_state(&turns, &state, &CharsPerToken, 10_000).unwrap();
        assert!(!s.earlier_discussion.contains("SYNTHESIS"));
        assert!(s.earlier_discussion.contains("w149") && !s.earlier_discussion.contains("w150"));
        assert_eq!(
            s.latest_turn,
            "**User**: Thanks, and silicon?\n**Assistant**: Silicon expands 300%."
        );
    }

    #[test]
    fn map_form_and_string_conclude_output_are_accepted() {
        let state = json!({ RESEARCH_TURN_HISTORY: { "r1": {"conclude_output": "short"} } });
        assert_eq!(
            research_findings(state.as_object().unwrap(), "r1").as_deref(),
            Some("short")
        );
        // A blank summary is no summary: the turn falls back to its final text.
        let blank = json!({ RESEARCH_TURN_HISTORY: [
            {"invocation_id": "r1", "conclude_output": {"findings_summary": "  \n"}}
        ]});
        assert_eq!(research_findings(blank.as_object().unwrap(), "r1"), None);
    }

    #[test]
    fn drops_oldest_earlier_turns_first_to_fit_the_budget() {
        let mut f = EventFactory::new();
        let mut events = Vec::new();
        for i in 0..10 {
            events.extend(f.conversational_turn(
                &format!("i{i}"),
                &format!("question {i}"),
                &"x".repeat(200),
            ));
        }
        let view = coordinator_view(&events);
        let turns = completed_turns(&view);
        let s = extract_decision_state(&turns, &Map::new(), &CharsPerToken, 200).unwrap();
        let total =
            CharsPerToken.estimate(&s.earlier_discussion) + CharsPerToken.estimate(&s.latest_turn);
        assert!(total <= 200, "{total}");
        assert!(s.latest_turn.contains("question 9"));
        assert!(s.earlier_discussion.contains("question 8"));
        assert!(!s.earlier_discussion.contains("question 0"));
    }
}
