//! Subsumption and prompt assembly (spec section 6): which summary is live and what the
//! coordinator sees on the next turn.
//!
//! A compaction is *subsumed* when another compaction's range contains its range; of two
//! compactions with identical ranges, the later one (in append order) is kept. The *live*
//! compaction is the non-subsumed one with the greatest end timestamp (the engine only ever
//! writes rolling consolidations, so in practice there is exactly one).

use crate::event::{Event, EventCompaction};
use crate::history::{coordinator_positions, coordinator_view};
use crate::time::Timestamp;

/// A compaction of the coordinator view as a store indexes it: its position in append order
/// and its range. The subsumption rule is stated once, on these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionRange {
    /// Position in append order (a store's sequence number).
    pub position: i64,
    /// First covered timestamp.
    pub start: Timestamp,
    /// Last covered timestamp.
    pub end: Timestamp,
}

impl CompactionRange {
    fn of(position: usize, c: &EventCompaction) -> Self {
        CompactionRange {
            position: i64::try_from(position).unwrap_or(i64::MAX),
            start: c.start_timestamp,
            end: c.end_timestamp,
        }
    }

    /// The rule: `self` subsumes `other` when its range contains `other`'s; of two identical
    /// ranges, the later one (in append order) subsumes the earlier.
    pub fn subsumes(&self, other: &CompactionRange) -> bool {
        let contains = self.start <= other.start && other.end <= self.end;
        let same = self.start == other.start && self.end == other.end;
        self.position != other.position && contains && (!same || self.position > other.position)
    }
}

/// What a store records when a compaction joins the view ([`subsumption_on_append`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendedCompaction {
    /// Positions that are subsumed from now on (the new compaction's own, when an earlier one
    /// strictly contains it).
    pub newly_subsumed: Vec<i64>,
    /// The live compaction afterwards.
    pub live: Option<CompactionRange>,
}

/// What changes when `new` (appended after every compaction of `live_candidates`, the view's
/// compactions that no other subsumes) joins the view: the positions that become subsumed and
/// the live compaction afterwards. Subsumption only grows on append, and containment is
/// transitive, so the non-subsumed compactions are the only ones to look at: the incremental
/// form of [`subsumed_compaction_ids`] and [`live_compaction_index`] that a store calls on append.
pub fn subsumption_on_append(
    live_candidates: &[CompactionRange],
    new: CompactionRange,
) -> AppendedCompaction {
    let new_subsumed = live_candidates.iter().any(|c| c.subsumes(&new));
    let (mut newly_subsumed, mut remaining): (Vec<CompactionRange>, Vec<CompactionRange>) =
        live_candidates.iter().partition(|c| new.subsumes(c));
    if new_subsumed {
        newly_subsumed.push(new);
    } else {
        remaining.push(new);
    }
    AppendedCompaction {
        newly_subsumed: newly_subsumed.iter().map(|c| c.position).collect(),
        live: live_among(&remaining),
    }
}

/// The live compaction among non-subsumed ones: the greatest end, ties to the later.
pub(crate) fn live_among(non_subsumed: &[CompactionRange]) -> Option<CompactionRange> {
    non_subsumed
        .iter()
        .copied()
        .max_by(|a, b| a.end.cmp(&b.end).then(a.position.cmp(&b.position)))
}

/// The compactions of `view` (by index into `view`) as ranges.
fn ranges(view: &[&Event]) -> Vec<CompactionRange> {
    view.iter()
        .enumerate()
        .filter_map(|(i, e)| e.compaction().map(|c| CompactionRange::of(i, c)))
        .collect()
}

/// Each compaction event of `view` (by index into `view`, in order) and whether another
/// subsumes it. The ranges are listed once: the cost is the view plus the compactions squared,
/// not the view times the compactions (a long ADK history holds a compaction every few turns).
fn subsumption(view: &[&Event]) -> Vec<(usize, bool)> {
    let all = ranges(view);
    all.iter()
        .filter_map(|me| {
            let index = usize::try_from(me.position).ok()?;
            Some((index, all.iter().any(|other| other.subsumes(me))))
        })
        .collect()
}

/// Index (into `view`) of the live compaction event, if any.
pub fn live_compaction_index(view: &[&Event]) -> Option<usize> {
    let all = ranges(view);
    let non_subsumed: Vec<CompactionRange> = all
        .iter()
        .filter(|me| !all.iter().any(|other| other.subsumes(me)))
        .copied()
        .collect();
    live_among(&non_subsumed).and_then(|live| usize::try_from(live.position).ok())
}

