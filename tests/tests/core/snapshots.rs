//! What models and people see, pinned by insta snapshots.

use compaction_core::testing::EventFactory;
use compaction_core::{
    CharsPerToken, ProbeRequest, Session, assemble_context, completed_turns, coordinator_view,
    extract_decision_state, plan_compaction,
};
use serde_json::Map;

use crate::fixtures::{Harness, add_turns, key};

/// The spec's section 5 example, rebuilt from events: the request body must match it.
#[test]
fn probe_request_for_the_battery_example() {
    let mut f = EventFactory::new();
    let mut events = f.conversational_turn(
        "t1",
        "What causes capacity fade in lithium-ion battery anodes during fast charging?",
        "Fast charging accelerates lithium plating on graphite anodes, thickening the solid electrolyte interphase (SEI) layer and consuming active lithium.",
    );
    events.extend(f.conversational_turn(
        "t2",
        "Do silicon-graphite composite anodes suffer from the same plating issues?",
        "Silicon composites suffer less from plating due to slightly higher working potentials, but face massive particle pulverization from 300% volume expansion.",
    ));
    events.extend(f.conversational_turn(
        "t3",
        "What are the current levelized cost of storage (LCOS) estimates for vanadium redox flow batteries in grid peaking applications?",
        "Stack materials and vanadium electrolyte prices dominate capex, resulting in an estimated LCOS between $0.20 and $0.35/kWh.",
    ));
    let view = coordinator_view(&events);
    let turns = completed_turns(&view);
    let state = extract_decision_state(&turns, &Map::new(), &CharsPerToken, 500).expect("state");
    let request = ProbeRequest::new("inception/mercury-decide", state);
    insta::assert_json_snapshot!(request);
}

fn research_session() -> (EventFactory, Session) {
    let mut f = EventFactory::new();
    let mut session = Session::new(key());
    session.events.extend(f.research_turn(
        "r1",
        "Summarize the evidence on SEI growth under fast charging.",
        "SEI thickens by 12 nm per 100 cycles at 4C (Smith et al., 2021).\n# Cited Sources\n1. Smith, J. et al. (2021). doi:10.1000/sei.2021",
    ));
    session.events[5] = session.events[5].clone().with_prompt_tokens(45_000);
    add_turns(&mut f, &mut session.events, 2, 3, 45_000);
    (f, session)
}

/// A rolling-consolidation prompt: a previous summary and new turns, scoped events absent.
#[tokio::test]
async fn rolling_consolidation_summarizer_prompt() {
    let h = Harness::answering(0.9);
    let (mut f, session) = research_session();
    assert!(h.evaluate(session).await.compaction().is_some());
    let mut session = h.stored();
    session.events.extend(f.research_turn(
        "r5",
        "Which electrolyte additives suppress lithium plating?",
        "Fluoroethylene carbonate at 2 wt% cut plating onset by 35% (Lee and Park, 2022; arXiv:2203.01234).\n# Cited Sources\n1. Lee, K. and Park, S. (2022). arXiv:2203.01234",
    ));
    add_turns(&mut f, &mut session.events, 6, 3, 45_000);
    let plan = plan_compaction(&session.events, 2).expect("a plan");
    insta::assert_snapshot!(plan.summarizer_prompt());
}

/// The context after two rolling compactions: one summary, then turns N-1 and N verbatim.
#[tokio::test]
async fn assembled_context_after_two_compactions() {
    let h = Harness::answering(0.9);
    let (mut f, session) = research_session();
    assert!(h.evaluate(session).await.compaction().is_some());
    let mut session = h.stored();
    add_turns(&mut f, &mut session.events, 5, 4, 45_000);
    assert!(h.evaluate(session).await.compaction().is_some());
    insta::assert_snapshot!(assemble_context(&h.stored().events).render());
}
