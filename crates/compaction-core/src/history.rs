//! History views: rewinds applied, scope filtering, and turns.
//!
//! # Turns
//! A *turn* starts at an unscoped, non-partial user event with text and holds every unscoped
//! event up to the next turn start. Compaction events are never part of a turn. Events that
//! come before the first turn start (an agent greeting, say) belong to no turn.
//!
//! A turn is *completed* when its last non-partial event that carries content or an error is a
//! text response by a non-user author: the coordinator answered and the stream closed. Edge
//! cases, each tested below:
//! - an errored turn (the last event carries `error_code`, or the model never answered) is not
//!   completed;
//! - a turn with only tool calls and responses and no final text is not completed;
//! - trailing partial events are ignored: a turn whose final text arrived is completed even if
//!   stray partial chunks follow, and a turn that has only partial text is not;
//! - trailing actions-only events (no content parts, no error: a callback's state delta,
//!   `end_of_agent`) are ignored the same way;
//! - a model's thought parts (`thought: true`) are not response text: a turn that ends in
//!   thoughts alone is not completed.

use crate::event::Event;

/// Applies rewinds the way ADK's `_apply_rewinds` does: walking backwards, a rewind event
/// drops itself and every event from the first event of the target invocation on
/// (compaction events included). A rewind whose target invocation never occurs drops
/// only itself.
pub fn apply_rewinds(events: &[Event]) -> Vec<&Event> {
    rewound_positions(events)
        .into_iter()
        .map(|i| &events[i])
        .collect()
}

/// Positions in `events` of what [`apply_rewinds`] keeps, in order.
fn rewound_positions(events: &[Event]) -> Vec<usize> {
    let mut kept = Vec::with_capacity(events.len());
    let mut i = events.len();
    while i > 0 {
        i -= 1;
        if let Some(target) = events[i].actions.rewind_before_invocation_id.as_deref() {
            // Find the first event of the target invocation at or before this rewind.
            if let Some(first) = events[..i].iter().position(|e| e.invocation_id == target) {
                i = first;
            }
            continue;
        }
        kept.push(i);
    }
    kept.reverse();
    kept
}

/// The coordinator's view of a session: rewinds applied, then scoped events dropped.
pub fn coordinator_view(events: &[Event]) -> Vec<&Event> {
    coordinator_positions(events)
        .into_iter()
        .map(|i| &events[i])
        .collect()
}

/// Positions in `events` of the [`coordinator_view`], in order: for a store that decides on
/// outlines which rows it must read whole.
pub fn coordinator_positions(events: &[Event]) -> Vec<usize> {
    let mut positions = rewound_positions(events);
    positions.retain(|&i| events[i].is_unscoped());
    positions
}

/// User messages a host filed inside an isolated scope (rewinds applied).
///
/// Spec 7.1 writes a search pipeline's events with `isolation_scope`. ADK's `Runner` treats
/// a scope that no `finish_task` function response closed as a task paused for the user, and
/// stamps every next user message with that scope: the coordinator never sees those
/// messages, and the engine, which reads only the coordinator's view, counts no new turn.
/// The engine cannot repair the host; this says that it happened and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopedUserMessages {
    /// How many user messages sit inside a scope.
    pub count: usize,
    /// The scopes they sit in, distinct, in order of first appearance.
    pub scopes: Vec<String>,
}

impl ScopedUserMessages {
    /// True when no user message sits inside a scope.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl std::fmt::Display for ScopedUserMessages {
    /// The warning a person reads: what happened, what it costs, and the fix.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scopes: Vec<String> = self.scopes.iter().map(|s| format!("{s:?}")).collect();
        write!(
            f,
            "{} user message(s) sit inside a pipeline scope ({}): the coordinator never sees \
             them and they count as no turn. ADK's Runner files each new user message inside \
             a scope that no `finish_task` closed. Fix the host: end each pipeline scope with \
             a `finish_task` function response (response {{\"result\": \"Task completed.\"}}) \
             in that scope.",
            self.count,
            scopes.join(", ")
        )
    }
}

/// The user messages of `events` (rewinds applied) that carry an isolation scope: events
/// authored `user` with text or an attachment (what would start a turn if unscoped). A
/// compaction event (authored `user`, no content) or a tool result is not a message.
pub fn scoped_user_messages(events: &[Event]) -> ScopedUserMessages {
    let mut found = ScopedUserMessages::default();
    for i in scoped_user_candidate_positions(events) {
        let event = &events[i];
        if event.is_partial() || !(event.has_text() || event.attachment_types().next().is_some()) {
            continue;
        }
        let Some(scope) = &event.isolation_scope else {
            continue;
        };
        found.count += 1;
        if !found.scopes.contains(scope) {
            found.scopes.push(scope.clone());
        }
    }
    found
}