/// Indexes (into `view`) of the compactions ADK's prompt builder renders: every
/// non-subsumed one, in view order. ADK's `_get_compaction_ranges` keeps exactly these (a
/// containing range supersedes the ranges it contains; of identical ranges the later one
/// stays), so two partially overlapping summaries — ADK's own sliding-window compactions of
/// turns 1–4 and 3–6, say — are both rendered. A session only this engine wrote has one.
pub fn rendered_compaction_indexes(view: &[&Event]) -> Vec<usize> {
    subsumption(view)
        .into_iter()
        .filter_map(|(i, subsumed)| (!subsumed).then_some(i))
        .collect()
}

/// True when `event` is a non-compaction event whose timestamp some range of `rendered`
/// covers: ADK hides it from the prompt.
fn hidden_by(rendered: &[&EventCompaction], event: &Event) -> bool {
    event.compaction().is_none() && rendered.iter().any(|c| c.covers(event.timestamp))
}

/// The ranges of the rendered compactions of `view`.
fn rendered_ranges<'a>(view: &[&'a Event]) -> Vec<&'a EventCompaction> {
    rendered_compaction_indexes(view)
        .into_iter()
        .filter_map(|i| view[i].compaction())
        .collect()
}

/// The non-compaction events of `view` no rendered compaction covers, in order: what ADK
/// shows verbatim, and the only events a rolling consolidation may still fold.
pub fn uncovered_events<'a>(view: &[&'a Event]) -> Vec<&'a Event> {
    let rendered = rendered_ranges(view);
    view.iter()
        .filter(|e| e.compaction().is_none() && !hidden_by(&rendered, e))
        .copied()
        .collect()
}

/// Positions in `events` of what a rolling consolidation reads: the [`live_tail`], plus every
/// other rendered compaction (see [`rendered_compaction_indexes`]) and every uncovered
/// coordinator event from the earliest rendered start on. For a session only this engine
/// wrote it equals [`live_tail_positions`]; for one that also holds ADK's own overlapping
/// summaries, [`crate::plan_compaction`] of these events equals that of the whole history,
/// so a store that outlines every row (`AdkStore`) can answer the live tail with them. It
/// reads only what an [`crate::EventOutline`] keeps.
pub fn rolling_tail_positions(events: &[Event]) -> Vec<usize> {
    let positions = coordinator_positions(events);
    let view: Vec<&Event> = positions.iter().map(|&i| &events[i]).collect();
    let rendered = rendered_compaction_indexes(&view);
    let ranges: Vec<&EventCompaction> = rendered
        .iter()
        .filter_map(|&i| view[i].compaction())
        .collect();
    let Some(start) = ranges.iter().map(|c| c.start_timestamp).min() else {
        return positions;
    };
    positions
        .iter()
        .zip(&view)
        .enumerate()
        .filter(|(i, (_, e))| {
            rendered.contains(i)
                || (e.compaction().is_none() && e.timestamp >= start && !hidden_by(&ranges, e))
        })
        .map(|(_, (&position, _))| position)
        .collect()
}

/// The next prompt's context exactly as ADK 2.13's prompt builder (`_process_compaction_events`)
/// assembles it from a whole history: every rendered compaction's summary placed at its end
/// timestamp, every non-compaction event outside the union of their ranges verbatim, ordered
/// by timestamp with append order breaking ties. It differs from [`assemble_context`] only
/// when several summaries are rendered (ADK's own partially overlapping sliding-window
/// compactions); `compaction inspect` shows this one for an ADK file.
pub fn adk_prompt_context(events: &[Event]) -> AssembledContext {
    let view = coordinator_view(events);
    let rendered = rendered_compaction_indexes(&view);
    let ranges = rendered_ranges(&view);
    let mut items: Vec<(Timestamp, usize, ContextEntry)> = Vec::new();
    for (i, event) in view.iter().enumerate() {
        match event.compaction() {
            Some(c) if rendered.contains(&i) => items.push((
                c.end_timestamp,
                i,
                ContextEntry::Summary(LiveSummary {
                    event_id: event.id.clone(),
                    compaction: c.clone(),
                }),
            )),
            Some(_) => {}
            None if hidden_by(&ranges, event) => {}
            None => items.push((
                event.timestamp,
                i,
                ContextEntry::Event(Box::new((*event).clone())),
            )),
        }
    }
    items.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    AssembledContext {
        entries: items.into_iter().map(|(_, _, entry)| entry).collect(),
    }
}

