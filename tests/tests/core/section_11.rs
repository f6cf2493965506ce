//! The spec's section 11, one test per invariant, under the spec's names.

use compaction_core::testing::{RecordingSummarizer, ScriptedDecisionModel};
use compaction_core::{
    ContinueReason, FastExitReason, Outcome, Settings, assemble_context, completed_turns,
    coordinator_view, subsumed_compaction_ids,
};

use crate::fixtures::{Harness, add_turns, session_with_turns};

/// Asserts that no remote model was called and no span was opened.
fn assert_no_calls(h: &Harness) {
    assert_eq!(
        h.decision.calls(),
        0,
        "decision model called on a fast exit"
    );
    assert_eq!(h.summarizer.calls(), 0, "summarizer called on a fast exit");
    assert!(
        h.telemetry.probes().is_empty() && h.telemetry.summaries().is_empty(),
        "span on a fast exit"
    );
}

#[tokio::test]
async fn test_envelope_gate_skips_when_few_turns() {
    let h = Harness::answering(1.0);
    let (_, session) = session_with_turns(3, 60_000);
    let outcome = h.evaluate(session).await;
    assert_eq!(
        outcome,
        Outcome::FastExit(FastExitReason::TooFewTurns {
            completed: 3,
            required: 4
        })
    );
    assert_no_calls(&h);
    // The fast exit needs only the gate snapshot, never the whole history.
    assert_eq!((h.store.snapshots(), h.store.loads()), (1, 0));
}

#[tokio::test]
async fn test_envelope_gate_disambiguation_clamping() {
    let settings = Settings {
        adaptive_compaction_min_turns: 1,
        adaptive_compaction_retention_turns: 2,
        ..Settings::default()
    };
    let effective = settings.effective().expect("valid");
    assert_eq!(effective.min_turns, 3, "min_turns <= K clamps to K + 1");
    let warning = effective.clamp_warning.expect("the clamp warns");
    assert_eq!(
        warning.to_string(),
        "adaptive_compaction_min_turns (1) must be strictly greater than retention_turns (2). \
         Disambiguating by clamping effective_min_turns to 3."
    );

    // Two completed turns: below the clamped minimum, so no call at all.
    let h = Harness::new(
        settings.clone(),
        ScriptedDecisionModel::constant(1.0),
        RecordingSummarizer::new(),
    );
    let (_, session) = session_with_turns(2, 60_000);
    assert_eq!(
        h.evaluate(session).await,
        Outcome::FastExit(FastExitReason::TooFewTurns {
            completed: 2,
            required: 3
        })
    );
    assert_no_calls(&h);

    // Three: the envelope opens and the slice holds exactly one turn (N - K = 1).
    let h = Harness::new(
        settings,
        ScriptedDecisionModel::constant(1.0),
        RecordingSummarizer::new(),
    );
    let (_, session) = session_with_turns(3, 60_000);
    let outcome = h.evaluate(session).await;
    let compaction = outcome.compaction().expect("compressed");
    assert_eq!(compaction.slice_turns, 1);
}

#[tokio::test]
async fn test_envelope_gate_skips_when_tokens_below_floor() {
    let h = Harness::answering(1.0);
    let (_, session) = session_with_turns(6, 29_999);
    assert_eq!(
        h.evaluate(session).await,
        Outcome::FastExit(FastExitReason::BelowFloor {
            tokens: 29_999,
            floor: 30_000
        })
    );
    assert_no_calls(&h);
    // At the floor exactly, the probe runs.
    let h = Harness::answering(0.0);
    let (_, session) = session_with_turns(6, 30_000);
    assert!(matches!(h.evaluate(session).await, Outcome::Continue(_)));
    assert_eq!(h.decision.calls(), 1);
}

