//! What the settings file costs: a load that needs no write (lock, read, parse, validate), an
//! `update` (lock, read, temporary file, two fsyncs, rename), and a watcher poll of an
//! unchanged file (one `stat`), which is what each poll interval costs when nothing happens.
//!
//! `cargo bench -p adaptive-compaction-config-ssot --bench config -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

use std::time::{Duration, SystemTime};

use config_ssot::ConfigStore;
use criterion::{Criterion, criterion_group, criterion_main};

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("zocrates_config.json");
    let store = ConfigStore::open(file.clone());
    store
        .set_extra("decision_adapter", "offline".into())
        .expect("create");

    c.bench_function("load_complete_file", |b| {
        b.iter(|| store.load().expect("load"))
    });

    let mut n = 0i64;
    c.bench_function("update_atomic_replace", |b| {
        b.iter(|| {
            n += 1;
            store
                .update(|s| s.adaptive_compaction_token_floor = n % 1000)
                .expect("update")
        })
    });

    // Age the file past the watcher's racy window so an unchanged poll is a plain `stat`.
    let current = store.load().expect("load");
    std::fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_modified(SystemTime::now() - Duration::from_secs(3600)))
        .expect("age the file");
    let mut watcher = store.watch_from(&current);
    watcher.poll();
    c.bench_function("watch_poll_unchanged", |b| {
        b.iter(|| assert!(watcher.poll().is_none()))
    });
}

criterion_group!(group, benches);
criterion_main!(group);
