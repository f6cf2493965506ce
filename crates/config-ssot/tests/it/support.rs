//! Shared helpers: temp dirs, the helper child process, byte snapshots of files.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output};

use config_ssot::ConfigStore;
use tempfile::TempDir;

/// A temp dir and a store for `<dir>/zocrates_config.json`.
pub(crate) fn store() -> (TempDir, ConfigStore, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("zocrates_config.json");
    let store = ConfigStore::open(file.clone());
    (dir, store, file)
}

/// The helper binary of this crate (src/bin/config-ssot-helper.rs).
pub(crate) fn helper() -> Command {
    Command::new(env!("CARGO_BIN_EXE_config-ssot-helper"))
}

/// Runs a finished child and insists it succeeded.
#[track_caller]
pub(crate) fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "child failed ({}): stdout {} stderr {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Says something on the real stderr, bypassing libtest's capture, so a skipped check is
/// visible in `cargo test` output even when the test "passes".
pub(crate) fn loud(message: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "\n!!! config-ssot: {message}\n");
}
