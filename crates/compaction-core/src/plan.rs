//! The compaction plan (spec sections 3, 3.2 and 6.1): which events to fold, the timestamp
//! range, the previous summary for rolling consolidation, and the summarizer prompt.

use serde_json::{Map, Value, json};

use crate::context::{live_compaction_index, rendered_compaction_indexes, uncovered_events};
use crate::event::{Actions, Content, Event, EventCompaction, METADATA_KEY, USER_AUTHOR};
use crate::history::{Turn, coordinator_view, turns};
use crate::render::{cut_tool_content, render_event_body, tool_payload};
use crate::time::Timestamp;

/// The live compaction a rolling consolidation builds on, together with every other summary
/// ADK still renders (its own partially overlapping sliding-window compactions), so that the
/// new range contains them all and ADK renders one summary afterwards.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviousCompaction {
    /// Id of the live compaction's event.
    pub event_id: String,
    /// t_1: the earliest start among the rendered summaries (the live one's start for a
    /// session only this engine wrote).
    pub start_timestamp: Timestamp,
    /// The live compaction's end (the greatest end of any summary).
    pub end_timestamp: Timestamp,
    /// The rendered summaries' texts in order of range start, separated by a blank line
    /// (the live summary's text alone when it is the only one).
    pub summary: String,
    /// Ids of every rendered compaction event folded in, in order of range start.
    pub folded_event_ids: Vec<String>,
}

/// One turn of the slice, digested for summarizers that work on structure rather than text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnDigest {
    /// Invocation id.
    pub invocation_id: String,
    /// The user's query.
    pub user: String,
    /// The coordinator's final text response (empty for an unfinished turn).
    pub assistant: String,
    /// Tool results, each cut at `MAX_TOOL_CONTENT_CHARS` (30,000).
    pub tool_outputs: Vec<String>,
}

/// What to compact.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPlan {
    /// The live compaction, when this is a rolling consolidation.
    pub previous: Option<PreviousCompaction>,
    /// The unscoped events no rendered summary covers, from t_1 on, up to the last event of
    /// turn N-K, in order (for a session only this engine wrote: the events after the live
    /// compaction's end).
    pub slice: Vec<Event>,
    /// The slice's turns, digested.
    pub turns: Vec<TurnDigest>,
    /// t_1: the earliest start among the rendered summaries, or the slice's first event.
    pub start_timestamp: Timestamp,
    /// t_{N-K}: the slice's last event (the last event of turn N-K).
    pub end_timestamp: Timestamp,
    /// Completed turns kept verbatim: K (a plan exists only when there are more than K).
    pub retained_turns: usize,
    /// The timestamp of the first unscoped event after turn N-K (where the retained part
    /// starts), by position; `None` when nothing follows. It must be after
    /// [`CompactionPlan::end_timestamp`], or the compaction's range would cover it: the engine
    /// checks ([`crate::ContinueReason::TimestampsNotIncreasing`]).
    pub first_retained_timestamp: Option<Timestamp>,
}

