//! The benchmark history both store benches fill: research turns with a rolling compaction
//! every eight turns, ending in the same live context at every size.

use compaction_core::Event;
use compaction_core::testing::EventFactory;

const COMPACT_EVERY: usize = 8;
const RETAINED: usize = 2;

/// Appends research turns (six events each, two of them scoped) from `f` with a rolling
/// compaction every eight turns covering everything up to turn N-K, until about `events`
/// events are stored; then one last compaction and a tail of four turns, so that every size
/// ends with the same context (K + 4 turns after the live summary) and only the history before
/// it grows. Returns the number of events appended.
pub(crate) fn fill(mut f: EventFactory, events: usize, mut append: impl FnMut(&Event)) -> usize {
    const TAIL_TURNS: usize = 4;
    let mut first_ts = None;
    let mut turn_ends = Vec::new();
    let mut turn = 0usize;
    let mut stored = 0;
    let mut push = |e: &Event| {
        append(e);
        stored += 1;
        stored
    };
    let mut tail = None;
    while tail.is_none_or(|t| turn < t + TAIL_TURNS) {
        let inv = format!("inv{turn}");
        let mut t = f.research_turn(&inv, &format!("question {turn} about anodes"), "findings");
        t[5] = t[5].clone().with_prompt_tokens(30_000 + turn as u64);
        first_ts.get_or_insert(t[0].timestamp);
        turn_ends.push(t[5].timestamp);
        let mut count = 0;
        for e in &t {
            count = push(e);
        }
        turn += 1;
        let last_cycle = tail.is_none() && count + 6 * TAIL_TURNS + 1 >= events;
        if tail.is_none() && (turn.is_multiple_of(COMPACT_EVERY) || last_cycle) {
            let end = turn_ends[turn - 1 - RETAINED];
            let start = first_ts.expect("a turn was appended");
            let c = f.compaction(
                &format!("compact{turn}"),
                start,
                end,
                &"Summary. ".repeat(200),
            );
            push(&c);
            if last_cycle {
                tail = Some(turn);
            }
        }
    }
    stored
}
