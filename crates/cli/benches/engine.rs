//! End-to-end engine costs: the pure gate, a fast exit through the SQLite store, the whole
//! compress path with instant in-process models at 1,000 and 10,000 events, and a probe that
//! answers CONTINUE on an uncompacted session of 100 and 10,000 turns (issue 20 item 2).
//!
//! `cargo bench -p adaptive-compaction-cli --bench engine`

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use compaction_core::testing::{
    EventFactory, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    Engine, Event, GateInput, Revision, SessionKey, Settings, Timestamp, envelope_gate,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use session_store::SqliteStore;

fn key() -> SessionKey {
    SessionKey::new("bench", "u", "s")
}

/// Writes a session of about `target_events` events (research and conversational turns in
/// turn, a rolling compaction every 8 turns) whose last turns open the envelope.
fn build_db(path: &Path, target_events: usize, last_tokens: u64) {
    build_session(path, target_events, last_tokens, true);
}

/// [`build_db`], with or without the rolling compactions.
fn build_session(path: &Path, target_events: usize, last_tokens: u64, compacted: bool) {
    let store = session_store::blocking::SqliteStore::open(path).expect("open");
    store
        .create_session(&key(), Default::default())
        .expect("create");
    let mut f = EventFactory::new();
    let mut revision = Revision(0);
    let mut appended = 0usize;
    let mut turn_ends: Vec<Timestamp> = Vec::new();
    let mut first: Option<Timestamp> = None;
    let mut n = 0usize;
    while appended < target_events {
        n += 1;
        let inv = format!("inv{n}");
        let mut events: Vec<Event> = if n.is_multiple_of(2) {
            f.research_turn(
                &inv,
                &format!("research question {n}"),
                &format!("synthesis {n}\n# Cited Sources\n1. Ref {n} (2021)"),
            )
        } else {
            f.conversational_turn(&inv, &format!("question {n}"), &format!("answer {n}"))
        };
        let last = events.len() - 1;
        events[last] = events[last]
            .clone()
            .with_prompt_tokens(if appended + 10 >= target_events {
                last_tokens
            } else {
                20_000
            });
        first.get_or_insert(events[0].timestamp);
        turn_ends.push(events[last].timestamp);
        for e in &events {
            revision = store.append_event(&key(), revision, e).expect("append");
        }
        appended += events.len();
        // A rolling compaction every 8 turns, keeping the last 2 verbatim (but not at the end,
        // so that the final turns open the envelope).
        if compacted && n.is_multiple_of(8) && appended + 40 < target_events {
            let end = turn_ends[n - 3];
            let c = f.compaction(
                &format!("c{n}"),
                first.expect("first"),
                end,
                &format!("summary through turn {}", n - 2),
            );
            revision = store
                .append_event(&key(), revision, &c)
                .expect("append compaction");
            appended += 1;
        }
    }
}

fn engine(store: Arc<SqliteStore>, p: f64) -> Engine {
    Engine::builder(
        Arc::new(ScriptedDecisionModel::constant(p)),
        Arc::new(RecordingSummarizer::new()),
        store,
        Arc::new(SteppingClock::starting_at(2_000_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .settings(Settings::default())
    .build()
    .expect("valid")
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let settings = Settings::default().effective().expect("valid");
    c.bench_function("gate/pure_fast_exit", |b| {
        let input = GateInput {
            completed_turns_since_compaction: 2,
            coordinator_prompt_tokens: Some(12_000),
        };
        b.iter(|| envelope_gate(black_box(&settings), black_box(input)))
    });

    let dir = tempfile::tempdir().expect("tempdir");
    // Fast exit: tokens below the floor, so the gate's one-row read is all that happens.
    let fast = dir.path().join("fast.db");
    build_db(&fast, 1_000, 10_000);
    let store = Arc::new(SqliteStore::open(&fast).expect("open"));
    let fast_engine = engine(store, 1.0);
    c.bench_function("evaluate/fast_exit_through_sqlite", |b| {
        b.iter(|| rt.block_on(fast_engine.evaluate_and_compact(black_box(&key()))))
    });

    // The gate opens on an uncompacted session (no compaction ever, tokens above the floor);
    // the probe answers p = 0, so every iteration reads the decision state's window, probes,
    // records the decision and continues. A turn is 3 events on average here.
    for turns in [100usize, 10_000] {
        let path = dir.path().join(format!("uncompacted-{turns}.db"));
        build_session(&path, turns * 3, 50_000, false);
        let store = Arc::new(SqliteStore::open(&path).expect("open"));
        let engine = engine(store, 0.0);
        c.bench_function(
            &format!("evaluate/gate_open_uncompacted/{turns}_turns"),
            |b| {
                b.iter(|| {
                    let outcome = rt.block_on(engine.evaluate_and_compact(black_box(&key())));
                    assert_eq!(outcome.label(), "continue", "{outcome:?}");
                })
            },
        );
    }

    for events in [1_000usize, 10_000] {
        let template = dir.path().join(format!("template-{events}.db"));
        build_db(&template, events, 50_000);
        let mut i = 0usize;
        // Each iteration compacts a fresh copy of the session on a connection that has
        // already served this session's reads (as a service's long-lived store has); closing
        // it (a WAL checkpoint) happens after the timing, since the engine is returned.
        c.bench_function(&format!("evaluate/compress_path/{events}_events"), |b| {
            b.iter_batched(
                || {
                    i += 1;
                    let copy: PathBuf = dir.path().join(format!("run-{events}-{i}.db"));
                    std::fs::copy(&template, &copy).expect("copy db");
                    let store = Arc::new(SqliteStore::open(&copy).expect("open"));
                    store
                        .blocking()
                        .load_live_tail(&key())
                        .expect("warm the connection");
                    store
                        .blocking()
                        .header(&key())
                        .expect("warm the connection");
                    engine(store, 1.0)
                },
                |engine| {
                    let outcome = rt.block_on(engine.evaluate_and_compact(&key()));
                    assert!(outcome.compaction().is_some(), "{outcome:?}");
                    engine
                },
                BatchSize::PerIteration,
            )
        });
    }
}

criterion_group! {
    name = engine_benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(4));
    targets = benches
}
criterion_main!(engine_benches);
