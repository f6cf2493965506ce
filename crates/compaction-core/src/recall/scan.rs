//! The recall rules over a whole history: what a store without an index answers (the port's
//! defaults, the in-memory store, Google ADK's own layouts), and the oracle every indexed
//! store is tested against.

use crate::context::{CompactionRange, rendered_compaction_indexes};
use crate::event::Event;
use crate::history::{apply_rewinds, coordinator_view, starts_turn};

use super::{Coverage, RecallHit, RecallQuery, RecalledEvent, searchable_text, snippet};

/// Why an expansion was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// No compaction of the coordinator view has this id.
    #[error("no compaction event {0:?} in the session's history")]
    UnknownCompaction(String),
    /// The turn range is empty or reaches past the session's turns.
    #[error(
        "turns {first}..{last} are outside the session, which has {turns} turn(s): give \
         1 <= A <= B <= {turns}"
    )]
    TurnsOutOfRange {
        /// First turn asked for.
        first: usize,
        /// Last turn asked for.
        last: usize,
        /// Turns the session has.
        turns: usize,
    },
}

/// The rendered compactions of the coordinator view of `events`.
pub fn coverage(events: &[Event]) -> Coverage {
    let view = coordinator_view(events);
    Coverage::new(
        rendered_compaction_indexes(&view)
            .into_iter()
            .filter_map(|i| {
                let c = view[i].compaction()?;
                let range = CompactionRange {
                    position: i64::try_from(i).unwrap_or(i64::MAX),
                    start: c.start_timestamp,
                    end: c.end_timestamp,
                };
                Some((view[i].id.clone(), range))
            })
            .collect(),
    )
}

/// The events of the history with rewinds applied, each with its turn number (see the
/// module docs of `super`).
fn numbered(events: &[Event]) -> Vec<(Option<usize>, &Event)> {
    let mut turn = 0;
    apply_rewinds(events)
        .into_iter()
        .map(|e| {
            if starts_turn(e) {
                turn += 1;
            }
            ((turn > 0).then_some(turn), e)
        })
        .collect()
}

/// How many turns of the coordinator view start before `ts`.
pub fn turns_before(events: &[Event], ts: crate::time::Timestamp) -> usize {
    coordinator_view(events)
        .into_iter()
        .filter(|e| starts_turn(e) && e.timestamp < ts)
        .count()
}

/// True when `event` is one a search looks at (see the recall module's docs).
pub fn searchable(event: &Event, pipeline: bool) -> bool {
    event.compaction().is_none()
        && event.actions.rewind_before_invocation_id.is_none()
        && (pipeline || event.is_unscoped())
}

