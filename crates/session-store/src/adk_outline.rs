//! The incremental outline of an ADK session (issue 29 item 2), shared by the ADK stores on
//! SQLite and on PostgreSQL.
//!
//! ADK's layouts have no gate header: the gate's figures, the rolling tail and the scope warning
//! are functions of the whole history's outlines. A [`Checkpoint`] keeps, for the rows a store
//! has already outlined (the *known* rows), only what a later history can still use:
//! - the outlines of every compaction ADK still renders and of every coordinator event no
//!   rendered compaction covers ([`carried_positions`]);
//! - the coordinator prompt tokens of the known rows (the latest unscoped report);
//! - their scoped user messages.
//!
//! When the rows appended since hold no rewind, the answer for the whole history is the core's
//! functions over the carried outlines followed by the new ones: a covered event stays covered
//! and a subsumed compaction stays subsumed whatever is appended (containment is transitive),
//! the latest prompt-token report is the newest one, and scoped messages only add up. A rewind
//! among the new rows may reach back into the known rows, so it is answered by a whole read
//! (rare: ADK writes one only when a user rewinds). The store decides which rows are new
//! (SQLite's rowid; PostgreSQL's ADK order with a row count), and does a whole read when the
//! checkpoint no longer fits the database or is older than [`WHOLE_READ_INTERVAL`].

use compaction_core::{
    Event, ScopedUserMessages, coordinator_positions, coordinator_prompt_tokens, coordinator_view,
    rendered_compaction_indexes, rolling_tail_positions, scoped_user_candidate_positions,
    uncovered_events,
};
use serde::{Deserialize, Serialize};

/// How long a checkpoint is trusted before the next read outlines the whole session again:
/// what the incremental read cannot see (a known row rewritten in place by another program;
/// ADK itself never does that) is seen by then.
pub(crate) const WHOLE_READ_INTERVAL: f64 = 24.0 * 3600.0;

/// A checkpoint carrying more outlines than this is not kept (a long session that was never
/// compacted): its next read is a whole read, as before.
pub(crate) const MAX_CARRIED: usize = 4_096;

/// How many sessions' checkpoints a store keeps in memory (`compaction serve`).
pub(crate) const KEPT_IN_MEMORY: usize = 256;

/// What a store keeps of the rows it has outlined. `R` says where the next read starts (the
/// backend's own row order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Checkpoint<R> {
    /// How many rows are known (the next row's position in ADK's order).
    pub(crate) rows: usize,
    /// The outlines worth carrying, with their positions.
    pub(crate) carried: Vec<(usize, Event)>,
    /// The coordinator prompt tokens of the known rows.
    pub(crate) prompt_tokens: Option<u64>,
    /// The known rows' scoped user messages: how many.
    pub(crate) scoped_count: usize,
    /// ... and in which scopes, in order of first appearance.
    pub(crate) scoped_scopes: Vec<String>,
    /// When the whole session was last outlined (epoch seconds).
    pub(crate) whole_read_at: f64,
    /// Where the next read starts.
    pub(crate) resume: R,
}

/// Positions in `events` of what a later history can still render or fold: every compaction ADK
/// renders and every coordinator event no rendered compaction covers, in order.
pub(crate) fn carried_positions(events: &[Event]) -> Vec<usize> {
    let positions = coordinator_positions(events);
    let view: Vec<&Event> = positions.iter().map(|&i| &events[i]).collect();
    let mut keep = vec![false; view.len()];
    for i in rendered_compaction_indexes(&view) {
        keep[i] = true;
    }
    // `uncovered_events` keeps view order: walk both.
    let mut at = 0;
    for event in uncovered_events(&view) {
        while !std::ptr::eq(view[at], event) {
            at += 1;
        }
        keep[at] = true;
    }
    positions
        .into_iter()
        .zip(keep)
        .filter_map(|(position, keep)| keep.then_some(position))
        .collect()
}

/// One read's outlines: the carried ones of the checkpoint it started from, then the new rows'.
pub(crate) struct Outlines {
    /// Position (in ADK's order, whole session) of each outline.
    pub(crate) positions: Vec<usize>,
    /// The outlines.
    pub(crate) events: Vec<Event>,
    /// Where the new rows start in `events`.
    new_from: usize,
    /// The known rows' figures (empty for a whole read).
    prompt_tokens: Option<u64>,
    scoped: ScopedUserMessages,
    whole_read_at: f64,
}