/// Plans a compaction that keeps the last `k` completed turns verbatim. Returns `None` when
/// there is nothing new to fold (no completed turn before the retained ones that is not
/// already summarized).
///
/// Turns are counted among the events no rendered summary covers (the verbatim ones), so K
/// counts verbatim turns. Every summary ADK still renders is folded into the new one and the
/// range starts at the earliest of their starts: after this compaction ADK renders one
/// summary even when the session held ADK's own overlapping sliding-window summaries.
pub fn plan_compaction(events: &[Event], k: usize) -> Option<CompactionPlan> {
    let view = coordinator_view(events);
    let previous = previous_compaction(&view);
    let uncovered = uncovered_events(&view);
    let all_turns = turns(&uncovered);
    let completed: Vec<&Turn<'_>> = all_turns.iter().filter(|t| t.is_completed()).collect();
    if completed.len() <= k {
        return None;
    }
    // The last event of turn N-K bounds the slice (inclusive).
    let boundary_turn = completed[completed.len() - k - 1];
    let boundary = boundary_turn.last_timestamp();
    // A range that stopped short of the live summary's end would leave that summary rendered
    // beside the new one: wait until turn N-K lies after it (always so when only this engine
    // wrote summaries; only a gap between ADK's own summaries can put it before).
    if previous
        .as_ref()
        .is_some_and(|p| boundary < p.end_timestamp)
    {
        return None;
    }
    // By position, not by timestamp: an event after turn N-K that carries a timestamp no
    // later than the boundary is exactly what must not be folded silently.
    let first_retained_timestamp = boundary_turn.events.last().and_then(|last| {
        uncovered
            .iter()
            .position(|e| std::ptr::eq(*e, *last))
            .and_then(|i| uncovered[i + 1..].iter().find(|e| e.compaction().is_none()))
            .map(|e| e.timestamp)
    });
    let from_start = |e: &&&Event| {
        previous
            .as_ref()
            .is_none_or(|p| e.timestamp >= p.start_timestamp)
    };
    let slice: Vec<Event> = uncovered
        .iter()
        .filter(from_start)
        .take_while(|e| e.timestamp <= boundary)
        .map(|e| (*e).clone())
        .collect();
    let (first, last) = (slice.first()?, slice.last()?);
    let slice_turns = all_turns
        .iter()
        .filter(|t| t.first_timestamp() >= first.timestamp && t.last_timestamp() <= boundary)
        .map(digest)
        .collect();
    Some(CompactionPlan {
        start_timestamp: previous
            .as_ref()
            .map_or(first.timestamp, |p| p.start_timestamp.min(first.timestamp)),
        end_timestamp: last.timestamp,
        previous,
        slice,
        turns: slice_turns,
        retained_turns: k,
        first_retained_timestamp,
    })
}

/// The live summary a rolling consolidation builds on, with every summary ADK still renders
/// folded in: the range starts at the earliest of their starts.
fn previous_compaction(view: &[&Event]) -> Option<PreviousCompaction> {
    let live = live_compaction_index(view)?;
    let mut rendered: Vec<&Event> = rendered_compaction_indexes(view)
        .into_iter()
        .map(|i| view[i])
        .collect();
    rendered.sort_by_key(|e| e.compaction().map(|c| (c.start_timestamp, c.end_timestamp)));
    let live_range = view[live].compaction()?;
    Some(PreviousCompaction {
        event_id: view[live].id.clone(),
        start_timestamp: rendered
            .iter()
            .filter_map(|e| e.compaction())
            .map(|c| c.start_timestamp)
            .min()
            .unwrap_or(live_range.start_timestamp),
        end_timestamp: live_range.end_timestamp,
        summary: rendered
            .iter()
            .filter_map(|e| e.compaction())
            .map(|c| c.summary_text().trim().to_owned())
            .collect::<Vec<_>>()
            .join("\n\n"),
        folded_event_ids: rendered.iter().map(|e| e.id.clone()).collect(),
    })
}

fn digest(turn: &Turn<'_>) -> TurnDigest {
    TurnDigest {
        invocation_id: turn.invocation_id().to_owned(),
        user: turn.user_query(),
        assistant: turn.final_response().map(Event::text).unwrap_or_default(),
        tool_outputs: turn
            .events
            .iter()
            .filter_map(|e| e.content.as_ref())
            .flat_map(|c| c.parts.iter())
            .filter_map(|p| p.function_response.as_ref())
            .map(|r| cut_tool_content(&tool_payload(r.response.as_ref())))
            .collect(),
    }
}

fn speaker(event: &Event) -> &'static str {
    let is_tool = event.content.as_ref().is_some_and(|c| {
        c.parts.iter().all(|p| p.function_response.is_some()) && !c.parts.is_empty()
    });
    if event.is_user() && !is_tool {
        "**User**"
    } else if is_tool {
        "**Tool**"
    } else {
        "**Assistant**"
    }
}