/// Every event `query` matches, best first, at most `limit`. The order here is a plain
/// term-frequency score over the event's length (ties: earlier first); indexed stores rank
/// with their own measure.
pub fn search_history(events: &[Event], query: &RecallQuery, limit: usize) -> Vec<RecallHit> {
    let coverage = coverage(events);
    let mut scored: Vec<(f64, usize, RecallHit)> = numbered(events)
        .into_iter()
        .enumerate()
        .filter(|(_, (_, e))| searchable(e, query.includes_pipeline()))
        .filter_map(|(position, (turn, event))| {
            let text = searchable_text(event);
            if !query.matches(&text) {
                return None;
            }
            let all: Vec<String> = super::words(&text).collect();
            let hits = all.iter().filter(|w| query.words().contains(w)).count();
            let score = hits as f64 / (all.len() as f64 + 10.0);
            let covered_by = coverage.covered_by(event.timestamp);
            let hit = RecallHit::new(event, turn, covered_by, snippet(&text, query), text);
            Some((score, position, hit))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(limit).map(|(_, _, h)| h).collect()
}

/// The events a compaction of the coordinator view covers, verbatim and in order: the
/// view's non-compaction events whose timestamp its range holds.
pub fn expand_compaction(
    events: &[Event],
    compaction_id: &str,
) -> Result<Vec<RecalledEvent>, ExpandError> {
    let view = coordinator_view(events);
    let compaction = view
        .iter()
        .find(|e| e.id == compaction_id)
        .and_then(|e| e.compaction())
        .ok_or_else(|| ExpandError::UnknownCompaction(compaction_id.to_owned()))?;
    let coverage = coverage(events);
    Ok(view_numbered(events)
        .into_iter()
        .filter(|(_, e)| compaction.covers(e.timestamp))
        .map(|(turn, e)| RecalledEvent::new(e.clone(), turn, coverage.covered_by(e.timestamp)))
        .collect())
}

/// The coordinator view's non-compaction events, each with its turn.
fn view_numbered(events: &[Event]) -> Vec<(Option<usize>, &Event)> {
    numbered(events)
        .into_iter()
        .filter(|(_, e)| e.is_unscoped() && e.compaction().is_none())
        .collect()
}

/// The coordinator view's events of turns `first..=last`, verbatim and in order.
pub fn expand_turns(
    events: &[Event],
    first: usize,
    last: usize,
) -> Result<Vec<RecalledEvent>, ExpandError> {
    let numbered = view_numbered(events);
    let turns = numbered.iter().filter_map(|(t, _)| *t).max().unwrap_or(0);
    if first == 0 || first > last || last > turns {
        return Err(ExpandError::TurnsOutOfRange { first, last, turns });
    }
    let coverage = coverage(events);
    Ok(numbered
        .into_iter()
        .filter(|(t, _)| t.is_some_and(|t| (first..=last).contains(&t)))
        .map(|(turn, e)| RecalledEvent::new(e.clone(), turn, coverage.covered_by(e.timestamp)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::EventFactory;

    fn folded_session() -> (Vec<Event>, String) {
        let mut f = EventFactory::new();
        let mut events = Vec::new();
        events.extend(f.conversational_turn("i1", "What about lithium plating?", "Onset at 4C."));
        events.extend(f.research_turn("i2", "SEI growth", "SEI grows with sqrt(t)."));
        let (start, end) = (events[0].timestamp, events[events.len() - 1].timestamp);
        let compaction = f.compaction("c1", start, end, "turns 1–2: plating, SEI");
        let id = compaction.id.clone();
        events.push(compaction);
        events.extend(f.conversational_turn("i3", "And plating again?", "Yes, plating."));
        (events, id)
    }

    #[test]
    fn folded_hits_name_their_turn_and_summary() {
        let (events, id) = folded_session();
        let q = RecallQuery::parse("plating").unwrap();
        let hits = search_history(&events, &q, 10);
        let turns: Vec<(Option<usize>, Option<&str>)> = hits
            .iter()
            .map(|h| (h.turn, h.covered_by.as_deref()))
            .collect();
        assert_eq!(hits.len(), 3);
        assert!(turns.contains(&(Some(1), Some(id.as_str()))));
        assert!(turns.contains(&(Some(3), None)));
        // The summary itself is no original, and the scoped chunk is searched only when asked.
        let chunk = RecallQuery::parse("ReAct searching").unwrap();
        assert!(search_history(&events, &chunk, 10).is_empty());
        let scoped = search_history(&events, &chunk.with_pipeline(true), 10);
        assert_eq!(scoped.len(), 1);
        assert!(scoped[0].scope.is_some());
    }

    #[test]
    fn a_compaction_expands_to_its_turns_verbatim() {
        let (events, id) = folded_session();
        let expanded = expand_compaction(&events, &id).unwrap();
        let unscoped: Vec<&Event> = events[..8].iter().filter(|e| e.is_unscoped()).collect();
        let got: Vec<&Event> = expanded.iter().map(|r| &r.event).collect();
        assert_eq!(got, unscoped);
        assert_eq!(expanded[0].turn, Some(1));
        assert_eq!(expanded.last().unwrap().turn, Some(2));
        assert_eq!(
            expand_compaction(&events, "e1"),
            Err(ExpandError::UnknownCompaction("e1".into()))
        );
        assert_eq!(expand_turns(&events, 2, 3).unwrap().len(), 6);
        assert_eq!(
            expand_turns(&events, 2, 4),
            Err(ExpandError::TurnsOutOfRange {
                first: 2,
                last: 4,
                turns: 3
            })
        );
        assert!(expand_turns(&events, 0, 1).is_err());
        assert!(expand_turns(&events, 3, 2).is_err());
    }
}
