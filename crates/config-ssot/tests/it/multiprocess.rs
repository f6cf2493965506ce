//! Two OS processes incrementing one key under the lock lose no update.

use crate::support::{assert_ok, helper, store};

/// Two helper processes each perform 200 `update` increments of the token floor at the same
/// time; the lock makes every read-modify-write see the previous one, so the result is 400.
#[test]
fn two_processes_each_incrementing_200_times_reach_400() {
    let (_dir, store, file) = store();
    store
        .update(|s| s.adaptive_compaction_token_floor = 0)
        .expect("reset floor");
    let children: Vec<_> = (0..2)
        .map(|_| {
            helper()
                .args(["increment", file.to_str().expect("utf-8 path"), "200"])
                .spawn()
                .expect("spawn helper")
        })
        .collect();
    for child in children {
        assert_ok(&child.wait_with_output().expect("wait helper"));
    }
    let loaded = store.load().expect("load");
    assert_eq!(loaded.settings().adaptive_compaction_token_floor, 400);
    // No temporary file is left behind by 400 atomic replacements.
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().expect("parent"))
        .expect("list dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Threads in one process exclude each other too (`flock` is per open file description).
#[test]
fn threads_of_one_process_lose_no_update() {
    let (_dir, store, _file) = store();
    store
        .update(|s| s.adaptive_compaction_token_floor = 0)
        .expect("reset floor");
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..25 {
                    store
                        .update(|s| s.adaptive_compaction_token_floor += 1)
                        .expect("update");
                }
            });
        }
    });
    assert_eq!(
        store
            .load()
            .expect("load")
            .settings()
            .adaptive_compaction_token_floor,
        100
    );
}

/// Issue 20 item 1: a writer that names the file through a symbolic link and one that names
/// the real file take the same lock, so four processes (two each way) lose no update.
#[cfg(unix)]
#[test]
fn writers_through_a_symlink_and_the_real_path_lose_no_update() {
    let (dir, store, file) = store();
    store
        .update(|s| s.adaptive_compaction_token_floor = 0)
        .expect("reset floor");
    let link = dir.path().join("linked_config.json");
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    let children: Vec<_> = [&file, &link, &file, &link]
        .iter()
        .map(|path| {
            helper()
                .args(["increment", path.to_str().expect("utf-8 path"), "100"])
                .spawn()
                .expect("spawn helper")
        })
        .collect();
    for child in children {
        assert_ok(&child.wait_with_output().expect("wait helper"));
    }
    let loaded = store.load().expect("load");
    assert_eq!(loaded.settings().adaptive_compaction_token_floor, 400);
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink(),
        "the link is kept"
    );
}
