//! What the damage check costs when a writing store opens a file (issue 20 item 3): the time
//! of `SqliteStore::open_with` with `IntegrityCheck::Skip`, `Quick` (the default) and `Full`,
//! on files of 1,000, 10,000 and 100,000 events (the benchmark history of `store`), median of
//! 9 opens each after one warm-up open (the file is in the page cache: this is the CPU cost).
//!
//! Run: `cargo bench -p adaptive-compaction-session-store --bench integrity`

#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use compaction_core::testing::EventFactory;
use compaction_core::{Revision, SessionKey};
use serde_json::Map;
use session_store::blocking::SqliteStore;
use session_store::{IntegrityCheck, OpenOptions};

#[path = "common/history.rs"]
mod history;

fn median_open(path: &std::path::Path, check: IntegrityCheck) -> Duration {
    let open = || {
        let t = Instant::now();
        let store =
            SqliteStore::open_with(path, OpenOptions::default().integrity(check)).expect("open");
        let took = t.elapsed();
        drop(store);
        took
    };
    open();
    let mut times: Vec<Duration> = (0..9).map(|_| open()).collect();
    times.sort();
    times[4]
}

fn main() {
    println!(
        "| events | file size | open, no check | open + quick_check | open + integrity_check |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for size in [1_000usize, 10_000, 100_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sessions.db");
        {
            let store = SqliteStore::open(&path).expect("open");
            let key = SessionKey::new("bench", "u", "s");
            store.create_session(&key, Map::new()).expect("create");
            let mut revision = Revision(0);
            history::fill(EventFactory::new(), size, |e| {
                revision = store.append_event(&key, revision, e).expect("append");
            });
        }
        let bytes = std::fs::metadata(&path).expect("stat").len();
        let [skip, quick, full] = [
            IntegrityCheck::Skip,
            IntegrityCheck::Quick,
            IntegrityCheck::Full,
        ]
        .map(|c| median_open(&path, c));
        println!(
            "| {size} | {:.1} MB | {:.2} ms | {:.2} ms | {:.2} ms |",
            bytes as f64 / 1e6,
            skip.as_secs_f64() * 1e3,
            quick.as_secs_f64() * 1e3,
            full.as_secs_f64() * 1e3
        );
    }
}