/// Positions of the events that may be [`scoped_user_messages`]: rewinds applied, authored
/// `user`, scoped, not a compaction. It reads only what an [`crate::EventOutline`] keeps, so a
/// store can outline every row and read only these whole.
pub fn scoped_user_candidate_positions(events: &[Event]) -> Vec<usize> {
    rewound_positions(events)
        .into_iter()
        .filter(|&i| {
            let e = &events[i];
            !e.is_unscoped() && e.is_user() && e.compaction().is_none()
        })
        .collect()
}

/// One turn: a user query and everything the coordinator did in answer to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn<'a> {
    /// The turn's unscoped events, in order, starting with the user's query.
    pub events: Vec<&'a Event>,
}

impl<'a> Turn<'a> {
    /// The user's query text.
    pub fn user_query(&self) -> String {
        let query = &self.events[0];
        let attachments: Vec<String> = query
            .attachment_types()
            .map(|mime| format!("[attached {mime}]"))
            .collect();
        [query.text()]
            .into_iter()
            .chain(attachments)
            .filter(|s| !s.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The invocation id of the turn (the user event's).
    pub fn invocation_id(&self) -> &'a str {
        &self.events[0].invocation_id
    }

    /// The coordinator's final response: the last non-partial event that carries something
    /// (content parts or an error), when it is a text response by a non-user author with no
    /// error. Trailing actions-only events — the state delta an after-agent callback writes,
    /// ADK's `end_of_agent` marker — close nothing and are passed over.
    pub fn final_response(&self) -> Option<&'a Event> {
        let last = self
            .events
            .iter()
            .rev()
            .find(|e| completion_evidence(e).is_some())?;
        let is_response =
            completion_evidence(last) == Some(true) && !std::ptr::eq(*last, self.events[0]);
        is_response.then_some(*last)
    }

    /// True when the coordinator's final text response closed the turn.
    pub fn is_completed(&self) -> bool {
        self.final_response().is_some()
    }

    /// Timestamp of the turn's first event.
    pub fn first_timestamp(&self) -> crate::Timestamp {
        self.events[0].timestamp
    }

    /// Timestamp of the turn's last event.
    pub fn last_timestamp(&self) -> crate::Timestamp {
        self.events[self.events.len() - 1].timestamp
    }
}

/// What an event inside a turn says about whether the turn is completed, the one rule both
/// [`Turn::final_response`] and a store's incremental turn count follow: `None` when it says
/// nothing (a partial chunk, or an actions-only event with no content parts and no error),
/// `Some(true)` for a final answer (non-user author, no error, message text), `Some(false)`
/// for anything else (a tool call or result, an error, thoughts alone).
pub(crate) fn completion_evidence(event: &Event) -> Option<bool> {
    if event.is_partial() || (!event.has_parts() && event.error_code.is_none()) {
        return None;
    }
    Some(!event.is_user() && event.error_code.is_none() && event.has_text())
}

/// True when `event` opens a turn: an unscoped, non-partial user event with text or an
/// attachment (`inline_data`, `file_data`: a PDF sent without a word is still a question).
pub fn starts_turn(event: &Event) -> bool {
    event.is_unscoped()
        && event.is_user()
        && !event.is_partial()
        && event.compaction().is_none()
        && (event.has_text() || event.attachment_types().next().is_some())
}

/// Splits an already filtered (rewound, unscoped) event sequence into turns.
/// Compaction events and events before the first turn start belong to no turn.
pub fn turns<'a>(events: &[&'a Event]) -> Vec<Turn<'a>> {
    let mut turns: Vec<Turn<'a>> = Vec::new();
    for event in events {
        if event.compaction().is_some() || !event.is_unscoped() {
            continue;
        }
        if starts_turn(event) {
            turns.push(Turn {
                events: vec![*event],
            });
        } else if let Some(turn) = turns.last_mut() {
            turn.events.push(*event);
        }
    }
    turns
}

/// The completed turns of a session's coordinator view, oldest first.
pub fn completed_turns<'a>(events: &[&'a Event]) -> Vec<Turn<'a>> {
    turns(events)
        .into_iter()
        .filter(Turn::is_completed)
        .collect()
}

/// The timestamp an append is checked against: that of the latest unscoped, non-compaction
/// event of the coordinator view (rewinds applied), if any.
pub fn latest_view_timestamp(events: &[Event]) -> Option<crate::Timestamp> {
    coordinator_view(events)
        .into_iter()
        .rev()
        .find(|e| e.compaction().is_none())
        .map(|e| e.timestamp)
}

