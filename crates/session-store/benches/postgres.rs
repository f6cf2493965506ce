//! `PostgresStore` side by side with `SqliteStore`, in one run, through compaction-core's
//! async port (what the engine and `compaction serve` call):
//! - `append`: single appends, latency distribution (median, p95, p99) and criterion's mean;
//! - `gate_snapshot` (the fast exit's one read) and `load_live_tail` (what the engine reads
//!   once the gate opens) on sessions of about 1,000 / 10,000 / 100,000 events, built by the
//!   same history as the SQLite benches (a rolling compaction every 8 turns, the same tail at
//!   every size, so only the history before the live summary grows); medians and p95 timed
//!   round-robin over sizes and stores, so load drift hits all equally; plus criterion groups.
//! - `evaluations`: post-turn evaluations per second with two replicas (two pools and two
//!   engines on one database; for SQLite two stores on one file), offline scripted models.
//!
//! Needs `COMPACTION_TEST_POSTGRES_URL` (`cargo xtask pg start`); without it the bench says so
//! and measures nothing. The fixtures live in a schema of their own, dropped at the end.
//!
//! Run: `cargo bench -p adaptive-compaction-session-store --features postgres --bench postgres -- --warm-up-time 1 --measurement-time 3`
//! (`COMPACTION_BENCH_SIZES=1000,10000` leaves out the 100,000-event fixtures.)

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use compaction_core::testing::{
    EventFactory, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{Engine, Event, Revision, SessionKey, SessionStore};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::Map;
use session_store::{PostgresOptions, PostgresStore, SqliteStore};
use tokio::runtime::Runtime;

#[path = "common/history.rs"]
mod history;

use test_data::pg::URL_VAR;

fn sizes() -> Vec<usize> {
    std::env::var("COMPACTION_BENCH_SIZES")
        .ok()
        .map(|s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("COMPACTION_BENCH_SIZES: numbers"))
                .collect()
        })
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000])
}

/// The two stores under test, by name.
fn stores(pg: &PostgresStore, sqlite: &SqliteStore) -> [(&'static str, Arc<dyn SessionStore>); 2] {
    [
        ("postgres", Arc::new(pg.clone())),
        ("sqlite", Arc::new(sqlite.clone())),
    ]
}

/// An endless supply of ordinary turn events.
struct Feed {
    f: EventFactory,
    buffer: Vec<Event>,
    turn: usize,
}

impl Feed {
    fn new() -> Self {
        Feed {
            f: EventFactory::new(),
            buffer: Vec::new(),
            turn: 0,
        }
    }

    fn next_event(&mut self) -> Event {
        if self.buffer.is_empty() {
            self.turn += 1;
            let mut t =
                self.f
                    .research_turn(&format!("inv{}", self.turn), "a question", "findings");
            t.reverse();
            self.buffer = t;
        }
        self.buffer.pop().expect("refilled")
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort_unstable();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    (pick(0.5), pick(0.95), pick(0.99))
}

#[allow(clippy::print_stdout)]
fn append_distribution(rt: &Runtime, name: &str, store: &Arc<dyn SessionStore>) {
    let key = SessionKey::new("bench", "u", "dist");
    rt.block_on(store.create_session(&key, Map::new()))
        .expect("create");
    let mut feed = Feed::new();
    let mut revision = Revision(0);
    let mut samples = Vec::with_capacity(2_000);
    for i in 0..2_200 {
        let event = feed.next_event();
        let start = Instant::now();
        revision = rt
            .block_on(store.append(&key, revision, event))
            .expect("append");
        if i >= 200 {
            samples.push(start.elapsed());
        }
    }
    let (median, p95, p99) = percentiles(samples);
    println!(
        "append {name} (2,000 single appends through the port): median {median:?}, p95 {p95:?}, p99 {p99:?}"
    );
}

/// Round-robin medians of `gate_snapshot` and `load_live_tail` per store and size.
#[allow(clippy::print_stdout)]
fn reads_interleaved(rt: &Runtime, stores: &[(&str, Arc<dyn SessionStore>)], sizes: &[usize]) {
    for read in ["gate_snapshot", "load_live_tail"] {
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); stores.len() * sizes.len()];
        for round in 0..1_100 {
            for (s, (_, store)) in stores.iter().enumerate() {
                for (z, size) in sizes.iter().enumerate() {
                    let key = SessionKey::new("bench", "u", format!("s{size}"));
                    let start = Instant::now();
                    if read == "gate_snapshot" {
                        black_box(rt.block_on(store.gate_snapshot(&key)).expect("snapshot"));
                    } else {
                        black_box(rt.block_on(store.load_live_tail(&key)).expect("tail"));
                    }
                    if round >= 100 {
                        samples[s * sizes.len() + z].push(start.elapsed());
                    }
                }
            }
        }
        for (s, (name, _)) in stores.iter().enumerate() {
            for (z, size) in sizes.iter().enumerate() {
                let (median, p95, _) =
                    percentiles(std::mem::take(&mut samples[s * sizes.len() + z]));
                println!(
                    "{read} {name} s{size}: median {median:?}, p95 {p95:?} (1,000 calls, round-robin)"
                );
            }
        }
    }
}

