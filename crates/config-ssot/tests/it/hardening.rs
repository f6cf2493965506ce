//! Regression tests of issue 20 (hardening): stale temporary files, duplicate keys, reads
//! that never write and never wait for ever.

use std::time::Duration;

use config_ssot::{ConfigError, Origin};

use crate::support::store;

/// Issue 20 item 8: the temporary files of killed writers (`.<name>.<pid>.<n>.tmp`) are removed
/// by the next write; other files in the directory are left alone.
#[test]
fn the_next_write_removes_temporary_files_left_by_killed_writers() {
    let (dir, store, _file) = store();
    store.load().expect("create");
    let stale = [
        ".zocrates_config.json.4242.0.tmp",
        ".zocrates_config.json.77.13.tmp",
    ];
    let unrelated = [
        ".other.json.4242.0.tmp",
        "notes.tmp",
        ".zocrates_config.json.x.tmp",
    ];
    for name in stale.iter().chain(&unrelated) {
        std::fs::write(dir.path().join(name), b"{\"half\": ").expect("write");
    }
    store
        .set("adaptive_compaction_threshold", "0.8")
        .expect("set");
    for name in stale {
        assert!(!dir.path().join(name).exists(), "{name} is left");
    }
    for name in unrelated {
        assert!(dir.path().join(name).exists(), "{name} was removed");
    }
}

/// Issue 20 item 12: a key named twice is refused with the key and the line, and the file is
/// left untouched.
#[test]
fn a_duplicate_key_is_refused_naming_key_and_line() {
    let (_dir, store, file) = store();
    let text = "{\n  \"adaptive_compaction_threshold\": 0.5,\n  \"adaptive_compaction_threshold\": 0.9\n}\n";
    std::fs::write(&file, text).expect("write");
    let err = store.load().unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, ConfigError::Syntax { line: 3, .. }),
        "{err:?}"
    );
    assert!(
        message.contains("duplicate key \"adaptive_compaction_threshold\""),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), text);
}

/// Issue 20 item 7: `read` never writes: a file missing keys gets their defaults in memory
/// only, and no lock file is created.
#[test]
fn read_never_writes_and_creates_no_lock_file() {
    let (dir, store, file) = store();
    let text = "{\"adaptive_compaction_threshold\": 0.9}";
    std::fs::write(&file, text).expect("write");
    let read = store
        .read(Duration::from_secs(1), |_| {
            panic!("no writer holds the lock")
        })
        .expect("read");
    assert_eq!(read.file.origin(), Origin::ReadWithDefaults);
    assert_eq!(read.file.effective().threshold, 0.9);
    assert_eq!(read.file.settings().adaptive_compaction_min_turns, 4);
    assert_eq!(std::fs::read_to_string(&file).expect("read"), text);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["zocrates_config.json"]);
}

/// Issue 20 item 7: a writer that holds the lock is waited for a bounded time, with one call
/// of `waiting` naming the lock file; then the read goes ahead and says so.
#[test]
fn read_waits_a_bounded_time_for_a_writer_and_says_so() {
    let (_dir, store, file) = store();
    store.load().expect("create");
    let lock_path = store.path().lock_file();
    let held = std::fs::File::open(&lock_path).expect("open lock");
    held.lock().expect("hold the lock");
    let mut told = Vec::new();
    let read = store
        .read(Duration::from_millis(100), |p| told.push(p.to_owned()))
        .expect("read");
    assert_eq!(told, std::slice::from_ref(&lock_path));
    assert_eq!(read.lock_timed_out, Some(lock_path));
    assert_eq!(read.file.path(), file.as_path());
}