impl CompactionPlan {
    /// The new completed turns as serial Markdown: one line block per event, turns separated
    /// by a blank line.
    pub fn new_turns_text(&self) -> String {
        let mut out = String::new();
        for event in &self.slice {
            let body = render_event_body(event);
            if body.is_empty() {
                continue;
            }
            if crate::history::starts_turn(event) && !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!("{}: {}\n", speaker(event), body));
        }
        out.trim_end().to_owned()
    }

    /// The summarizer prompt in exactly the spec's shape (6.1). Without a previous summary
    /// only the second section is present.
    pub fn summarizer_prompt(&self) -> String {
        let turns = self.new_turns_text();
        match &self.previous {
            Some(p) => format!(
                "Existing Conversation Summary:\n{}\n\nNew Completed Turns to Integrate:\n{turns}",
                p.summary.trim()
            ),
            None => format!("New Completed Turns to Integrate:\n{turns}"),
        }
    }

    /// Number of turns in the slice.
    pub fn slice_turn_count(&self) -> usize {
        self.turns.len()
    }

    /// The compaction event ADK honours: author `user`, a fresh invocation id, no content,
    /// `actions.compaction` with the range and the summary as a `model` message;
    /// engine-private facts in `custom_metadata`. Key-shaped tokens in the summary are
    /// replaced by [`crate::scrub::REDACTED`] first ([`crate::scrub::scrub`]): a summary that quotes
    /// an `Authorization` header must not store the key.
    pub fn compaction_event(
        &self,
        summary: &str,
        id: String,
        invocation_id: String,
        now: Timestamp,
        metadata: Map<String, Value>,
    ) -> Event {
        let mut event = Event::new(id, invocation_id, USER_AUTHOR, now);
        event.actions = Actions {
            compaction: Some(EventCompaction {
                start_timestamp: self.start_timestamp,
                end_timestamp: self.end_timestamp,
                compacted_content: Content::model_text(crate::scrub::scrub(summary)),
            }),
            ..Actions::default()
        };
        event.extra.insert(
            "custom_metadata".to_owned(),
            json!({ METADATA_KEY: metadata }),
        );
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Content, FunctionCall, Part};
    use crate::render::MAX_TOOL_CONTENT_CHARS;

    /// Issue 20 item 5: a summary that quotes an `Authorization` header or a provider key is
    /// stored with the key replaced; ordinary prose, DOIs and numbers are kept.
    #[test]
    fn key_shaped_tokens_are_scrubbed_from_the_stored_summary() {
        let secret = "sk-or-v1-0123456789abcdef0123456789abcdef";
        let summary = format!(
            "The user pasted `Authorization: Bearer {secret}` and a Groq key gsk_ABCDEFGHIJKLMNOPQRST. \
             Another header: Authorization: tok_1234567890. Findings: SEI growth of 12.5 mAh/g \
             (doi:10.1000/e2e.7), see sk-ewer and the bearer of news; Bearer instruments."
        );
        let mut f = crate::testing::EventFactory::new();
        let events: Vec<Event> = (0..3)
            .flat_map(|i| f.conversational_turn(&format!("i{i}"), "q", "a"))
            .collect();
        let plan = plan_compaction(&events, 1).expect("a plan");
        let now = events.last().expect("events").timestamp;
        let event = plan.compaction_event(&summary, "c1".into(), "ic".into(), now, Map::new());
        let scrubbed = event.compaction().expect("a compaction").summary_text();
        assert!(!scrubbed.contains("0123456789abcdef"), "{scrubbed}");
        assert!(!scrubbed.contains("ABCDEFGHIJ"), "{scrubbed}");
        assert!(!scrubbed.contains("tok_1234567890"), "{scrubbed}");
        assert_eq!(
            scrubbed.matches(crate::scrub::REDACTED).count(),
            3,
            "{scrubbed}"
        );
        for kept in [
            "12.5 mAh/g",
            "doi:10.1000/e2e.7",
            "sk-ewer",
            "the bearer of news",
            "Bearer instruments",
        ] {
            assert!(scrubbed.contains(kept), "{kept}: {scrubbed}");
        }
    }
    use serde_json::json;

    #[test]
    fn bodies_leave_out_thoughts_and_cut_long_tool_arguments() {
        let mut thought = Part::text("private reasoning");
        thought.extra.insert("thought".into(), json!(true));
        let call = Part {
            function_call: Some(FunctionCall {
                id: None,
                name: "search_library".into(),
                args: Some(json!({ "query": "x".repeat(MAX_TOOL_CONTENT_CHARS + 10) })),
            }),
            ..Part::default()
        };
        let event =
            Event::new("e", "i", "coordinator", crate::Timestamp::EPOCH).with_content(Content {
                role: Some("model".into()),
                parts: vec![thought, Part::text("The answer."), call],
            });
        let body = render_event_body(&event);
        assert!(!body.contains("private reasoning"), "{body}");
        assert!(
            body.starts_with("The answer.\n[tool call search_library("),
            "{body}"
        );
        assert!(body.contains("[… truncated at 30000 characters]"), "{body}");
        assert!(body.len() < MAX_TOOL_CONTENT_CHARS + 200);
    }
}