/// Ids of every compaction event of the coordinator view that is subsumed by another.
pub fn subsumed_compaction_ids(events: &[Event]) -> Vec<String> {
    let view = coordinator_view(events);
    subsumption(&view)
        .into_iter()
        .filter(|&(_, subsumed)| subsumed)
        .map(|(i, _)| view[i].id.clone())
        .collect()
}

/// One compaction of the coordinator view, as a compaction history lists it: its range, the
/// size of its summary, whether another compaction subsumes it and its receipt — without the
/// summary.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionEntry {
    /// Id of the compaction event.
    pub event_id: String,
    /// First covered timestamp.
    pub start_timestamp: Timestamp,
    /// Last covered timestamp.
    pub end_timestamp: Timestamp,
    /// Characters of the summary.
    pub summary_chars: usize,
    /// True when another compaction of the view subsumes this one.
    pub subsumed: bool,
    /// What the compaction did to the folded turns' findings, when it recorded a receipt.
    pub receipt: Option<crate::receipt::Receipt>,
}

impl CompactionEntry {
    /// The entry of a compaction event; `None` when `event` carries no compaction.
    pub fn new(event: &Event, subsumed: bool) -> Option<Self> {
        event.compaction().map(|c| CompactionEntry {
            event_id: event.id.clone(),
            start_timestamp: c.start_timestamp,
            end_timestamp: c.end_timestamp,
            summary_chars: c.summary_text().chars().count(),
            subsumed,
            receipt: crate::receipt::Receipt::of_event(event),
        })
    }
}

/// The compactions of the coordinator view (rewinds applied), in append order.
pub fn compaction_history(events: &[Event]) -> Vec<CompactionEntry> {
    let view = coordinator_view(events);
    subsumption(&view)
        .into_iter()
        .filter_map(|(i, subsumed)| CompactionEntry::new(view[i], subsumed))
        .collect()
}

/// The live summary as the coordinator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSummary {
    /// Id of the compaction event.
    pub event_id: String,
    /// The compaction itself.
    pub compaction: EventCompaction,
}

/// One item of the next turn's context.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ContextEntry {
    /// The rolling summary, rendered as a `model` message.
    Summary(LiveSummary),
    /// An event kept verbatim.
    Event(Box<Event>),
}

/// The context the coordinator's next prompt is assembled from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AssembledContext {
    /// In timeline order: events before the summary's range (normally none), the summary,
    /// then every unscoped event after its end timestamp.
    pub entries: Vec<ContextEntry>,
}

impl AssembledContext {
    /// The summary, if one is live.
    pub fn summary(&self) -> Option<&LiveSummary> {
        self.entries.iter().find_map(|e| match e {
            ContextEntry::Summary(s) => Some(s),
            ContextEntry::Event(_) => None,
        })
    }

    /// The verbatim events.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.entries.iter().filter_map(|e| match e {
            ContextEntry::Event(ev) => Some(ev.as_ref()),
            ContextEntry::Summary(_) => None,
        })
    }

    /// A readable rendering: the summary, then each event as `[author] text` with tool
    /// calls and results named.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for entry in &self.entries {
            match entry {
                ContextEntry::Summary(s) => {
                    out.push_str(&format!(
                        "[summary {} .. {}]\n{}\n",
                        s.compaction.start_timestamp,
                        s.compaction.end_timestamp,
                        s.compaction.summary_text()
                    ));
                }
                ContextEntry::Event(e) => {
                    out.push_str(&format!(
                        "[{}] {}\n",
                        e.author,
                        crate::render::render_event_body(e)
                    ));
                }
            }
        }
        out
    }
}

/// The live tail of a history: what [`crate::SessionStore::load_live_tail`] returns, as the
/// reference a store's indexed answer is checked against.
///
/// The coordinator view (rewinds applied, scoped events dropped) cut down to the live
/// compaction event and every non-compaction event whose timestamp is after the live
/// compaction's end, in append order; the whole view when no compaction is live. The plan and
/// the probe's decision state computed from it equal those computed from the whole history
/// whenever timestamps follow append order (as they do for every clock-driven writer): what
/// it leaves out lies inside the live summary's range, which neither reads again.
pub fn live_tail(events: &[Event]) -> Vec<Event> {
    live_tail_positions(events)
        .into_iter()
        .map(|i| events[i].clone())
        .collect()
}