impl Outlines {
    /// A whole read: no known rows.
    pub(crate) fn whole(now: f64) -> Self {
        Outlines {
            positions: Vec::new(),
            events: Vec::new(),
            new_from: 0,
            prompt_tokens: None,
            scoped: ScopedUserMessages::default(),
            whole_read_at: now,
        }
    }

    /// A read that continues `from`.
    pub(crate) fn continuing<R>(from: &Checkpoint<R>) -> Self {
        let (positions, events) = from.carried.iter().cloned().unzip();
        Outlines {
            new_from: from.carried.len(),
            positions,
            events,
            prompt_tokens: from.prompt_tokens,
            scoped: ScopedUserMessages {
                count: from.scoped_count,
                scopes: from.scoped_scopes.clone(),
            },
            whole_read_at: from.whole_read_at,
        }
    }

    /// Adds the outline of the row at `position`.
    pub(crate) fn push(&mut self, position: usize, outline: Event) {
        self.positions.push(position);
        self.events.push(outline);
    }

    /// True when a new row rewinds: the known rows' figures no longer hold, read it whole.
    pub(crate) fn new_rows_rewind(&self) -> bool {
        self.events[self.new_from..]
            .iter()
            .any(|e| e.actions.rewind_before_invocation_id.is_some())
    }

    /// The coordinator prompt tokens of the whole history.
    pub(crate) fn prompt_tokens(&self) -> Option<u64> {
        let new = &self.events[self.new_from..];
        coordinator_prompt_tokens(coordinator_view(new).into_iter()).or(self.prompt_tokens)
    }

    /// Indexes into [`Outlines::events`] of the rolling tail
    /// ([`compaction_core::rolling_tail_positions`] of the whole history).
    pub(crate) fn rolling_tail(&self) -> Vec<usize> {
        rolling_tail_positions(&self.events)
    }

    /// Indexes into [`Outlines::events`] of the new rows that may be scoped user messages (the
    /// known rows' are counted already).
    pub(crate) fn scoped_candidates(&self) -> Vec<usize> {
        scoped_user_candidate_positions(&self.events[self.new_from..])
            .into_iter()
            .map(|i| i + self.new_from)
            .collect()
    }

    /// The scope warning of the whole history, given the new rows' own.
    pub(crate) fn scoped(&self, new: ScopedUserMessages) -> ScopedUserMessages {
        let mut all = self.scoped.clone();
        all.count += new.count;
        for scope in new.scopes {
            if !all.scopes.contains(&scope) {
                all.scopes.push(scope);
            }
        }
        all
    }

    /// The checkpoint after this read (`rows` known in all, the next read resuming at
    /// `resume`), or `None` when it would carry too much.
    pub(crate) fn checkpoint<R>(
        &self,
        rows: usize,
        scoped: &ScopedUserMessages,
        resume: R,
    ) -> Option<Checkpoint<R>> {
        let carried = carried_positions(&self.events);
        (carried.len() <= MAX_CARRIED).then(|| Checkpoint {
            rows,
            carried: carried
                .into_iter()
                .map(|i| (self.positions[i], self.events[i].clone()))
                .collect(),
            prompt_tokens: self.prompt_tokens(),
            scoped_count: scoped.count,
            scoped_scopes: scoped.scopes.clone(),
            whole_read_at: self.whole_read_at,
            resume,
        })
    }
}

