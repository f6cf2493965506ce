//! Invariants over generated sessions and settings.

use std::collections::HashSet;
use std::sync::Arc;

use compaction_core::testing::{
    EventFactory, InMemoryStore, RecordingSummarizer, ScriptedDecisionModel, SequentialIds,
    SteppingClock,
};
use compaction_core::{
    CharsPerToken, ContextEntry, Engine, Event, EventOutline, GateDecision, GateInput, Outcome,
    ProbeRequest, Session, Settings, SummaryRequest, TokenEstimator, assemble_context,
    completed_turns, coordinator_prompt_tokens, coordinator_view, envelope_gate,
    extract_decision_state, live_tail, live_tail_positions, plan_compaction,
};
use proptest::prelude::*;
use serde_json::Map;

use crate::fixtures::key;

/// One step of a generated conversation.
#[derive(Debug, Clone)]
enum Step {
    /// A completed conversational turn reporting `tokens`.
    Conversational { tokens: u64 },
    /// A completed research turn with a scoped search pipeline reporting `scoped_tokens`.
    Research { tokens: u64, scoped_tokens: u64 },
    /// A turn with only tool calls (not completed).
    ToolOnly,
    /// A turn whose model call failed (not completed).
    Errored,
    /// A completed turn followed by a stray partial chunk.
    TrailingPartial { tokens: u64 },
    /// A rewind to the invocation `back` turns ago.
    Rewind { back: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let tokens = 0u64..150_000;
    prop_oneof![
        4 => tokens.clone().prop_map(|tokens| Step::Conversational { tokens }),
        3 => (tokens.clone(), 0u64..400_000).prop_map(|(tokens, scoped_tokens)| Step::Research { tokens, scoped_tokens }),
        1 => Just(Step::ToolOnly),
        1 => Just(Step::Errored),
        1 => tokens.prop_map(|tokens| Step::TrailingPartial { tokens }),
        1 => (1usize..4).prop_map(|back| Step::Rewind { back }),
    ]
}

fn settings() -> impl Strategy<Value = Settings> {
    (0i64..4, 0i64..7, 0i64..40_000, 40_000i64..160_000).prop_map(|(k, min, floor, ceiling)| {
        Settings {
            adaptive_compaction_retention_turns: k,
            adaptive_compaction_min_turns: min,
            adaptive_compaction_token_floor: floor,
            adaptive_compaction_token_ceiling: ceiling,
            ..Settings::default()
        }
    })
}

/// Every scoped event carries this marker; unscoped text never does.
const SCOPED: &str = "SCOPED-PAYLOAD";

fn apply(
    f: &mut EventFactory,
    events: &mut Vec<Event>,
    invocations: &mut Vec<String>,
    i: usize,
    step: &Step,
) {
    let inv = format!("inv{i}");
    let q = format!("question {i}");
    match step {
        Step::Conversational { tokens } => {
            let mut turn = f.conversational_turn(&inv, &q, &format!("answer {i}"));
            turn[1] = turn[1].clone().with_prompt_tokens(*tokens);
            events.extend(turn);
        }
        Step::Research {
            tokens,
            scoped_tokens,
        } => {
            let scope = format!("search_pipeline:fc{i}");
            events.push(f.user(&inv, &q));
            events.push(f.function_call(&inv, "search_library"));
            events.push(
                f.user(&inv, &format!("{SCOPED} sub-query {i}"))
                    .with_scope(scope.clone()),
            );
            events.push(
                f.model(&inv, &format!("{SCOPED} ReAct {i}"))
                    .with_scope(scope.clone())
                    .with_prompt_tokens(*scoped_tokens),
            );
            events.push(
                f.function_response(&inv, "retrieve", &format!("{SCOPED} chunk {i}"))
                    .with_scope(scope),
            );
            events.push(f.function_response(
                &inv,
                "search_library",
                &format!("synthesis {i}\n# Cited Sources\n1. Ref {i}"),
            ));
            events.push(
                f.model(&inv, &format!("findings {i}"))
                    .with_prompt_tokens(*tokens),
            );
        }
        Step::ToolOnly => {
            events.push(f.user(&inv, &q));
            events.push(f.function_call(&inv, "search_online_literature"));
        }
        Step::Errored => {
            events.push(f.user(&inv, &q));
            let mut e = f.model(&inv, "");
            e.content = None;
            e.error_code = Some("INTERNAL".into());
            events.push(e);
        }
        Step::TrailingPartial { tokens } => {
            let mut turn = f.conversational_turn(&inv, &q, &format!("answer {i}"));
            turn[1] = turn[1].clone().with_prompt_tokens(*tokens);
            events.extend(turn);
            let mut chunk = f.model(&inv, "answ");
            chunk.partial = Some(true);
            events.push(chunk);
        }
        Step::Rewind { back } => {
            if let Some(target) = invocations.iter().rev().nth(back - 1).cloned() {
                events.push(f.rewind(&inv, &target));
            }
        }
    }
    invocations.push(inv);
}

/// What one replay produced: the final session, every probe and every summarizer request.
struct Run {
    session: Session,
    probes: Vec<ProbeRequest>,
    summaries: Vec<SummaryRequest>,
    outcomes: Vec<Outcome>,
}

/// Replays `steps`, evaluating after each one, and checks the per-compaction invariants.
/// Returns the final session and every text the models were shown.
fn replay(settings: Settings, steps: &[Step]) -> Result<(Session, Vec<String>), TestCaseError> {
    let run = replay_on(InMemoryStore::new(), settings, steps)?;
    let mut seen: Vec<String> = Vec::new();
    for r in run.probes {
        seen.push(r.state.earlier_discussion);
        seen.push(r.state.latest_turn);
    }
    for r in run.summaries {
        seen.push(r.prompt);
        seen.extend(r.turns.iter().flat_map(|t| t.tool_outputs.clone()));
    }
    Ok((run.session, seen))
}

/// [`replay`] on a given store.
fn replay_on(
    store: InMemoryStore,
    settings: Settings,
    steps: &[Step],
) -> Result<Run, TestCaseError> {
    let effective = settings.effective().expect("generated settings are valid");
    let decision = Arc::new(ScriptedDecisionModel::constant(1.0));
    let summarizer = Arc::new(RecordingSummarizer::new());
    let store = Arc::new(store);
    let engine = Engine::builder(
        decision.clone(),
        summarizer.clone(),
        store.clone(),
        Arc::new(SteppingClock::starting_at(1_900_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .settings(settings)
    .build()
    .expect("valid");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut f = EventFactory::new();
    let mut invocations = Vec::new();
    let mut outcomes = Vec::new();
    store.insert(Session::new(key()));
    for (i, s) in steps.iter().enumerate() {
        let mut session = store.get(&key()).expect("stored");
        apply(&mut f, &mut session.events, &mut invocations, i, s);
        let before = session.events.clone();
        store.insert(session);
        let outcome = runtime.block_on(engine.evaluate_and_compact(&key()));
        outcomes.push(outcome.clone());
        if let Outcome::Compressed(c) | Outcome::Forced(c) = &outcome {
            let range = c.event.compaction().expect("a compaction event").clone();
            let view = coordinator_view(&before);
            let completed = completed_turns(&view);
            let retained = &completed[completed.len().saturating_sub(effective.retention_turns)..];
            let after = store.get(&key()).expect("stored").events;
            let context = assemble_context(&after);
            let verbatim: HashSet<&str> = context.events().map(|e| e.id.as_str()).collect();
            for turn in retained {
                for event in &turn.events {
                    // Never in the slice…
                    prop_assert!(
                        event.timestamp > range.end_timestamp,
                        "retained event {} was sliced",
                        event.id
                    );
                    // …and present verbatim in the next prompt.
                    prop_assert!(
                        verbatim.contains(event.id.as_str()),
                        "retained event {} missing",
                        event.id
                    );
                }
            }
        }
    }
    Ok(Run {
        session: store.get(&key()).expect("stored"),
        probes: decision.requests(),
        summaries: summarizer.requests(),
        outcomes,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The last K completed turns are never sliced and stay verbatim (checked inside `replay`);
    /// the context holds at most one summary and covers every unscoped event exactly once,
    /// either by the summary's range or verbatim.
    #[test]
    fn context_covers_every_unscoped_event_once(settings in settings(), steps in prop::collection::vec(step(), 1..28)) {
        let (session, _) = replay(settings, &steps)?;
        let context = assemble_context(&session.events);
        let summaries: Vec<_> = context.entries.iter().filter(|e| matches!(e, ContextEntry::Summary(_))).collect();
        prop_assert!(summaries.len() <= 1);
        let summary = context.summary().map(|s| s.compaction.clone());
        let verbatim: Vec<&str> = context.events().map(|e| e.id.as_str()).collect();
        let unique: HashSet<&str> = verbatim.iter().copied().collect();
        prop_assert_eq!(unique.len(), verbatim.len(), "an event appears twice");
        for event in coordinator_view(&session.events).into_iter().filter(|e| e.compaction().is_none()) {
            let covered = summary.as_ref().is_some_and(|s| s.covers(event.timestamp));
            prop_assert!(covered != unique.contains(event.id.as_str()), "event {} covered={covered}", event.id);
        }
    }

    /// An evaluation that reads only the live tail ([`live_tail`], what an indexed store
    /// loads) probes, plans, summarizes and appends exactly as one that reads the whole
    /// history; and the tail is never longer than the view.
    #[test]
    fn the_live_tail_evaluates_like_the_whole_history(settings in settings(), steps in prop::collection::vec(step(), 1..28)) {
        let tail = replay_on(InMemoryStore::new(), settings.clone(), &steps)?;
        // Windows of at most 3 events: the probe must grow its window until the decision
        // state is decided, and then send exactly what the whole history gives.
        let windowed = replay_on(InMemoryStore::with_window_cap(3), settings.clone(), &steps)?;
        let whole = replay_on(InMemoryStore::serving_whole_histories(), settings, &steps)?;
        prop_assert_eq!(&windowed.outcomes, &whole.outcomes);
        prop_assert_eq!(&windowed.probes, &whole.probes);
        prop_assert_eq!(&windowed.session.events, &whole.session.events);
        prop_assert_eq!(&tail.outcomes, &whole.outcomes);
        prop_assert_eq!(&tail.probes, &whole.probes);
        prop_assert_eq!(&tail.summaries, &whole.summaries);
        prop_assert_eq!(&tail.session.events, &whole.session.events);
        let events = &tail.session.events;
        let tail_events = live_tail(events);
        prop_assert!(tail_events.len() <= coordinator_view(events).len());
        let plan = |events: &[Event], k| plan_compaction(events, k);
        for k in 0..4 {
            prop_assert_eq!(plan(&tail_events, k), plan(events, k));
        }
    }

    /// Outlines stand in for whole events wherever a store decides which rows to read: each
    /// event written as JSON and read back as an [`EventOutline`] gives the same live-tail
    /// positions and the same coordinator prompt tokens as the whole history.
    #[test]
    fn outlines_find_the_same_live_tail_and_prompt_tokens(settings in settings(), steps in prop::collection::vec(step(), 1..28)) {
        let (session, _) = replay(settings, &steps)?;
        let events = &session.events;
        let outlines: Vec<Event> = events
            .iter()
            .map(|e| {
                let json = serde_json::to_string(e).expect("an event serializes");
                let outline: EventOutline = serde_json::from_str(&json).expect("an outline parses");
                prop_assert_eq!(outline.timestamp, Some(e.timestamp));
                Ok(outline.into_event(e.id.clone(), e.invocation_id.clone(), e.timestamp))
            })
            .collect::<Result<_, TestCaseError>>()?;
        prop_assert_eq!(live_tail_positions(&outlines), live_tail_positions(events));
        prop_assert_eq!(
            coordinator_prompt_tokens(coordinator_view(&outlines).into_iter()),
            coordinator_prompt_tokens(coordinator_view(events).into_iter())
        );
    }

    /// The incremental turn counter (what stores persist and `gate_input` counts with) agrees
    /// with the whole-history definition after every event: the completed [`Turn`]s of the view
    /// after the live compaction.
    #[test]
    fn the_turn_tracker_counts_what_completed_turns_lists(settings in settings(), steps in prop::collection::vec(step(), 1..28)) {
        let (session, _) = replay(settings, &steps)?;
        let events = &session.events;
        for n in 0..=events.len() {
            let view = coordinator_view(&events[..n]);
            let since = match compaction_core::store_support::live_compaction_index(&view) {
                Some(i) => &view[i + 1..],
                None => &view[..],
            };
            let mut tracker = compaction_core::store_support::TurnTracker::default();
            for event in since {
                tracker.observe(event);
            }
            prop_assert_eq!(tracker.completed() as usize, compaction_core::completed_turns(since).len(), "after {} events", n);
        }
    }

    /// No scoped event reaches the decision state, the summarizer prompt or the context.
    #[test]
    fn scoped_events_never_leak(settings in settings(), steps in prop::collection::vec(step(), 1..28)) {
        let (session, seen) = replay(settings, &steps)?;
        for text in seen {
            prop_assert!(!text.contains(SCOPED), "scoped payload leaked: {text}");
        }
        prop_assert!(!assemble_context(&session.events).render().contains(SCOPED));
    }

    /// Spec 3.1: effective_k = max(0, K) and effective_min_turns = max(min_turns, effective_k
    /// + 1), negative values included, with a warning exactly when either clamps.
    #[test]
    fn the_clamp(k in -8i64..64, min in -8i64..64) {
        let e = Settings { adaptive_compaction_retention_turns: k, adaptive_compaction_min_turns: min, ..Settings::default() }
            .effective().expect("valid");
        let effective_k = k.max(0);
        prop_assert_eq!(e.retention_turns as i64, effective_k);
        prop_assert_eq!(e.min_turns as i64, min.max(effective_k + 1));
        prop_assert_eq!(e.clamp_warning.is_some(), min <= effective_k || k < 0);
        prop_assert!(e.min_turns > e.retention_turns);
    }

    /// More turns or more tokens never make the gate less eager.
    #[test]
    fn the_gate_is_monotone(settings in settings(), turns in 0usize..12, more_turns in 0usize..5, tokens in 0u64..200_000, more_tokens in 0u64..100_000) {
        let s = settings.effective().expect("valid");
        let rank = |d: GateDecision| match d { GateDecision::FastExit(_) => 0, GateDecision::Probe => 1, GateDecision::ForceCompress => 2, _ => unreachable!("a gate decision this test does not know: {d:?}") };
        let low = envelope_gate(&s, GateInput { completed_turns_since_compaction: turns, coordinator_prompt_tokens: Some(tokens) });
        let high = envelope_gate(&s, GateInput { completed_turns_since_compaction: turns + more_turns, coordinator_prompt_tokens: Some(tokens + more_tokens) });
        prop_assert!(rank(low) <= rank(high), "{low:?} then {high:?}");
    }

    /// The decision state never exceeds its token budget, and keeps the latest turn.
    #[test]
    fn the_decision_state_fits_its_budget(texts in prop::collection::vec(("[a-z ]{1,80}", "[a-z .]{0,400}"), 1..12), budget in 30usize..600) {
        let mut f = EventFactory::new();
        let mut events = Vec::new();
        for (i, (q, a)) in texts.iter().enumerate() {
            events.extend(f.conversational_turn(&format!("i{i}"), &format!("{q}?"), &format!("{a}.")));
        }
        let view = coordinator_view(&events);
        let turns = completed_turns(&view);
        let state = extract_decision_state(&turns, &Map::new(), &CharsPerToken, budget).expect("a completed turn");
        let cost = CharsPerToken.estimate(&state.earlier_discussion) + CharsPerToken.estimate(&state.latest_turn);
        prop_assert!(cost <= budget, "{cost} > {budget}");
        prop_assert!(state.latest_turn.starts_with("**User**: "));
    }
}

/// A history as ADK's own Runner leaves it: `turns` completed turns, then ADK's sliding-window
/// summaries (appended after the turn they end at), each from the first event of turn `from`
/// to the last event of turn `to` (1-based, turn-aligned, `from <= to`), overlapping or not.
fn adk_windowed_history(turns: usize, windows: &[(usize, usize)]) -> Vec<Event> {
    let mut f = EventFactory::new();
    let mut events = Vec::new();
    let mut bounds = Vec::new();
    for i in 1..=turns {
        let turn = if i % 3 == 0 {
            f.research_turn(&format!("inv{i}"), &format!("q{i}"), &format!("s{i}"))
        } else {
            f.conversational_turn(&format!("inv{i}"), &format!("q{i}"), &format!("a{i}"))
        };
        bounds.push((turn[0].timestamp, turn[turn.len() - 1].timestamp));
        events.extend(turn);
        for (n, &(from, to)) in windows.iter().enumerate() {
            if to == i && from >= 1 {
                events.push(f.compaction(
                    &format!("adk{n}"),
                    bounds[from - 1].0,
                    bounds[to - 1].1,
                    &format!("ADK window {from}-{to}"),
                ));
            }
        }
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Issue 21 item 9, with the core as oracle: whatever sliding-window summaries ADK left
    /// (overlapping, nested or with gaps between them), the rolling tail plans exactly as the
    /// whole history; a plan folds every summary ADK renders and starts at the earliest of
    /// their starts; once its compaction is appended ADK renders one summary, which is the
    /// live one, and no event is lost: each is covered by a folded summary, in the slice, or
    /// shown verbatim after the new range.
    #[test]
    fn adk_own_summaries_are_folded_into_one(
        turns in 1usize..12,
        windows in prop::collection::vec((1usize..12, 0usize..4), 0..4),
        k in 0usize..3,
    ) {
        let windows: Vec<(usize, usize)> = windows
            .into_iter()
            .map(|(to, len)| (to.saturating_sub(len).max(1), to))
            .collect();
        let events = adk_windowed_history(turns, &windows);
        let tail: Vec<Event> = compaction_core::rolling_tail_positions(&events)
            .into_iter()
            .map(|i| events[i].clone())
            .collect();
        let plan = plan_compaction(&events, k);
        prop_assert_eq!(&plan_compaction(&tail, k), &plan);
        let Some(plan) = plan else { return Ok(()) };
        let view = coordinator_view(&events);
        let rendered: Vec<_> = compaction_core::rendered_compaction_indexes(&view)
            .into_iter()
            .filter_map(|i| view[i].compaction().cloned())
            .collect();
        if let Some(previous) = &plan.previous {
            prop_assert_eq!(previous.folded_event_ids.len(), rendered.len());
            let earliest = rendered.iter().map(|c| c.start_timestamp).min();
            prop_assert_eq!(Some(previous.start_timestamp), earliest);
        }
        let mut after = events.clone();
        let mut f = EventFactory::starting_at(1.0e9);
        after.push(f.compaction("engine", plan.start_timestamp, plan.end_timestamp, "one"));
        let adk = compaction_core::adk_prompt_context(&after);
        let summaries = adk.entries.iter().filter(|e| matches!(e, ContextEntry::Summary(_))).count();
        prop_assert_eq!(summaries, 1, "ADK renders one summary");
        prop_assert_eq!(&adk, &assemble_context(&after), "inspect and the engine agree");
        for event in coordinator_view(&events).into_iter().filter(|e| e.compaction().is_none()) {
            let folded = rendered.iter().any(|c| c.covers(event.timestamp));
            let sliced = plan.slice.iter().any(|s| s.id == event.id);
            let verbatim = adk.events().any(|e| e.id == event.id);
            let before = event.timestamp < plan.start_timestamp;
            prop_assert!(folded || sliced || verbatim || before, "event {} lost", event.id);
        }
    }
}
