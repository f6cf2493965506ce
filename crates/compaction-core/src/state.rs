//! State extraction (spec section 4): the clean serial Markdown dialogue the decision model
//! reads, and beside it the structured turns it was rendered from.
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
//!
//! # Bounded
//! The state needs about [`DEFAULT_STATE_BUDGET_TOKENS`] tokens, so extraction walks the
//! turns newest first and stops at the first one that no longer fits: its cost depends on the
//! budget, not on the length of the uncompacted tail. [`extract_decision_state_from_view`]
//! finds the turns themselves newest first too, so a probe never splits or renders the whole
//! tail.
//!
//! The walk goes on past the budget for [`DecisionState::older`], at most
//! [`DECISION_HISTORY_TURNS`] turns, so that bound holds as well.
//!
//! # Structured turns
//! [`DecisionState::turns`] holds the turns exactly as rendered (texts trimmed, the latest cut
//! like `latest_turn` when it alone exceeds the budget), so an adapter that wants the user's
//! query or the assistant's findings reads them there and never parses the Markdown back. The
//! wire form of the state (its `Serialize`) is the spec's two strings only.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::estimate::TokenEstimator;
use crate::event::Event;
use crate::history::{Turn, starts_turn};
use crate::time::Timestamp;

/// The session-state key holding research turns' conclusions.
pub const RESEARCH_TURN_HISTORY: &str = "RESEARCH_TURN_HISTORY";
/// Research findings summaries are cut to this many words.
pub(crate) const MAX_FINDINGS_WORDS: usize = 150;
/// The default token budget of the whole decision state.
pub const DEFAULT_STATE_BUDGET_TOKENS: usize = 500;
/// The decision state's memory: at most this many turns before turn N in all, the rendered
/// earlier turns and [`DecisionState::older`] together (the window's own turns are never
/// dropped for it).
pub const DECISION_HISTORY_TURNS: usize = 24;

/// What the decision model reads: the conversation so far and the turn that just completed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct DecisionState {
    /// The completed turns before turn N that the live summary does not cover (turns 1..N-1
    /// before the first compaction; see ARCHITECTURE.md, "decision probe"), oldest dropped
    /// first to fit the budget, as `**User**: …\n**Assistant**: …` pairs separated by a blank
    /// line.
    pub earlier_discussion: String,
    /// Turn N as one pair.
    pub latest_turn: String,
    /// The turns rendered above, oldest first; the last one is turn N. Not part of the wire
    /// form. Empty when the state was made from text alone (a labelled case file, say).
    #[serde(skip)]
    pub turns: Vec<StateTurn>,
    /// The completed turns before the rendered ones that the live summary does not cover,
    /// oldest first, uncut, at most [`DECISION_HISTORY_TURNS`] less the rendered earlier
    /// turns: a wider memory than the budget allows the wire form, for a local model that
    /// reads meaning (the embedding model compares the latest query with the whole current
    /// topic, not only with the one or two turns 500 tokens hold). Never serialized and
    /// never rendered; empty when the state was made from text alone.
    #[serde(skip)]
    pub older: Vec<StateTurn>,
}

/// One completed turn as the decision state rendered it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateTurn {
    /// Turns between this one and turn N: 0 for turn N, 1 for the turn before it, …
    pub age: usize,
    /// The invocation id of the turn (empty for a turn that came from text alone).
    pub invocation_id: String,
    /// The user's query, trimmed (attachments as `[attached mime]`).
    pub user: String,
    /// The assistant side, trimmed: the findings summary of a research turn, else the final
    /// response text.
    pub assistant: String,
    /// True when `assistant` is a research turn's findings summary.
    pub research: bool,
}

impl StateTurn {
    /// The turn as one serial-Markdown pair.
    pub fn render(&self) -> String {
        render_pair(&self.user, &self.assistant)
    }
}

impl DecisionState {
    /// Turn N, when the state carries structured turns.
    pub fn latest(&self) -> Option<&StateTurn> {
        self.turns.last()
    }

    /// The earlier turns, oldest first.
    pub fn earlier(&self) -> &[StateTurn] {
        self.turns.split_last().map_or(&[], |(_, rest)| rest)
    }

    /// Every turn before turn N the state knows of, oldest first: [`Self::older`], then the
    /// rendered earlier turns.
    pub fn known_earlier(&self) -> impl Iterator<Item = &StateTurn> {
        self.older.iter().chain(self.earlier())
    }
}

const USER_MARK: &str = "**User**: ";
const ASSISTANT_MARK: &str = "\n**Assistant**: ";

