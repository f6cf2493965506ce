//! Unix file modes: permission errors (also when the tests run as root), mode 0600 for created
//! files, kept modes on update, and symbolic links kept on replacement.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use config_ssot::{ConfigError, Origin};

use crate::support::{loud, store};

/// Whether this process can read a file whose mode is 000 (root or CAP_DAC_OVERRIDE), in which
/// case permission tests must drop privileges to mean anything.
fn privileged() -> bool {
    let probe = tempfile::tempdir().expect("probe dir");
    let file = probe.path().join("privilege-probe");
    std::fs::write(&file, b"x").expect("write probe");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    std::fs::read(&file).is_ok()
}

/// Runs the helper's `load` as the unprivileged user `nobody` via `setpriv`, returning its
/// result line, or `None` (after a loud skip message) if that is impossible here.
fn load_as_nobody(test: &str, file: &Path) -> Option<String> {
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_config-ssot-helper"))
        .arg("load")
        .arg(file)
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_owned()),
        other => {
            loud(&format!(
                "SKIPPED {test}: running with root privileges, where file modes do not deny \
                 access, and `setpriv` could not run the helper as `nobody` ({other:?})"
            ));
            None
        }
    }
}

/// A file the process may not read: a clear permission error naming the file, bytes intact.
/// As root (where mode 000 does not deny reads) the check runs in a child as `nobody`.
#[test]
fn an_unreadable_file_is_a_permission_error() {
    let (dir, store, file) = store();
    store.load().expect("create");
    let before = std::fs::read(&file).expect("read");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if privileged() {
        // `nobody` must reach the directory and the lock file to get as far as the read.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod dir");
        std::fs::set_permissions(
            store.path().lock_file(),
            std::fs::Permissions::from_mode(0o666),
        )
        .expect("chmod lock");
        if let Some(line) = load_as_nobody("an_unreadable_file_is_a_permission_error", &file) {
            assert!(line.starts_with("ERR PermissionDenied"), "{line}");
            assert!(line.contains(&file.display().to_string()), "{line}");
            assert!(line.contains("read the settings file"), "{line}");
        }
    } else {
        let err = store.load().expect_err("unreadable");
        assert!(
            matches!(err, ConfigError::PermissionDenied { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&file.display().to_string()),
            "{err}"
        );
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod back");
    assert_eq!(std::fs::read(&file).expect("read"), before);
}

/// A missing file in a directory the process may not write: a clear permission error naming
/// the directory, and nothing is created.
#[test]
fn a_file_that_cannot_be_created_is_a_permission_error() {
    let (dir, store, file) = store();
    // The lock file may exist (another program made it); the settings file does not.
    std::fs::File::create(store.path().lock_file()).expect("lock file");
    std::fs::set_permissions(
        store.path().lock_file(),
        std::fs::Permissions::from_mode(0o666),
    )
    .expect("chmod lock");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555))
        .expect("chmod dir");
    if privileged() {
        if let Some(line) =
            load_as_nobody("a_file_that_cannot_be_created_is_a_permission_error", &file)
        {
            assert!(line.starts_with("ERR PermissionDenied"), "{line}");
            assert!(line.contains(&dir.path().display().to_string()), "{line}");
        }
    } else {
        let err = store.load().expect_err("read-only directory");
        assert!(
            matches!(err, ConfigError::PermissionDenied { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{err}"
        );
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod back");
    assert!(!file.exists(), "nothing may be created");
}

/// A created file is private to its owner, and an updated one keeps the mode it had.
#[test]
fn created_files_are_mode_0600_and_updates_keep_the_mode() {
    let (_dir, store, file) = store();
    store.load().expect("create");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&store.path().lock_file()), 0o600);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    store
        .update(|s| s.adaptive_compaction_min_turns = 8)
        .expect("update");
    assert_eq!(mode(&file), 0o640);
}

/// A symbolic link to the settings file (a dotfiles setup) stays a link; its target is
/// replaced atomically.
#[test]
fn a_symlinked_file_keeps_its_link() {
    let (dir, store, file) = store();
    let real = dir.path().join("dotfiles-config.json");
    std::fs::write(&real, b"{}").expect("write target");
    std::os::unix::fs::symlink(&real, &file).expect("symlink");
    let loaded = store.load().expect("load through the link");
    assert_eq!(loaded.origin(), Origin::Backfilled);
    assert!(
        std::fs::symlink_metadata(&file)
            .expect("lstat")
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&real).expect("read target"), loaded.render());
}