/// Positions in `events` of the [`live_tail`], in order. It reads only what an
/// [`crate::EventOutline`] keeps (invocation, timestamp, scope, compaction range, rewind
/// target), so a store can run it on outlines and then read only those rows whole.
pub fn live_tail_positions(events: &[Event]) -> Vec<usize> {
    let positions = coordinator_positions(events);
    let view: Vec<&Event> = positions.iter().map(|&i| &events[i]).collect();
    let Some(live) = live_compaction_index(&view) else {
        return positions;
    };
    let end = view[live].compaction().map(|c| c.end_timestamp);
    positions
        .iter()
        .zip(&view)
        .enumerate()
        .filter(|(i, (_, e))| {
            *i == live || (e.compaction().is_none() && end.is_some_and(|end| e.timestamp > end))
        })
        .map(|(_, (&position, _))| position)
        .collect()
}

/// Assembles the next turn's context from a whole history: rewinds applied, scoped events
/// dropped, the live summary in place of every event in its range, everything else verbatim.
pub fn assemble_context(events: &[Event]) -> AssembledContext {
    let view = coordinator_view(events);
    let live = live_compaction_index(&view).and_then(|i| {
        view[i].compaction().map(|c| LiveSummary {
            event_id: view[i].id.clone(),
            compaction: c.clone(),
        })
    });
    let events = view
        .iter()
        .filter(|e| e.compaction().is_none())
        .map(|e| (*e).clone());
    assemble_around(live, events)
}

/// The next prompt's context from the live summary (if any) and the view's non-compaction
/// events in append order: events the summary covers are left out, and the summary stands
/// before the first event after its end (or last). [`assemble_context`] calls it with the whole
/// view; a store calls it with only the events outside the live range (what its indexes find).
pub fn assemble_around(
    live: Option<LiveSummary>,
    events: impl IntoIterator<Item = Event>,
) -> AssembledContext {
    let mut entries = Vec::new();
    let mut summary = live;
    for event in events {
        if let Some(live) = &summary {
            if live.compaction.covers(event.timestamp) {
                continue;
            }
            if event.timestamp > live.compaction.end_timestamp {
                entries.extend(summary.take().map(ContextEntry::Summary));
            }
        }
        entries.push(ContextEntry::Event(Box::new(event)));
    }
    entries.extend(summary.map(ContextEntry::Summary));
    AssembledContext { entries }
}

#[cfg(test)]
mod subsumption_tests {
    use super::*;
    use crate::testing::EventFactory;
    use proptest::prelude::*;