/// Whether `event` may follow a coordinator view whose latest timestamp is `latest` (see
/// [`latest_view_timestamp`]): an unscoped, non-compaction event must be stamped strictly
/// after it, since a compaction's coverage is by timestamp and a tie would put a retained
/// turn inside a summary's range. Scoped events (never shown to the coordinator) and
/// compaction events (whose own timestamp covers nothing) are not checked. Every store
/// applies this rule on append; [`crate::Clock`] states it for hosts.
pub fn timestamp_may_follow(latest: Option<crate::Timestamp>, event: &Event) -> bool {
    let checked = event.is_unscoped()
        && event.compaction().is_none()
        && event.actions.rewind_before_invocation_id.is_none();
    !checked || latest.is_none_or(|latest| event.timestamp > latest)
}

/// Where the newest turn of the view stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenTurn {
    /// No turn has started since the live compaction.
    #[default]
    None,
    /// A turn is open and not (yet) completed.
    Open,
    /// A turn is open and its last non-partial event is a final text answer.
    Completed,
}

impl OpenTurn {
    /// A stable code for persistence (0 none, 1 open, 2 completed).
    pub fn code(self) -> i64 {
        match self {
            OpenTurn::None => 0,
            OpenTurn::Open => 1,
            OpenTurn::Completed => 2,
        }
    }

    /// From [`OpenTurn::code`]; unknown values read as no open turn.
    pub fn from_code(code: i64) -> Self {
        match code {
            1 => OpenTurn::Open,
            2 => OpenTurn::Completed,
            _ => OpenTurn::None,
        }
    }
}

/// Counts completed turns since the live compaction, one coordinator-view event at a time:
/// the incremental form of [`completed_turns`] that [`crate::gate_input`] counts with and that a
/// store persists (two columns) to keep its gate header current on append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TurnTracker {
    /// Completed turns that are no longer the newest turn.
    pub closed: u64,
    /// The newest turn.
    pub open: OpenTurn,
}

impl TurnTracker {
    /// Completed turns since the live compaction.
    pub fn completed(&self) -> u64 {
        self.closed + u64::from(self.open == OpenTurn::Completed)
    }

    /// Follows one event appended to the coordinator view (unscoped, not a rewind). A
    /// compaction event is no part of any turn; whether it resets the count is the caller's
    /// call ([`TurnTracker::reset`]), since that depends on subsumption.
    pub fn observe(&mut self, event: &Event) {
        if event.compaction().is_some() {
            return;
        }
        if starts_turn(event) {
            self.closed += u64::from(self.open == OpenTurn::Completed);
            self.open = OpenTurn::Open;
            return;
        }
        if self.open == OpenTurn::None {
            return;
        }
        self.open = match completion_evidence(event) {
            None => return,
            Some(true) => OpenTurn::Completed,
            Some(false) => OpenTurn::Open,
        };
    }

    /// A new live compaction was appended: nothing after it has been counted yet.
    pub fn reset(&mut self) {
        *self = TurnTracker::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Content, Part};
    use crate::testing::EventFactory;

    #[test]
    fn rewind_drops_itself_and_the_target_invocation_onwards() {
        let mut f = EventFactory::new();
        let mut events = f.conversational_turn("inv1", "q1", "a1");
        events.extend(f.conversational_turn("inv2", "q2", "a2"));
        events.extend(f.conversational_turn("inv3", "q3", "a3"));
        let rewind = f.rewind("inv4", "inv2");
        events.push(rewind);
        events.extend(f.conversational_turn("inv5", "q5", "a5"));
        let view: Vec<&str> = apply_rewinds(&events)
            .iter()
            .map(|e| e.invocation_id.as_str())
            .collect();
        assert_eq!(view, ["inv1", "inv1", "inv5", "inv5"]);
    }

    #[test]
    fn rewind_to_an_unknown_invocation_drops_only_itself() {
        let mut f = EventFactory::new();
        let mut events = f.conversational_turn("inv1", "q1", "a1");
        events.push(f.rewind("inv2", "nope"));
        assert_eq!(apply_rewinds(&events).len(), 2);
    }

    #[test]
    fn a_rewind_also_drops_compaction_events_after_the_target() {
        let mut f = EventFactory::new();
        let mut events = f.conversational_turn("inv1", "q1", "a1");
        events.extend(f.conversational_turn("inv2", "q2", "a2"));
        let (s, e) = (events[0].timestamp, events[1].timestamp);
        events.push(f.compaction("c1", s, e, "summary"));
        events.push(f.rewind("inv3", "inv2"));
        let view = apply_rewinds(&events);
        assert_eq!(view.len(), 2);
        assert!(view.iter().all(|e| e.compaction().is_none()));
    }

