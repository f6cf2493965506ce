//! The watcher sees other processes' changes and never a torn write.

use std::process::Child;
use std::time::Duration;

use config_ssot::{ConfigStore, WatchEvent, Watcher};

use crate::support::{assert_ok, helper, store};

/// Polls `watcher` until `child` exits, then once more; returns the token floors delivered.
/// Panics on any rejected state: a writer that locks never leaves one to be seen.
fn watch_until_exit(watcher: &mut Watcher, mut child: Child) -> Vec<i64> {
    let mut floors = Vec::new();
    let mut record = |event: Option<WatchEvent>| match event {
        Some(WatchEvent::Changed(file)) => {
            floors.push(file.settings().adaptive_compaction_token_floor)
        }
        Some(WatchEvent::Rejected(e)) => panic!("the watcher saw an unusable state: {e}"),
        Some(other) => panic!("unexpected event {other:?}"),
        None => {}
    };
    loop {
        record(watcher.poll());
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        std::thread::yield_now();
    }
    record(watcher.poll());
    assert_ok(&child.wait_with_output().expect("collect child"));
    floors
}

fn reset(store: &ConfigStore) -> config_ssot::ConfigFile {
    store
        .update(|s| s.adaptive_compaction_token_floor = 0)
        .expect("reset floor")
}

/// Another process's `set` is delivered by the next poll, validated.
#[test]
fn a_watcher_sees_a_change_made_by_another_process() {
    let (_dir, store, file) = store();
    let current = store.load().expect("create");
    let mut watcher = store.watch_from(&current);
    assert!(watcher.poll().is_none(), "no change yet");
    let out = helper()
        .args([
            "set",
            file.to_str().expect("utf-8"),
            "adaptive_compaction_min_turns",
            "9",
        ])
        .output()
        .expect("run helper");
    assert_ok(&out);
    match watcher.poll() {
        Some(WatchEvent::Changed(f)) => assert_eq!(f.effective().min_turns, 9),
        other => panic!("expected the change, got {other:?}"),
    }
    assert!(watcher.poll().is_none(), "a change is reported once");
}

/// While another process loops atomic `update`s, every state the watcher delivers is whole and
/// valid, the values only grow, and the last one is the final value.
#[test]
fn a_watcher_never_sees_a_torn_write_from_an_atomic_writer() {
    watch_a_writer_of_150_increments("increment");
}

/// The same against a writer that rewrites the file in place in two chunks under the lock (as
/// Python's `json.dump` does): lock-free reads may catch it half-written, and the retry under
/// the shared lock means such a state is never delivered.
#[test]
fn a_watcher_never_sees_a_torn_write_from_an_in_place_writer() {
    watch_a_writer_of_150_increments("inplace");
}

/// Watches while the helper's `mode` writer makes 150 increments of the token floor: every
/// delivered floor is whole, the floors only grow, and the last is 150.
fn watch_a_writer_of_150_increments(mode: &str) {
    let (_dir, store, file) = store();
    let current = reset(&store);
    let mut watcher = store.watch_from(&current);
    let child = helper()
        .args([mode, file.to_str().expect("utf-8"), "150"])
        .spawn()
        .expect("spawn helper");
    let floors = watch_until_exit(&mut watcher, child);
    assert!(floors.is_sorted(), "{floors:?}");
    assert_eq!(floors.last(), Some(&150), "{floors:?}");
}

/// A corrupt state is reported once as rejected (with the file named); the repair is
/// delivered as a change.
#[test]
fn a_watcher_reports_a_bad_state_once_and_then_the_repair() {
    let (_dir, store, file) = store();
    let current = store.load().expect("create");
    let mut watcher = store.watch_from(&current);
    std::fs::write(&file, b"{\"adaptive_compaction_min_turns\": null}").expect("corrupt");
    match watcher.poll() {
        Some(WatchEvent::Rejected(e)) => {
            assert!(
                e.to_string().contains("adaptive_compaction_min_turns"),
                "{e}"
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(
        watcher.poll().is_none(),
        "the same bad state is reported once"
    );
    std::fs::write(&file, current.render()).expect("repair");
    assert!(matches!(watcher.poll(), Some(WatchEvent::Changed(_))));
}

/// The thread form delivers an update made through another store handle.
#[test]
fn a_spawned_watcher_delivers_changes_on_its_channel() {
    let (_dir, store, _file) = store();
    let current = store.load().expect("create");
    let handle = store
        .watch_from(&current)
        .spawn(Duration::from_millis(10))
        .expect("spawn watcher");
    store
        .update(|s| s.adaptive_compaction_threshold = 0.5)
        .expect("update");
    match handle.events().recv_timeout(Duration::from_secs(30)) {
        Ok(WatchEvent::Changed(f)) => assert_eq!(f.effective().threshold, 0.5),
        other => panic!("expected the change, got {other:?}"),
    }
    drop(handle);
}