#[tokio::test]
async fn test_hard_backstop_forces_compress() {
    // A decision model that would say CONTINUE: the backstop must not ask it.
    let h = Harness::answering(0.0);
    let (_, session) = session_with_turns(4, 100_000);
    let outcome = h.evaluate(session).await;
    assert!(matches!(outcome, Outcome::Forced(_)), "{outcome:?}");
    assert_eq!(
        h.decision.calls(),
        0,
        "the decision model is bypassed at the ceiling"
    );
    assert_eq!(h.summarizer.calls(), 1);
    let spans = h.telemetry.summaries();
    assert_eq!(spans.len(), 1);
    assert!(spans[0].forced);
    assert!(h.telemetry.probes().is_empty());
    let stored = h.stored();
    assert!(stored.events.last().and_then(|e| e.compaction()).is_some());
    // Just below the ceiling, the probe is asked.
    let h = Harness::answering(0.0);
    let (_, session) = session_with_turns(4, 99_999);
    assert!(matches!(h.evaluate(session).await, Outcome::Continue(_)));
    assert_eq!(h.decision.calls(), 1);
}

#[tokio::test]
async fn test_decision_model_compress_verdict() {
    let h = Harness::answering(0.75);
    let (_, session) = session_with_turns(4, 40_000);
    let outcome = h.evaluate(session).await;
    let Outcome::Compressed(c) = &outcome else {
        panic!("p = τ must compress, got {outcome:?}");
    };
    assert_eq!(c.probability.map(|p| p.value()), Some(0.75));
    assert_eq!(h.store.appends(), 1);
    let probe = &h.telemetry.probes()[0];
    assert_eq!(
        (
            probe.verdict.as_str(),
            probe.completed_turns,
            probe.prompt_tokens
        ),
        ("COMPRESS", 4, 40_000)
    );

    let h = Harness::answering(0.7499);
    let (_, session) = session_with_turns(4, 40_000);
    let outcome = h.evaluate(session).await;
    assert!(
        matches!(
            outcome,
            Outcome::Continue(ContinueReason::BelowThreshold { .. })
        ),
        "{outcome:?}"
    );
    assert_eq!((h.summarizer.calls(), h.store.appends()), (0, 0));

    // A failing or nonsensical model fails open: CONTINUE, nothing written.
    for model in [
        ScriptedDecisionModel::failing("timeout after 10s"),
        ScriptedDecisionModel::constant(1.5),
    ] {
        let h = Harness::new(Settings::default(), model, RecordingSummarizer::new());
        let (_, session) = session_with_turns(4, 40_000);
        let outcome = h.evaluate(session).await;
        assert!(
            matches!(
                outcome,
                Outcome::Continue(ContinueReason::ProbeFailed { .. })
            ),
            "{outcome:?}"
        );
        assert_eq!(h.store.appends(), 0);
        assert_eq!(h.telemetry.probes()[0].verdict, "CONTINUE");
    }
}

#[tokio::test]
async fn test_retention_turns_preserves_latest_k_turns_verbatim() {
    let h = Harness::answering(0.9);
    let (_, session) = session_with_turns(4, 40_000);
    let original = session.events.clone();
    let outcome = h.evaluate(session).await;
    let compaction = outcome
        .compaction()
        .expect("compressed")
        .event
        .compaction()
        .cloned()
        .expect("a compaction");
    // Anchoring: [first event of turn 1, last event of turn N-K = 2].
    assert_eq!(compaction.start_timestamp, original[0].timestamp);
    assert_eq!(compaction.end_timestamp, original[3].timestamp);

    let context = assemble_context(&h.stored().events);
    let verbatim: Vec<_> = context.events().cloned().collect();
    assert_eq!(
        verbatim,
        original[4..].to_vec(),
        "turns N-1 and N stay verbatim"
    );
    assert_eq!(
        context.summary().map(|s| s.compaction.summary_text()),
        Some("- q1\n- q2".to_owned())
    );
    // Turns 1 and 2 are no longer in the prompt.
    assert!(!context.render().contains("a1") && !context.render().contains("a2"));
}