    #[test]
    fn edge_cases_of_completion() {
        let mut f = EventFactory::new();
        // Completed conversational turn.
        let done = f.conversational_turn("a", "q", "answer");
        // Errored turn: the model call failed.
        let mut errored = vec![f.user("b", "q")];
        let mut err = f.model("b", "");
        err.content = None;
        err.error_code = Some("RESOURCE_EXHAUSTED".into());
        errored.push(err);
        // Only tool calls.
        let mut tools = vec![f.user("c", "q")];
        tools.push(f.function_call("c", "search_library"));
        tools.push(f.function_response("c", "search_library", "results"));
        // Final text followed by a stray partial chunk: still completed.
        let mut trailing = f.conversational_turn("d", "q", "final");
        let mut chunk = f.model("d", "fin");
        chunk.partial = Some(true);
        trailing.push(chunk);
        // Only partial text: not completed.
        let mut partial_only = vec![f.user("e", "q")];
        let mut chunk = f.model("e", "half an ans");
        chunk.partial = Some(true);
        partial_only.push(chunk);
        // A text response that also carries a function call still counts as text.
        let mut mixed = vec![f.user("g", "q")];
        let mut m = f.model("g", "here");
        m.content.as_mut().unwrap().parts.push(Part::default());
        mixed.push(m);

        // Final text, then actions-only events (a callback's state delta, ADK's end_of_agent
        // marker): still completed.
        let mut callback = f.conversational_turn("h", "q", "final");
        let mut delta = f.model("h", "");
        delta.content = None;
        delta
            .actions
            .extra
            .insert("state_delta".into(), serde_json::json!({"k": 1}));
        let mut end = f.model("h", "");
        end.content = Some(Content {
            role: Some("model".into()),
            parts: Vec::new(),
        });
        end.actions
            .extra
            .insert("end_of_agent".into(), serde_json::json!(true));
        callback.extend([delta, end]);
        // Only thoughts after the query: the model reasoned but never answered.
        let mut thinking = vec![f.user("i", "q")];
        let mut thought = f.model("i", "let me reason about this");
        thought.content.as_mut().unwrap().parts[0]
            .extra
            .insert("thought".into(), serde_json::json!(true));
        thinking.push(thought);

        let all: Vec<Event> = [
            done,
            errored,
            tools,
            trailing,
            partial_only,
            mixed,
            callback,
            thinking,
        ]
        .concat();
        let view: Vec<&Event> = all.iter().collect();
        let got: Vec<(String, bool)> = turns(&view)
            .iter()
            .map(|t| (t.invocation_id().to_owned(), t.is_completed()))
            .collect();
        let expected: Vec<(String, bool)> = [
            ("a", true),
            ("b", false),
            ("c", false),
            ("d", true),
            ("e", false),
            ("g", true),
            ("h", true),
            ("i", false),
        ]
        .iter()
        .map(|(i, c)| (i.to_string(), *c))
        .collect();
        assert_eq!(got, expected);
    }

    /// A PDF sent without a word opens a turn of its own, shown by its type; a tool result
    /// (a user-role part that is no attachment) does not.
    #[test]
    fn an_attachment_alone_starts_a_turn() {
        let mut f = EventFactory::new();
        let mut events = f.conversational_turn("a", "q", "answer a");
        let mut pdf = f.user("b", "");
        pdf.content.as_mut().unwrap().parts = vec![Part {
            extra:
                serde_json::json!({"inline_data": {"mime_type": "application/pdf", "data": "JVBE"}})
                    .as_object()
                    .unwrap()
                    .clone(),
            ..Part::default()
        }];
        events.push(pdf);
        events.push(f.function_response("b", "read_pdf", "text of the paper"));
        events.push(f.model("b", "answer b"));
        let view = coordinator_view(&events);
        let t = turns(&view);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].user_query(), "[attached application/pdf]");
        assert!(t[1].is_completed());
        assert_eq!(t[0].final_response().unwrap().text(), "answer a");
    }

    #[test]
    fn scoped_user_events_do_not_start_turns_and_events_before_the_first_turn_are_ignored() {
        let mut f = EventFactory::new();
        let greeting = f.model("g0", "Hello, what shall we research?");
        let mut events = vec![greeting];
        events.extend(f.conversational_turn("a", "q", "r"));
        let scoped = f.user("a", "sub-query").with_scope("search_pipeline:fc1");
        events.insert(2, scoped);
        let view = coordinator_view(&events);
        let t = turns(&view);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].events.len(), 2);
        assert_eq!(t[0].user_query(), "q");
        let _ = Content::default();
    }
}
