//! The gate header: the two figures of the envelope gate, kept current on every append so that
//! the fast exit reads one row.
//!
//! The header follows compaction-core's definitions exactly ([`compaction_core::gate_input`]):
//! completed turns that begin after the live compaction in the coordinator view, and the prompt
//! token count of the latest unscoped event that reports one.
//!
//! # Incremental upkeep
//! Appending an event that is not a rewind appends it to the coordinator view unchanged
//! (`apply_rewinds(h + [e]) = apply_rewinds(h) + [e]`), so the header can follow the view one
//! event at a time with a [`TurnTracker`]:
//! - a turn start closes the open turn (counting it when it was completed) and opens a new one;
//! - an event inside the open turn decides whether the turn is completed *for now*, by
//!   compaction-core's [`completion_evidence`] (a text answer by a non-user author without an
//!   error); partial chunks and actions-only events change nothing;
//! - a compaction that becomes the live one resets the count: what follows it belongs to no
//!   turn until the next turn start.
//!
//! The tracker is compaction-core's own ([`TurnTracker`]): `gate_input` counts with it too, so
//! the store keeps the core's rule, never a copy of it.
//!
//! A rewind can drop or bring back any part of the view, so appending one recomputes the header
//! from the whole history ([`Recomputed::from_history`]), using compaction-core's own functions.

use std::collections::HashSet;

#[cfg(test)]
use compaction_core::store_support::OpenTurn;
use compaction_core::store_support::TurnTracker;
use compaction_core::store_support::live_compaction_index;
use compaction_core::{Event, apply_rewinds, coordinator_prompt_tokens, subsumed_compaction_ids};

/// Everything the store derives from a whole history, computed with compaction-core's own
/// functions: the slow path after a rewind, and the reference the incremental path must match.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recomputed {
    /// Per event (append order): in the coordinator view (kept by rewinds, unscoped).
    pub(crate) in_view: Vec<bool>,
    /// Per event: a compaction of the view that another compaction subsumes.
    pub(crate) subsumed: Vec<bool>,
    /// Index (append order) of the live compaction event.
    pub(crate) live: Option<usize>,
    /// Turns since the live compaction.
    pub(crate) tracker: TurnTracker,
    /// Latest coordinator prompt token count.
    pub(crate) prompt_tokens: Option<u64>,
}

impl Recomputed {
    /// Derives the header and the per-event flags from `events`, the whole history.
    pub(crate) fn from_history(events: &[Event]) -> Self {
        let kept: HashSet<*const Event> = apply_rewinds(events)
            .into_iter()
            .map(std::ptr::from_ref)
            .collect();
        let in_view: Vec<bool> = events
            .iter()
            .map(|e| e.is_unscoped() && kept.contains(&std::ptr::from_ref(e)))
            .collect();
        let view: Vec<(usize, &Event)> = events
            .iter()
            .enumerate()
            .filter(|(i, _)| in_view[*i])
            .collect();
        let refs: Vec<&Event> = view.iter().map(|(_, e)| *e).collect();
        let subsumed_ids: HashSet<String> = subsumed_compaction_ids(events).into_iter().collect();
        let subsumed = events
            .iter()
            .enumerate()
            .map(|(i, e)| in_view[i] && e.compaction().is_some() && subsumed_ids.contains(&e.id))
            .collect();
        let live_in_view = live_compaction_index(&refs);
        let mut tracker = TurnTracker::default();
        let since = live_in_view.map_or(0, |i| i + 1);
        for event in &refs[since..] {
            tracker.observe(event);
        }
        Recomputed {
            in_view,
            subsumed,
            live: live_in_view.map(|i| view[i].0),
            tracker,
            prompt_tokens: coordinator_prompt_tokens(refs.iter().copied()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction_core::gate_input;
    use compaction_core::testing::EventFactory;

    fn check(events: &[Event]) {
        let r = Recomputed::from_history(events);
        let oracle = gate_input(events);
        assert_eq!(
            r.tracker.completed(),
            oracle.completed_turns_since_compaction as u64
        );
        assert_eq!(r.prompt_tokens, oracle.coordinator_prompt_tokens);
    }

    #[test]
    fn a_turn_can_complete_and_reopen() {
        let mut f = EventFactory::new();
        let mut events = f.conversational_turn("a", "q", "answer");
        check(&events);
        events.push(f.function_call("a", "search_library"));
        check(&events);
        let r = Recomputed::from_history(&events);
        assert_eq!(r.tracker.open, OpenTurn::Open);
        events.push(f.model("a", "final"));
        check(&events);
        assert_eq!(Recomputed::from_history(&events).tracker.completed(), 1);
    }

    #[test]
    fn the_live_compaction_resets_the_count_and_a_rewind_can_undo_it() {
        let mut f = EventFactory::new();
        let mut events = f.conversational_turn("a", "q1", "r1");
        events.extend(f.conversational_turn("b", "q2", "r2"));
        let (s, e) = (events[0].timestamp, events[3].timestamp);
        events.push(f.compaction("c", s, e, "summary"));
        events.extend(f.conversational_turn("d", "q3", "r3"));
        let r = Recomputed::from_history(&events);
        assert_eq!(r.live, Some(4));
        assert_eq!(r.tracker.completed(), 1);
        check(&events);
        events.push(f.rewind("x", "c"));
        let r = Recomputed::from_history(&events);
        assert_eq!(r.live, None);
        assert_eq!(r.tracker.completed(), 2);
        assert!(!r.in_view[4] && !r.in_view[5] && !r.in_view[7]);
        check(&events);
    }
}
