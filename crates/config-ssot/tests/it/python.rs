//! Cross-language locking with Python's `filelock` (the desktop app's side).
//!
//! Needs `python3` with the `filelock` package (`.ci/run` installs it). Without it the tests
//! print a loud SKIPPED line on the real stderr and pass, unless `CONFIG_SSOT_REQUIRE_PYTHON=1`
//! is set, in which case they fail.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::{assert_ok, helper, loud, store};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/python/filelock_increment.py"
);

/// `true` if python3 can import filelock; otherwise reports the skip (or fails if required).
fn python_with_filelock(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import filelock"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let msg = format!(
            "SKIPPED {test}: python3 with the `filelock` package is not available \
             (install with `python3 -m pip install filelock`)"
        );
        assert!(
            std::env::var_os("CONFIG_SSOT_REQUIRE_PYTHON").is_none(),
            "{msg} and CONFIG_SSOT_REQUIRE_PYTHON is set"
        );
        loud(&msg);
    }
    ok
}

/// While Python's `FileLock` holds `zocrates_config.json.lock`, the lock this crate takes on
/// that same path cannot be had: the two use the same file and the same `flock` semantics.
#[test]
fn python_filelock_and_rust_exclude_each_other() {
    if !python_with_filelock("python_filelock_and_rust_exclude_each_other") {
        return;
    }
    let (_dir, store, file) = store();
    store.load().expect("create");
    let mut python = Command::new("python3")
        .args([SCRIPT, "hold", file.to_str().expect("utf-8 path")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python");
    let mut line = String::new();
    BufReader::new(python.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read python");
    assert_eq!(line.trim(), "locked");
    let lock = std::fs::File::open(store.path().lock_file()).expect("open lock file");
    assert!(
        matches!(lock.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        "Rust could take the lock while Python's filelock held it"
    );
    drop(python.stdin.take());
    assert!(python.wait().expect("wait python").success());
    lock.try_lock().expect("free once Python released it");
}

/// A Python process (in-place `json.dump` under `filelock`) and a Rust process (`update`) each
/// increment the same key 200 times concurrently: no update is lost and the file stays valid.
#[test]
fn python_and_rust_increment_concurrently_without_losing_updates() {
    if !python_with_filelock("python_and_rust_increment_concurrently_without_losing_updates") {
        return;
    }
    let (_dir, store, file) = store();
    store
        .update(|s| s.adaptive_compaction_token_floor = 0)
        .expect("reset");
    store
        .set_extra("decision_adapter", "offline".into())
        .expect("extra key");
    let path = file.to_str().expect("utf-8 path");
    let python = Command::new("python3")
        .args([
            SCRIPT,
            "increment",
            path,
            "adaptive_compaction_token_floor",
            "200",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python");
    let rust = helper()
        .args(["increment", path, "200"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn helper");
    assert_ok(&python.wait_with_output().expect("wait python"));
    assert_ok(&rust.wait_with_output().expect("wait helper"));
    let loaded = store.load().expect("load");
    assert_eq!(loaded.settings().adaptive_compaction_token_floor, 400);
    assert_eq!(
        loaded.get_extra("decision_adapter"),
        Some(&serde_json::Value::from("offline"))
    );
}