/// Post-turn evaluations per second: two replicas (each its own store handle and engine)
/// evaluating `sessions` sessions of one database concurrently, each session evaluated after
/// each of `turns` new turns appended by its replica.
#[allow(clippy::print_stdout)]
fn evaluations_per_second(
    rt: &Runtime,
    name: &str,
    replicas: [Arc<dyn SessionStore>; 2],
    sessions: usize,
    turns: usize,
) {
    let started = Instant::now();
    let evaluations: usize = rt.block_on(async {
        let mut tasks = Vec::new();
        for s in 0..sessions {
            let store = replicas[s % 2].clone();
            let name = name.to_owned();
            tasks.push(tokio::spawn(async move {
                let engine = Engine::builder(
                    Arc::new(ScriptedDecisionModel::constant(0.9)),
                    Arc::new(RecordingSummarizer::new()),
                    store.clone(),
                    Arc::new(SteppingClock::starting_at(1_800_000_000)),
                    Arc::new(SequentialIds::default()),
                )
                .build()
                .expect("engine");
                let key = SessionKey::new("eval", "u", format!("{name}-{s}"));
                store
                    .create_session(&key, Map::new())
                    .await
                    .expect("create");
                let mut f = EventFactory::new();
                let mut n = 0;
                for t in 0..turns {
                    let mut turn = f.research_turn(&format!("i{t}"), "a question", "findings");
                    // The final answer's prompt is over the floor: the gate opens every turn.
                    turn[5] = turn[5].clone().with_prompt_tokens(60_000);
                    for event in turn {
                        let revision = store.gate_snapshot(&key).await.expect("gate").revision;
                        store.append(&key, revision, event).await.expect("append");
                    }
                    let outcome = engine.evaluate_and_compact(&key).await;
                    assert!(outcome.failure().is_none(), "{outcome}");
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.expect("task");
        }
        total
    });
    let elapsed = started.elapsed();
    println!(
        "evaluations {name}, 2 replicas: {evaluations} post-turn evaluations ({sessions} sessions x {turns} turns, each turn's 6 appends included) in {elapsed:.2?}: {:.0} evaluations/s",
        evaluations as f64 / elapsed.as_secs_f64()
    );
}

#[allow(clippy::print_stdout)]
fn benches(c: &mut Criterion) {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty()) else {
        println!("SKIPPED the PostgreSQL benchmarks: {URL_VAR} is unset (`cargo xtask pg start`)");
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let schema = format!("bench_{}_{nanos}", std::process::id());
    let pg = rt
        .block_on(PostgresStore::connect_with(
            &url,
            PostgresOptions::default().schema(&schema),
        ))
        .expect("connect");
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = SqliteStore::open(dir.path().join("bench.db")).expect("open");
    let both = stores(&pg, &sqlite);

    for (name, store) in &both {
        append_distribution(&rt, name, store);
    }
    let mut group = c.benchmark_group("append");
    for (name, store) in &both {
        let key = SessionKey::new("bench", "u", "criterion-append");
        rt.block_on(store.create_session(&key, Map::new()))
            .expect("create");
        let mut feed = Feed::new();
        let mut revision = Revision(0);
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_batched(
                || feed.next_event(),
                |event| {
                    revision = rt
                        .block_on(store.append(&key, revision, event))
                        .expect("append");
                },
                criterion::BatchSize::SmallInput,
            );
        });
    }
    group.finish();

    let sizes = sizes();
    for (name, store) in &both {
        for &size in &sizes {
            let key = SessionKey::new("bench", "u", format!("s{size}"));
            let started = Instant::now();
            rt.block_on(async {
                store
                    .create_session(&key, Map::new())
                    .await
                    .expect("create");
                let mut events = Vec::new();
                let stored = history::fill(EventFactory::new(), size, |e| events.push(e.clone()));
                let mut revision = Revision(0);
                for e in events {
                    revision = store.append(&key, revision, e).await.expect("append");
                }
                println!(
                    "fixture {name} s{size}: {stored} events appended in {:.1?}",
                    started.elapsed()
                );
            });
        }
    }
    reads_interleaved(&rt, &both, &sizes);

    for read in ["gate_snapshot", "load_live_tail"] {
        let mut group = c.benchmark_group(read);
        for (name, store) in &both {
            for &size in &sizes {
                let key = SessionKey::new("bench", "u", format!("s{size}"));
                group.bench_function(BenchmarkId::new(*name, size), |b| {
                    b.iter(|| {
                        if read == "gate_snapshot" {
                            black_box(rt.block_on(store.gate_snapshot(&key)).expect("snapshot"));
                        } else {
                            black_box(rt.block_on(store.load_live_tail(&key)).expect("tail"));
                        }
                    });
                });
            }
        }
        group.finish();
    }

    let pg_replica = rt
        .block_on(PostgresStore::connect_with(
            &url,
            PostgresOptions::default().schema(&schema),
        ))
        .expect("second replica");
    let sqlite_replica = SqliteStore::open(dir.path().join("bench.db")).expect("second replica");
    evaluations_per_second(
        &rt,
        "postgres",
        [Arc::new(pg.clone()), Arc::new(pg_replica)],
        20,
        20,
    );
    evaluations_per_second(
        &rt,
        "sqlite",
        [Arc::new(sqlite.clone()), Arc::new(sqlite_replica)],
        20,
        20,
    );

    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("admin connection");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .expect("drop the fixtures");
    });
}

criterion_group!(postgres_benches, benches);
criterion_main!(postgres_benches);
