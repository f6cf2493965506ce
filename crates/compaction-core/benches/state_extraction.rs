//! State extraction (spec section 4) on an uncompacted tail of 100 and 10,000 completed turns:
//! the bounded walk ([`extract_decision_state_from_view`], what a probe needs) against
//! splitting the whole tail into turns first ([`completed_turns`] then
//! [`extract_decision_state`]). Both produce the same state (a proptest in `state.rs` checks
//! it); only the first should cost the same at both lengths.
//!
//! `cargo bench -p adaptive-compaction-core --bench state_extraction -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use compaction_core::{
    CharsPerToken, Content, Event, Timestamp, completed_turns, coordinator_view,
    extract_decision_state,
};
use compaction_core::{DEFAULT_STATE_BUDGET_TOKENS, extract_decision_state_from_view};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::Map;

/// `turns` conversational turns of a research-sized query and answer, one second apart.
fn tail(turns: usize) -> Vec<Event> {
    let mut events = Vec::with_capacity(turns * 2);
    for i in 0..turns {
        let inv = format!("inv-{i}");
        let ts = |k: usize| Timestamp::new(1_700_000_000.0 + (2 * i + k) as f64).unwrap();
        events.push(
            Event::new(format!("u{i}"), &inv, "user", ts(0)).with_content(Content::user_text(
                format!("Turn {i}: how does the multi-echo sequence change the ICC estimates?"),
            )),
        );
        events.push(
            Event::new(format!("a{i}"), &inv, "coordinator", ts(1)).with_content(
                Content::model_text(format!(
                    "Turn {i}: multi-echo with ME-ICA denoising raised median ICC from 0.41 to 0.60 in the same participants."
                )),
            ),
        );
    }
    events
}

fn benches(c: &mut Criterion) {
    let state = Map::new();
    let mut group = c.benchmark_group("state_extraction");
    for n in [100usize, 10_000] {
        let events = tail(n);
        let view = coordinator_view(&events);
        group.bench_with_input(BenchmarkId::new("bounded_walk", n), &view, |b, view| {
            b.iter(|| {
                extract_decision_state_from_view(
                    std::hint::black_box(view),
                    None,
                    &state,
                    &CharsPerToken,
                    DEFAULT_STATE_BUDGET_TOKENS,
                )
            })
        });
        group.bench_with_input(BenchmarkId::new("split_whole_tail", n), &view, |b, view| {
            b.iter(|| {
                let turns = completed_turns(std::hint::black_box(view));
                extract_decision_state(&turns, &state, &CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS)
            })
        });
    }
    group.finish();
}

criterion_group!(state_benches, benches);
criterion_main!(state_benches);
