//! `AdkStore` benchmarks, on files laid out as google-adk 2.13.0 creates them (both layouts),
//! holding the same history as the native store's bench (research turns with a rolling
//! compaction every eight turns) at 1,000 and 10,000 events:
//! - `adk_load`: ADK's whole-session read (`get_session`), what ADK itself does every turn;
//! - `adk_gate_snapshot`: the gate figures through the port, what one `compaction evaluate`
//!   on an ADK database reads before it can fast-exit;
//! - `adk_load_live_tail`: what the engine reads once the gate opens.
//!
//! The files live on `/dev/shm` when it exists: filling them is one committed transaction per
//! event, and on a disk each would wait for an fsync (reads come from the page cache either
//! way).
//!
//! Run: `cargo bench -p adaptive-compaction-session-store --bench adk -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use compaction_core::testing::EventFactory;
use compaction_core::{SessionKey, SessionStore};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::Map;
use session_store::blocking::AdkStore;

#[path = "common/history.rs"]
mod history;

const SIZES: [usize; 2] = [1_000, 10_000];

/// One read of a session: the sync whole load, or a port call on the runtime.
type Read = fn(&AdkStore, &SessionKey, &tokio::runtime::Runtime);

const LAYOUTS: [(&str, &str); 2] = [
    (
        "database",
        include_str!("../tests/fixtures/adk-database-v1.sql"),
    ),
    ("sqlite", include_str!("../tests/fixtures/adk-sqlite.sql")),
];

fn temp_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("temp dir in /dev/shm")
    } else {
        tempfile::tempdir().expect("temp dir")
    }
}

/// An ADK file of `ddl` holding one session of about `size` events.
#[allow(clippy::print_stdout)]
fn adk_session(dir: &Path, layout: &str, ddl: &str, size: usize) -> (AdkStore, SessionKey) {
    let path = dir.join(format!("{layout}-{size}.db"));
    rusqlite::Connection::open(&path)
        .and_then(|c| c.execute_batch(ddl))
        .expect("ADK schema");
    let store = AdkStore::open(&path).expect("open");
    let key = SessionKey::new("zocrates", "u", format!("s{size}"));
    let created = store.create_session(&key, Map::new()).expect("create");
    // ADK sessions are created now; their events must be later than update_time.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64();
    let mut revision = created.revision;
    let stored = history::fill(EventFactory::starting_at(now.ceil() + 1.0), size, |e| {
        revision = store.append_event(&key, revision, e).expect("append");
    });
    println!("adk fixture {layout} s{size}: {stored} events");
    (store, key)
}

fn benches(c: &mut Criterion) {
    let dir = temp_dir();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("runtime");
    let mut sessions = Vec::new();
    for (layout, ddl) in LAYOUTS {
        for size in SIZES {
            sessions.push((layout, size, adk_session(dir.path(), layout, ddl, size)));
        }
    }
    let reads: [(&str, Read); 3] = [
        ("adk_load", |store, key, _| {
            black_box(store.get_session(key).expect("session"));
        }),
        ("adk_gate_snapshot", |store, key, runtime| {
            black_box(
                runtime
                    .block_on(SessionStore::gate_snapshot(
                        &session_store::AdkStore::from(store.clone()),
                        key,
                    ))
                    .expect("gate"),
            );
        }),
        ("adk_load_live_tail", |store, key, runtime| {
            black_box(
                runtime
                    .block_on(SessionStore::load_live_tail(
                        &session_store::AdkStore::from(store.clone()),
                        key,
                    ))
                    .expect("tail"),
            );
        }),
    ];
    for (name, read) in reads {
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        for (layout, size, (store, key)) in &sessions {
            group.bench_function(BenchmarkId::new(*layout, size), |b| {
                b.iter(|| read(store, key, &runtime));
            });
        }
        group.finish();
    }
}

criterion_group!(adk_benches, benches);
criterion_main!(adk_benches);