    proptest! {
        /// `subsumption` lists the ranges once; it equals the rule applied pair by pair, for
        /// views of events and compactions with arbitrary (overlapping, equal, nested) ranges.
        #[test]
        fn subsumption_is_the_rule_pair_by_pair(
            steps in proptest::collection::vec(proptest::option::of((0_u8..20, 0_u8..20)), 0..40)
        ) {
            let mut f = EventFactory::new();
            let events: Vec<Event> = steps
                .iter()
                .enumerate()
                .map(|(i, step)| match step {
                    None => f.user(&format!("inv{i}"), "q"),
                    Some((a, b)) => {
                        let at = |x: &u8| Timestamp::new(1_600_000_000.0 + f64::from(*x)).unwrap();
                        f.compaction(&format!("c{i}"), at(a.min(b)), at(a.max(b)), "s")
                    }
                })
                .collect();
            let view: Vec<&Event> = events.iter().collect();
            let expected: Vec<(usize, bool)> = (0..view.len())
                .filter_map(|i| {
                    let me = CompactionRange::of(i, view[i].compaction()?);
                    let subsumed = (0..view.len()).any(|j| {
                        view[j].compaction().is_some_and(|c| CompactionRange::of(j, c).subsumes(&me))
                    });
                    Some((i, subsumed))
                })
                .collect();
            prop_assert_eq!(subsumption(&view), expected);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::scoped_user_messages;
    use crate::plan::plan_compaction;
    use crate::testing::EventFactory;

    /// Turns 1..=n, then ADK's own sliding-window summaries of turns 1–4 and 3–6 (appended
    /// after turn 6, as ADK's runner does), then turns n+1..=m.
    fn adk_windows(after: usize) -> Vec<Event> {
        let mut f = EventFactory::new();
        let mut events = Vec::new();
        let mut bounds = Vec::new();
        for i in 1..=6 {
            let turn =
                f.conversational_turn(&format!("inv{i}"), &format!("q{i}"), &format!("a{i}"));
            bounds.push((turn[0].timestamp, turn[1].timestamp));
            events.extend(turn);
        }
        events.push(f.compaction("adk-c1", bounds[0].0, bounds[3].1, "ADK summary 1-4"));
        events.push(f.compaction("adk-c2", bounds[2].0, bounds[5].1, "ADK summary 3-6"));
        for i in 7..=6 + after {
            events.extend(f.conversational_turn(
                &format!("inv{i}"),
                &format!("q{i}"),
                &format!("a{i}"),
            ));
        }
        events
    }

    fn summaries(context: &AssembledContext) -> Vec<String> {
        context
            .entries
            .iter()
            .filter_map(|e| match e {
                ContextEntry::Summary(s) => Some(s.compaction.summary_text()),
                ContextEntry::Event(_) => None,
            })
            .collect()
    }

    #[test]
    fn adk_renders_both_overlapping_summaries_and_hides_their_union() {
        let events = adk_windows(2);
        let adk = adk_prompt_context(&events);
        assert_eq!(summaries(&adk), ["ADK summary 1-4", "ADK summary 3-6"]);
        let verbatim: Vec<String> = adk.events().map(Event::text).collect();
        assert_eq!(verbatim, ["q7", "a7", "q8", "a8"], "turns 1-6 hidden");
        // The single-summary assembly shows turns 1-2 that ADK hides: inspect uses ADK's.
        let core = assemble_context(&events);
        assert!(core.events().any(|e| e.text() == "q1"));
    }

    #[test]
    fn the_rolling_range_starts_at_the_earliest_rendered_start_and_folds_every_summary() {
        let events = adk_windows(3);
        let plan = plan_compaction(&events, 2).expect("turn 7 can be folded");
        let previous = plan.previous.as_ref().expect("rolling");
        assert_eq!(
            previous.start_timestamp, events[0].timestamp,
            "t_1 = turn 1"
        );
        assert_eq!(previous.summary, "ADK summary 1-4\n\nADK summary 3-6");
        assert_eq!(previous.folded_event_ids.len(), 2);
        assert_eq!(plan.start_timestamp, events[0].timestamp);
        let slice: Vec<String> = plan.slice.iter().map(Event::text).collect();
        assert_eq!(slice, ["q7", "a7"]);
        assert!(
            plan.summarizer_prompt().starts_with(
                "Existing Conversation Summary:\nADK summary 1-4\n\nADK summary 3-6\n\n"
            )
        );
        // After the append ADK renders one summary: the new one subsumes both of ADK's.
        let mut after = events.clone();
        let mut f = EventFactory::starting_at(10_000.0);
        after.push(f.compaction("engine", plan.start_timestamp, plan.end_timestamp, "one"));
        let adk = adk_prompt_context(&after);
        assert_eq!(summaries(&adk), ["one"]);
        let verbatim: Vec<String> = adk.events().map(Event::text).collect();
        assert_eq!(verbatim, ["q8", "a8", "q9", "a9"]);
        // And both views agree once one summary is rendered.
        assert_eq!(adk, assemble_context(&after));
        // The rolling tail plans the same as the whole history.
        let tail: Vec<Event> = rolling_tail_positions(&events)
            .into_iter()
            .map(|i| events[i].clone())
            .collect();
        assert_eq!(plan_compaction(&tail, 2), Some(plan));
        assert!(tail.iter().filter(|e| e.compaction().is_some()).count() == 2);
    }

    #[test]
    fn user_messages_filed_inside_a_scope_are_found_and_the_warning_names_finish_task() {
        let mut f = EventFactory::new();
        let mut events = f.research_turn("inv1", "q1", "synthesis");
        assert!(scoped_user_messages(&events).is_empty());
        let mut stray = f.user("inv2", "q2, filed in the open scope");
        stray.isolation_scope = Some("search_pipeline:fc-1".into());
        events.push(stray);
        let found = scoped_user_messages(&events);
        assert_eq!(found.count, 1);
        assert_eq!(found.scopes, ["search_pipeline:fc-1"]);
        let warning = found.to_string();
        assert!(warning.contains("finish_task"), "{warning}");
        assert!(warning.contains("\"search_pipeline:fc-1\""), "{warning}");
        // A compaction authored `user` inside a scope is not a message; a rewound one is gone.
        let mut scoped_compaction =
            f.compaction("inv3", events[0].timestamp, events[1].timestamp, "s");
        scoped_compaction.isolation_scope = Some("search_pipeline:fc-1".into());
        events.push(scoped_compaction);
        assert_eq!(scoped_user_messages(&events).count, 1);
        events.push(f.rewind("inv4", "inv2"));
        assert!(scoped_user_messages(&events).is_empty());
    }
}