/// Renders one query-response pair.
pub(crate) fn render_pair(user: &str, assistant: &str) -> String {
    format!(
        "{USER_MARK}{}{ASSISTANT_MARK}{}",
        user.trim(),
        assistant.trim()
    )
}

/// The findings summary recorded for `invocation_id`, cut to 150 words.
pub(crate) fn research_findings(state: &Map<String, Value>, invocation_id: &str) -> Option<String> {
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

/// The user and assistant sides of a completed turn as the state renders them (trimmed), and
/// whether the assistant side is a research turn's findings summary.
fn sides(turn: &Turn<'_>, state: &Map<String, Value>) -> (String, String, bool) {
    let findings = research_findings(state, turn.invocation_id());
    let research = findings.is_some();
    let assistant =
        findings.unwrap_or_else(|| turn.final_response().map(|e| e.text()).unwrap_or_default());
    (
        turn.user_query().trim().to_owned(),
        assistant.trim().to_owned(),
        research,
    )
}

/// The turns of an already filtered (rewound, unscoped) event sequence, newest first: the
/// same turns as [`crate::history::turns`] in reverse order, found by walking the events
/// backwards, so taking the newest few costs only what they hold.
pub(crate) fn turns_newest_first<'a, 'v>(
    events: &'v [&'a Event],
) -> impl Iterator<Item = Turn<'a>> + 'v {
    let mut end = events.len();
    std::iter::from_fn(move || {
        let mut tail: Vec<&'a Event> = Vec::new();
        while end > 0 {
            end -= 1;
            let event = events[end];
            if event.compaction().is_some() || !event.is_unscoped() {
                continue;
            }
            if starts_turn(event) {
                let mut turn = Vec::with_capacity(tail.len() + 1);
                turn.push(event);
                turn.extend(tail.into_iter().rev());
                return Some(Turn { events: turn });
            }
            tail.push(event);
        }
        // Events before the first turn start belong to no turn.
        None
    })
}