#[tokio::test]
async fn test_rolling_consolidation_subsumes_earlier_compaction() {
    let h = Harness::answering(0.9);
    let (mut f, session) = session_with_turns(4, 40_000);
    let first = h
        .evaluate(session)
        .await
        .compaction()
        .expect("first compaction")
        .event
        .clone();
    let c1 = first.compaction().cloned().expect("compaction");

    // Four more turns: the envelope reopens at turn 8 (turns counted since the compaction).
    let mut session = h.stored();
    add_turns(&mut f, &mut session.events, 5, 3, 40_000);
    assert!(matches!(
        h.evaluate(session).await,
        Outcome::FastExit(FastExitReason::TooFewTurns { .. })
    ));
    let mut session = h.stored();
    add_turns(&mut f, &mut session.events, 8, 1, 40_000);
    let turn_6_end = {
        let view = coordinator_view(&session.events);
        completed_turns(&view)[5].last_timestamp()
    };
    let second = h
        .evaluate(session)
        .await
        .compaction()
        .expect("second compaction")
        .event
        .clone();
    let c2 = second.compaction().cloned().expect("compaction");

    assert_eq!(
        c2.start_timestamp, c1.start_timestamp,
        "start anchored at t_1"
    );
    assert_eq!(
        c2.end_timestamp, turn_6_end,
        "end anchored at the last event of turn N-K"
    );
    let request = &h.summarizer.requests()[1];
    assert_eq!(request.previous_summary.as_deref(), Some("- q1\n- q2"));
    assert!(request.prompt.starts_with(
        "Existing Conversation Summary:\n- q1\n- q2\n\nNew Completed Turns to Integrate:\n"
    ));
    let integrated: Vec<&str> = request.turns.iter().map(|t| t.user.as_str()).collect();
    assert_eq!(
        integrated,
        ["q3", "q4", "q5", "q6"],
        "only the new turns are sliced"
    );

    let stored = h.stored();
    assert_eq!(
        subsumed_compaction_ids(&stored.events),
        vec![first.id.clone()]
    );
    let context = assemble_context(&stored.events);
    assert_eq!(
        context.summary().map(|s| s.event_id.as_str()),
        Some(second.id.as_str())
    );
    let summaries = context
        .entries
        .iter()
        .filter(|e| matches!(e, compaction_core::ContextEntry::Summary(_)))
        .count();
    assert_eq!(summaries, 1, "one consolidated summary, no fragmentation");
    let users: Vec<String> = context
        .events()
        .filter(|e| e.is_user())
        .map(|e| e.text())
        .collect();
    assert_eq!(users, ["q7", "q8"]);
}

#[tokio::test]
async fn test_coordinator_prompt_tokens_ignores_subagent_events() {
    let h = Harness::answering(1.0);
    let (mut f, mut session) = session_with_turns(5, 12_000);
    // A sub-agent inside a search pipeline reports a huge prompt after the coordinator.
    let spike = f
        .model("inv5", "ReAct step")
        .with_scope("search_pipeline:fc-9")
        .with_prompt_tokens(250_000);
    session.events.push(spike);
    assert_eq!(
        h.evaluate(session).await,
        Outcome::FastExit(FastExitReason::BelowFloor {
            tokens: 12_000,
            floor: 30_000
        })
    );
    assert_no_calls(&h);
}

#[tokio::test]
async fn test_stale_session_concurrency_fail_open() {
    let h = Harness::answering(0.9);
    let (mut f, session) = session_with_turns(4, 40_000);
    h.store.insert(session);
    // Another writer appends turn 5's query between our load and our append.
    let concurrent = f.user("inv5", "q5 typed quickly");
    h.store.race_next_append(concurrent.clone());
    let outcome = h.engine.evaluate_and_compact(&crate::fixtures::key()).await;
    assert!(
        matches!(outcome, Outcome::StaleDropped { .. }),
        "{outcome:?}"
    );
    let stored = h.stored();
    assert_eq!(stored.revision.0, 1, "exactly the concurrent append landed");
    assert_eq!(stored.events.last(), Some(&concurrent));
    assert!(
        stored.events.iter().all(|e| e.compaction().is_none()),
        "no compaction written"
    );
    // The session is intact and the next evaluation proceeds normally.
    let outcome = h.engine.evaluate_and_compact(&crate::fixtures::key()).await;
    assert!(matches!(outcome, Outcome::Compressed(_)), "{outcome:?}");
}