/// True when a checkpoint made by a whole read at `whole_read_at` may still be continued.
pub(crate) fn fresh(whole_read_at: f64, now: f64) -> bool {
    now - whole_read_at < WHOLE_READ_INTERVAL && whole_read_at <= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction_core::testing::EventFactory;
    use compaction_core::{Timestamp, scoped_user_messages};
    use proptest::prelude::*;

    /// A history step: a conversational turn, ADK's compaction of a range of turns (`from`, `to`
    /// turns back), an engine-style rolling compaction keeping `n` events, a rewind, a scoped
    /// user message.
    #[derive(Debug, Clone)]
    enum Step {
        Turn,
        Window(usize, usize),
        Rolling(usize),
        Rewind(usize),
        Scoped,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => Just(Step::Turn),
            1 => (0_usize..4, 0_usize..4).prop_map(|(a, b)| Step::Window(a.max(b), a.min(b))),
            2 => (0_usize..6).prop_map(Step::Rolling),
            1 => (0_usize..4).prop_map(Step::Rewind),
            1 => Just(Step::Scoped),
        ]
    }

    fn history(steps: &[Step]) -> Vec<Event> {
        let mut f = EventFactory::new();
        let mut events: Vec<Event> = Vec::new();
        let mut turns: Vec<(Timestamp, Timestamp)> = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let inv = format!("inv{i}");
            match s {
                Step::Turn => {
                    let mut turn = f.conversational_turn(&inv, &format!("q{i}"), "a");
                    if i % 3 != 0 {
                        turn[1] = turn[1].clone().with_prompt_tokens(100 * i as u64);
                    }
                    turns.push((turn[0].timestamp, turn[1].timestamp));
                    events.extend(turn);
                }
                Step::Window(from, to) => {
                    let n = turns.len();
                    if let (Some(a), Some(b)) = (n.checked_sub(1 + from), n.checked_sub(1 + to)) {
                        events.push(f.compaction(&inv, turns[a].0, turns[b].1, "adk"));
                    }
                }
                Step::Rolling(kept) => {
                    if let (Some(first), Some(last)) =
                        (events.first(), events.len().checked_sub(1 + kept))
                    {
                        let (start, end) = (first.timestamp, events[last].timestamp);
                        events.push(f.compaction(&inv, start, end, "rolling"));
                    }
                }
                Step::Rewind(back) => {
                    let target = format!("inv{}", i.saturating_sub(back + 1));
                    events.push(f.rewind(&inv, &target));
                }
                Step::Scoped => {
                    let scope = format!("pipeline-{}", i % 2);
                    events.push(f.user(&inv, &format!("q{i}")).with_scope(scope));
                }
            }
        }
        events
    }

    /// Reads `events` as a store does: a whole read of the first `cut`, then (when the rest
    /// holds no rewind) a continuation over the rest.
    fn read(events: &[Event], cut: usize) -> Outlines {
        let mut first = Outlines::whole(0.0);
        for (i, e) in events[..cut].iter().enumerate() {
            first.push(i, e.clone());
        }
        let candidates: Vec<Event> = first
            .scoped_candidates()
            .into_iter()
            .map(|i| first.events[i].clone())
            .collect();
        let scoped = first.scoped(scoped_user_messages(&candidates));
        let checkpoint = first.checkpoint(cut, &scoped, ()).expect("small");
        let mut next = Outlines::continuing(&checkpoint);
        for (i, e) in events.iter().enumerate().skip(cut) {
            next.push(i, e.clone());
        }
        next
    }

    proptest! {
        /// The store invariant for the incremental path: continuing a checkpoint over rows
        /// with no rewind answers what the core answers on the whole history (rolling tail,
        /// prompt tokens, scope warning, and the next checkpoint's carried outlines).
        #[test]
        fn a_continued_read_answers_as_the_whole_history(
            steps in proptest::collection::vec(step(), 0..30),
            cut_at in 0.0_f64..=1.0,
        ) {
            let events = history(&steps);
            let cut = (events.len() as f64 * cut_at) as usize;
            let next = read(&events, cut);
            prop_assume!(!next.new_rows_rewind());
            let tail: Vec<usize> = next.rolling_tail().into_iter().map(|i| next.positions[i]).collect();
            prop_assert_eq!(tail, rolling_tail_positions(&events));
            prop_assert_eq!(
                next.prompt_tokens(),
                coordinator_prompt_tokens(coordinator_view(&events).into_iter())
            );
            let candidates: Vec<Event> = next
                .scoped_candidates()
                .into_iter()
                .map(|i| next.events[i].clone())
                .collect();
            let scoped = next.scoped(scoped_user_messages(&candidates));
            prop_assert_eq!(&scoped, &scoped_user_messages(&events));
            let carried: Vec<usize> = next
                .checkpoint(events.len(), &scoped, ())
                .expect("small")
                .carried
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            prop_assert_eq!(carried, carried_positions(&events));
        }
    }
}