/// Builds the decision state from the completed turns (oldest first; the last is turn N),
/// dropping the oldest earlier turns until the whole payload fits `budget_tokens`. If turn N
/// alone exceeds the budget its text is cut to fit. Returns `None` when there is no
/// completed turn. Only the turns that fit are rendered.
pub fn extract_decision_state(
    completed: &[Turn<'_>],
    state: &Map<String, Value>,
    estimator: &dyn TokenEstimator,
    budget_tokens: usize,
) -> Option<DecisionState> {
    extract_newest_first(
        completed.iter().rev().cloned(),
        state,
        estimator,
        budget_tokens,
    )
    .0
}

/// The decision state of a coordinator view (see [`crate::history::coordinator_view`]): its
/// completed turns after `summarized_until` (the live summary's end, if any), as
/// [`extract_decision_state`] renders them. The turns are found newest first and the walk
/// stops once the budget is spent or at the first turn the summary covers, so the cost does
/// not grow with the uncompacted tail.
pub fn extract_decision_state_from_view(
    view: &[&Event],
    summarized_until: Option<Timestamp>,
    state: &Map<String, Value>,
    estimator: &dyn TokenEstimator,
    budget_tokens: usize,
) -> Option<DecisionState> {
    let turns = turns_newest_first(view)
        .take_while(|t| summarized_until.is_none_or(|end| t.first_timestamp() > end))
        .filter(Turn::is_completed);
    extract_newest_first(turns, state, estimator, budget_tokens).0
}

/// The decision state from the newest part of a coordinator view (a store's window of its
/// live tail): `Ok` when that part decides it — the budget ran out and the older turns are
/// full, the live summary was reached, or `whole` says the part is the whole view — and then it equals
/// [`extract_decision_state_from_view`] of the whole view; `Err(NeedMore)` when the walk
/// reached the start of the part, so older events might still fit the budget.
pub(crate) fn extract_decision_state_from_window(
    part: &[&Event],
    whole: bool,
    summarized_until: Option<Timestamp>,
    state: &Map<String, Value>,
    estimator: &dyn TokenEstimator,
    budget_tokens: usize,
) -> Result<Option<DecisionState>, NeedMore> {
    let ran_out = std::cell::Cell::new(false);
    let mut raw = turns_newest_first(part);
    let turns = std::iter::from_fn(|| match raw.next() {
        Some(t) if summarized_until.is_none_or(|end| t.first_timestamp() > end) => Some(t),
        Some(_) => None,
        None => {
            ran_out.set(true);
            None
        }
    })
    .filter(Turn::is_completed);
    let (state, decided) = extract_newest_first(turns, state, estimator, budget_tokens);
    if whole || decided || !ran_out.get() {
        Ok(state)
    } else {
        Err(NeedMore)
    }
}

/// A window of the view was too short to decide the decision state: read a longer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NeedMore;

/// The one extraction rule: turn N first (cut to fit), then earlier turns newest first while
/// each still fits, stopping at the first that does not; that turn and the ones before it
/// become [`DecisionState::older`] until [`DECISION_HISTORY_TURNS`] earlier turns are known.
/// The flag says the walk was decided by its own limits (older turns full) rather than by
/// running out of turns.
fn extract_newest_first<'a>(
    mut newest_first: impl Iterator<Item = Turn<'a>>,
    state: &Map<String, Value>,
    estimator: &dyn TokenEstimator,
    budget_tokens: usize,
) -> (Option<DecisionState>, bool) {
    let Some(latest) = newest_first.next() else {
        return (None, false);
    };
    let (user, assistant, research) = sides(&latest, state);
    let whole = render_pair(&user, &assistant);
    let latest_turn = fit(whole, estimator, budget_tokens);
    let (user, assistant) = cut_sides(&user, &assistant, latest_turn.chars().count());
    let mut remaining = budget_tokens.saturating_sub(estimator.estimate(&latest_turn));
    let mut kept: Vec<StateTurn> = vec![StateTurn {
        age: 0,
        invocation_id: latest.invocation_id().to_owned(),
        user,
        assistant,
        research,
    }];
    let mut rendered: Vec<String> = Vec::new();
    let mut older: Vec<StateTurn> = Vec::new();
    let mut room: Option<usize> = None;
    for (i, turn) in newest_first.enumerate() {
        let (user, assistant, research) = sides(&turn, state);
        let state_turn = StateTurn {
            age: i + 1,
            invocation_id: turn.invocation_id().to_owned(),
            user,
            assistant,
            research,
        };
        if room.is_none() {
            let pair = state_turn.render();
            // Two newlines separate pairs; count them against the budget too.
            let cost = if rendered.is_empty() {
                estimator.estimate(&pair)
            } else {
                estimator.estimate(&format!("{pair}\n\n"))
            };
            if cost <= remaining {
                remaining -= cost;
                rendered.push(pair);
                kept.push(state_turn);
                continue;
            }
            room = Some(DECISION_HISTORY_TURNS.saturating_sub(rendered.len()));
        }
        if room.is_some_and(|r| older.len() >= r) {
            break;
        }
        older.push(state_turn);
    }
    let decided = room.is_some_and(|r| older.len() >= r);
    rendered.reverse();
    kept.reverse();
    older.reverse();
    let state = DecisionState {
        earlier_discussion: rendered.join("\n\n"),
        latest_turn,
        turns: kept,
        older,
    };
    (Some(state), decided)
}

