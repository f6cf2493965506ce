//! Session-store benchmarks, on a file on disk:
//! - `append`: one event per iteration (`Durability::Normal`, the default, and `Full`), plus a
//!   hand-measured latency distribution (median, p95) of single appends;
//! - `header`: the fast-exit read of the gate header (sync call and through the async port);
//! - `load_context`: sessions of 100, 1,000, 10,000 and 100,000 events with a rolling
//!   compaction every 8 turns (K = 2 turns retained), all built once in one temp file;
//! - `load_live_tail`: the same sessions, what the engine reads once the gate opens;
//! - `get_session` at 10,000 events, for contrast with the whole-history load.
//!
//! Run: `cargo bench -p adaptive-compaction-session-store --bench store -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::{Duration, Instant};

use compaction_core::testing::EventFactory;
use compaction_core::{Event, Revision, SessionKey, SessionStore};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::Map;
use session_store::blocking::SqliteStore;
use session_store::{Durability, OpenOptions};

const SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];

#[path = "common/history.rs"]
mod history;
fn temp_store(dir: &tempfile::TempDir, name: &str, durability: Durability) -> SqliteStore {
    SqliteStore::open_with(
        dir.path().join(name),
        OpenOptions::default().durability(durability),
    )
    .expect("open store")
}

/// An endless supply of ordinary turn events for the append benchmarks.
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

#[allow(clippy::print_stdout)]
fn append_latency_distribution(dir: &tempfile::TempDir) {
    for durability in [Durability::Full, Durability::Normal] {
        let store = temp_store(dir, &format!("dist-{durability:?}.db"), durability);
        let key = SessionKey::new("bench", "u", "dist");
        store.create_session(&key, Map::new()).expect("create");
        let mut feed = Feed::new();
        let mut revision = Revision(0);
        let mut samples: Vec<Duration> = Vec::with_capacity(2_000);
        for i in 0..2_200 {
            let event = feed.next_event();
            let start = Instant::now();
            revision = store.append_event(&key, revision, &event).expect("append");
            if i >= 200 {
                samples.push(start.elapsed());
            }
        }
        samples.sort_unstable();
        let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
        println!(
            "append latency ({durability:?}, {} single appends): median {:?}, p95 {:?}, p99 {:?}",
            samples.len(),
            pick(0.5),
            pick(0.95),
            pick(0.99)
        );
    }
}

/// Medians of `load_context` per size, timed round-robin (one call per size per round) so
/// that the machine's load drifts equally over every size.
#[allow(clippy::print_stdout)]
fn load_context_interleaved(store: &SqliteStore) {
    let keys: Vec<SessionKey> = SIZES
        .iter()
        .map(|size| SessionKey::new("bench", "u", format!("s{size}")))
        .collect();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(2_000); SIZES.len()];
    for round in 0..2_200 {
        for (i, key) in keys.iter().enumerate() {
            let start = Instant::now();
            black_box(store.load_context(key).expect("context"));
            if round >= 200 {
                samples[i].push(start.elapsed());
            }
        }
    }
    for (size, mut s) in SIZES.iter().zip(samples) {
        s.sort_unstable();
        let median = s[s.len() / 2];
        let p95 = s[(s.len() - 1) * 95 / 100];
        println!("load_context interleaved s{size}: median {median:?}, p95 {p95:?}");
    }
}

/// One indexed read of a session.
type Read = fn(&SqliteStore, &SessionKey);

#[allow(clippy::print_stdout)]
fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    append_latency_distribution(&dir);

    let mut group = c.benchmark_group("append");
    for durability in [Durability::Full, Durability::Normal] {
        let store = temp_store(&dir, &format!("append-{durability:?}.db"), durability);
        let key = SessionKey::new("bench", "u", "append");
        store.create_session(&key, Map::new()).expect("create");
        let mut feed = Feed::new();
        let mut revision = Revision(0);
        group.bench_function(
            BenchmarkId::from_parameter(format!("{durability:?}")),
            |b| {
                b.iter_batched(
                    || feed.next_event(),
                    |event| {
                        revision = store.append_event(&key, revision, &event).expect("append");
                    },
                    criterion::BatchSize::SmallInput,
                );
            },
        );
    }
    group.finish();

    // One file holding a session of every size.
    let store = temp_store(&dir, "sizes.db", Durability::Normal);
    for size in SIZES {
        let key = SessionKey::new("bench", "u", format!("s{size}"));
        store.create_session(&key, Map::new()).expect("create");
        let mut revision = Revision(0);
        let stored = history::fill(EventFactory::new(), size, |e| {
            revision = store.append_event(&key, revision, e).expect("append");
        });
        println!("load_context fixture s{size}: {stored} events");
    }

    load_context_interleaved(&store);

    let mut group = c.benchmark_group("header");
    let key = SessionKey::new("bench", "u", "s100000");
    group.bench_function("sync", |b| {
        b.iter(|| black_box(store.header(&key).expect("header")));
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("runtime");
    let port = session_store::SqliteStore::from(store.clone());
    group.bench_function("port_gate_snapshot", |b| {
        b.iter(|| {
            black_box(
                runtime
                    .block_on(SessionStore::gate_snapshot(&port, &key))
                    .expect("snapshot"),
            )
        });
    });
    group.finish();

    // The two indexed reads: the next prompt's context, and what the engine loads once the
    // gate opens.
    let reads: [(&str, Read); 2] = [
        ("load_context", |store, key| {
            black_box(store.load_context(key).expect("context"));
        }),
        ("load_live_tail", |store, key| {
            black_box(store.load_live_tail(key).expect("live tail"));
        }),
    ];
    for (name, read) in reads {
        let mut group = c.benchmark_group(name);
        for size in SIZES {
            let key = SessionKey::new("bench", "u", format!("s{size}"));
            group.bench_function(BenchmarkId::from_parameter(size), |b| {
                b.iter(|| read(&store, &key));
            });
        }
        group.finish();
    }

    let mut group = c.benchmark_group("get_session");
    group.sample_size(10);
    let key = SessionKey::new("bench", "u", "s10000");
    group.bench_function(BenchmarkId::from_parameter(10_000), |b| {
        b.iter(|| black_box(store.get_session(&key).expect("session")));
    });
    group.finish();
}

criterion_group!(store_benches, benches);
criterion_main!(store_benches);
