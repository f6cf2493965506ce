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

/// What changes when `new` (appended after every compaction of `live_candidates`, the view's
/// compactions that no other subsumes) joins the view: the positions it subsumes, and whether
/// it is subsumed itself. Subsumption only grows on append, and containment is transitive, so
/// the non-subsumed compactions are the only ones to look at: the incremental form of
/// [`subsumed_compaction_ids`] that a store calls on append.
pub fn subsumption_on_append(
    live_candidates: &[CompactionRange],
    new: CompactionRange,
) -> (Vec<i64>, bool) {
    let newly_subsumed = live_candidates
        .iter()
        .filter(|c| new.subsumes(c))
        .map(|c| c.position)
        .collect();
    let subsumed = live_candidates.iter().any(|c| c.subsumes(&new));
    (newly_subsumed, subsumed)
}

/// The live compaction among non-subsumed ones: the greatest end, ties to the later.
pub fn live_among(non_subsumed: &[CompactionRange]) -> Option<CompactionRange> {
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

/// For each compaction event of `view` (by index into `view`), whether it is subsumed.
fn is_subsumed(view: &[&Event], index: usize) -> bool {
    let Some(me) = view[index].compaction() else {
        return false;
    };
    let me = CompactionRange::of(index, me);
    ranges(view).iter().any(|other| other.subsumes(&me))
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

/// Ids of every compaction event of the coordinator view that is subsumed by another.
pub fn subsumed_compaction_ids(events: &[Event]) -> Vec<String> {
    let view = coordinator_view(events);
    (0..view.len())
        .filter(|&i| view[i].compaction().is_some() && is_subsumed(&view, i))
        .map(|i| view[i].id.clone())
        .collect()
}

/// One compaction of the coordinator view, as a compaction history lists it: its range, the
/// size of its summary and whether another compaction subsumes it — without the summary.
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
        })
    }
}

/// The compactions of the coordinator view (rewinds applied), in append order.
pub fn compaction_history(events: &[Event]) -> Vec<CompactionEntry> {
    let view = coordinator_view(events);
    (0..view.len())
        .filter_map(|i| CompactionEntry::new(view[i], is_subsumed(&view, i)))
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
                        crate::plan::render_event_body(e)
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