/// The user and assistant texts that a pair rendered from them keeps when cut to its first
/// `kept_chars` characters.
fn cut_sides(user: &str, assistant: &str, kept_chars: usize) -> (String, String) {
    let user_start = USER_MARK.chars().count();
    let user_chars = user.chars().count();
    let assistant_start = user_start + user_chars + ASSISTANT_MARK.chars().count();
    let user_kept = kept_chars.saturating_sub(user_start).min(user_chars);
    let assistant_kept = kept_chars.saturating_sub(assistant_start);
    (
        user.chars().take(user_kept).collect(),
        assistant.chars().take(assistant_kept).collect(),
    )
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

    /// The assistant side of a completed turn, per the research/conversational rule.
    fn assistant_response(turn: &Turn<'_>, state: &Map<String, Value>) -> String {
        research_findings(state, turn.invocation_id())
            .unwrap_or_else(|| turn.final_response().map(|e| e.text()).unwrap_or_default())
    }
    use crate::estimate::CharsPerToken;
    use crate::history::{completed_turns, coordinator_view};
    use crate::testing::EventFactory;
    use proptest::prelude::*;
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

    #[test]
    fn turns_beyond_the_budget_are_kept_uncut_as_older_up_to_the_memory_limit() {
        let mut f = EventFactory::new();
        let mut events = Vec::new();
        for i in 0..40 {
            events.extend(f.conversational_turn(
                &format!("i{i}"),
                &format!("question {i}"),
                &"y".repeat(300),
            ));
        }
        let view = coordinator_view(&events);
        let s = extract_decision_state_from_view(&view, None, &Map::new(), &CharsPerToken, 200)
            .unwrap();
        // 200 tokens hold turn 39 and one earlier turn; the memory holds 24 earlier turns.
        assert_eq!(s.earlier().len(), 1);
        assert_eq!(s.older.len(), DECISION_HISTORY_TURNS - 1);
        assert_eq!(s.older[0].user, "question 15");
        assert_eq!(s.older.last().unwrap().user, "question 37");
        assert_eq!(s.older[0].assistant.len(), 300, "older turns are never cut");
        assert_eq!(s.older[0].age, 24);
        // Not part of the wire form.
        let wire = serde_json::to_string(&s).unwrap();
        assert!(!wire.contains("question 37"), "{wire}");
    }

    #[test]
    fn the_state_carries_the_turns_it_rendered() {
        let mut f = EventFactory::new();
        let mut events = f.research_turn("r1", " What causes capacity fade? ", "SYNTHESIS");
        events.extend(f.conversational_turn("c1", "And silicon?", "Silicon expands 300%."));
        let state = json!({ RESEARCH_TURN_HISTORY: [
            {"invocation_id": "r1", "conclude_output": {"findings_summary": "Lithium plating."}}
        ]});
        let state = state.as_object().unwrap().clone();
        let view = coordinator_view(&events);
        let s =
            extract_decision_state_from_view(&view, None, &state, &CharsPerToken, 10_000).unwrap();
        assert_eq!(
            s.turns,
            [
                StateTurn {
                    age: 1,
                    invocation_id: "r1".into(),
                    user: "What causes capacity fade?".into(),
                    assistant: "Lithium plating.".into(),
                    research: true,
                },
                StateTurn {
                    age: 0,
                    invocation_id: "c1".into(),
                    user: "And silicon?".into(),
                    assistant: "Silicon expands 300%.".into(),
                    research: false,
                },
            ]
        );
        assert_eq!(s.latest().unwrap().render(), s.latest_turn);
        assert_eq!(s.earlier()[0].render(), s.earlier_discussion);
        // The wire form is the spec's two strings only.
        let wire = serde_json::to_value(&s).unwrap();
        assert_eq!(wire.as_object().unwrap().len(), 2, "{wire}");
    }

    #[test]
    fn a_latest_turn_cut_to_the_budget_is_cut_in_its_structured_form_too() {
        let mut f = EventFactory::new();
        let events = f.conversational_turn("c1", "été question", &"réponse ".repeat(100));
        let view = coordinator_view(&events);
        let s =
            extract_decision_state_from_view(&view, None, &Map::new(), &CharsPerToken, 20).unwrap();
        assert!(CharsPerToken.estimate(&s.latest_turn) <= 20);
        assert_eq!(
            s.latest().unwrap().render().trim_end(),
            s.latest_turn.trim_end()
        );
        // So tight that even the user's text is cut.
        let s =
            extract_decision_state_from_view(&view, None, &Map::new(), &CharsPerToken, 3).unwrap();
        let latest = s.latest().unwrap();
        assert!(latest.assistant.is_empty() && "été question".starts_with(&latest.user));
        assert_eq!(s.latest_turn, format!("**User**: {}", latest.user));
    }

    /// The rule before extraction was bounded: render every completed turn the summary does
    /// not cover, then keep turn N (cut to fit) and the longest run of newest earlier turns
    /// that fits. The oracle of the bounded walk.
    fn whole_render_then_fit(
        view: &[&Event],
        summarized_until: Option<Timestamp>,
        state: &Map<String, Value>,
        budget: usize,
    ) -> Option<(String, String)> {
        let turns: Vec<_> = completed_turns(view)
            .into_iter()
            .filter(|t| summarized_until.is_none_or(|end| t.first_timestamp() > end))
            .collect();
        let rendered: Vec<String> = turns
            .iter()
            .map(|t| render_pair(&t.user_query(), &assistant_response(t, state)))
            .collect();
        let (latest, earlier) = rendered.split_last()?;
        let latest = fit(latest.clone(), &CharsPerToken, budget);
        let remaining = budget.saturating_sub(CharsPerToken.estimate(&latest));
        let costs: Vec<usize> = earlier
            .iter()
            .rev()
            .enumerate()
            .map(|(i, pair)| {
                let text = if i == 0 {
                    pair.clone()
                } else {
                    format!("{pair}\n\n")
                };
                CharsPerToken.estimate(&text)
            })
            .collect();
        let mut keep = 0;
        let mut spent = 0;
        while keep < costs.len() && spent + costs[keep] <= remaining {
            spent += costs[keep];
            keep += 1;
        }
        let kept = earlier[earlier.len() - keep..].join("\n\n");
        Some((kept, latest))
    }

    /// One generated turn: 0 conversational, 1 research with findings, 2 research whose
    /// findings are not recorded, 3 errored (never completed), 4 a compaction event that
    /// covers everything so far.
    fn session(
        turns: &[(u8, String, String)],
    ) -> (Vec<Event>, Map<String, Value>, Option<Timestamp>) {
        let mut f = EventFactory::new();
        let mut events: Vec<Event> = Vec::new();
        let mut history = Vec::new();
        let mut summarized_until = None;
        for (i, (kind, user, answer)) in turns.iter().enumerate() {
            let inv = format!("inv{i}");
            match kind {
                0 => events.extend(f.conversational_turn(&inv, user, answer)),
                1 | 2 => {
                    events.extend(f.research_turn(&inv, user, "SYNTHESIS # Cited Sources"));
                    if *kind == 1 {
                        history.push(json!({"invocation_id": inv, "conclude_output": {"findings_summary": answer}}));
                    }
                }
                3 => {
                    events.push(f.user(&inv, user));
                    let mut err = f.model(&inv, "");
                    err.content = None;
                    err.error_code = Some("RESOURCE_EXHAUSTED".into());
                    events.push(err);
                }
                _ => {
                    if let Some(first) = events.first() {
                        let start = first.timestamp;
                        let end = events[events.len() - 1].timestamp;
                        events.push(f.compaction(&inv, start, end, "summary"));
                        summarized_until = Some(end);
                    }
                }
            }
        }
        let state = json!({ RESEARCH_TURN_HISTORY: history });
        (events, state.as_object().unwrap().clone(), summarized_until)
    }

    proptest! {
        #[test]
        fn bounded_extraction_equals_whole_render_then_fit(
            turns in proptest::collection::vec(
                (0u8..5, "[a-zé ?]{0,40}", "[a-z0-9é .]{0,300}"), 1..60),
            budget in 1usize..700,
        ) {
            let (events, state, summarized_until) = session(&turns);
            let view = coordinator_view(&events);
            let bounded = extract_decision_state_from_view(
                &view, summarized_until, &state, &CharsPerToken, budget);
            let oracle = whole_render_then_fit(&view, summarized_until, &state, budget);
            prop_assert_eq!(
                bounded.as_ref().map(|s| (s.earlier_discussion.clone(), s.latest_turn.clone())),
                oracle
            );
            if let Some(s) = bounded {
                let earlier: Vec<String> = s.earlier().iter().map(StateTurn::render).collect();
                prop_assert_eq!(earlier.join("\n\n"), s.earlier_discussion.clone());
                let latest = s.latest().unwrap();
                let user_mark = format!("**User**: {}", latest.user);
                // Cut inside the user marker itself, the structured query is empty.
                prop_assert!(s.latest_turn.starts_with(&user_mark)
                    || (latest.user.is_empty() && user_mark.starts_with(&s.latest_turn)));
                prop_assert!(s.latest_turn.ends_with(&latest.assistant));
                prop_assert!(s.turns.iter().rev().enumerate().all(|(i, t)| t.age == i));
                // The slice form is the same rule.
                let slice: Vec<_> = completed_turns(&view)
                    .into_iter()
                    .filter(|t| summarized_until.is_none_or(|end| t.first_timestamp() > end))
                    .collect();
                // The older turns: the uncovered ones before the rendered window, newest
                // first up to the memory's limit, uncut, their ages going on from the window's.
                let before: Vec<String> = slice[..slice.len() - s.turns.len()]
                    .iter()
                    .map(|t| render_pair(&t.user_query(), &assistant_response(t, &state)))
                    .collect();
                let room = DECISION_HISTORY_TURNS.saturating_sub(s.earlier().len());
                let older: Vec<String> = s.older.iter().map(StateTurn::render).collect();
                prop_assert_eq!(&older[..], &before[before.len().saturating_sub(room)..]);
                prop_assert!(s.older.iter().rev().enumerate().all(|(i, t)| t.age == s.turns.len() + i));
                prop_assert_eq!(s.known_earlier().count(), s.older.len() + s.earlier().len());
                prop_assert_eq!(
                    extract_decision_state(&slice, &state, &CharsPerToken, budget),
                    Some(s)
                );
            }
        }
    }
}
