//! A bad file gives a clear error and is left byte-identical, by `load`, `update` and `set`.

use std::path::Path;

use config_ssot::{ConfigError, ConfigFile, ConfigStore, MAX_FILE_BYTES, Origin};

use crate::support::store;

/// Loads, updates and sets on `store`, each of which must fail with an error accepted by
/// `expected` and mentioning every string in `mentions`; the file's bytes never change.
#[track_caller]
fn check_refused(
    store: &ConfigStore,
    file: &Path,
    expected: fn(&ConfigError) -> bool,
    mentions: &[&str],
) {
    let before = std::fs::read(file).expect("read before");
    let attempts: [(&str, Result<ConfigFile, ConfigError>); 3] = [
        ("load", store.load()),
        (
            "update",
            store.update(|s| s.adaptive_compaction_min_turns = 9),
        ),
        ("set", store.set("adaptive_compaction_min_turns", "9")),
    ];
    for (what, result) in attempts {
        let err = result.expect_err(what);
        assert!(expected(&err), "{what}: unexpected error {err:?}");
        let text = err.to_string();
        assert!(text.contains(&file.display().to_string()), "{what}: {text}");
        for m in mentions {
            assert!(text.contains(m), "{what}: {text} lacks {m}");
        }
    }
    assert_eq!(std::fs::read(file).expect("read after"), before);
}

#[test]
fn truncated_json_is_a_syntax_error_with_position() {
    let (_dir, store, file) = store();
    let good = ConfigFile::defaults(&file).render();
    std::fs::write(&file, &good[..good.len() / 2]).expect("write");
    check_refused(
        &store,
        &file,
        |e| matches!(e, ConfigError::Syntax { .. }),
        &["invalid JSON at line"],
    );
}

#[test]
fn a_wrong_type_names_key_value_and_expected_type() {
    let (_dir, store, file) = store();
    std::fs::write(
        &file,
        br#"{"other": 1, "adaptive_compaction_retention_turns": "two"}"#,
    )
    .expect("write");
    check_refused(
        &store,
        &file,
        |e| {
            matches!(
                e,
                ConfigError::WrongType {
                    key: "adaptive_compaction_retention_turns",
                    ..
                }
            )
        },
        &[
            "adaptive_compaction_retention_turns",
            "\"two\"",
            "an integer",
        ],
    );
}

#[test]
fn null_is_a_wrong_type_not_a_missing_key() {
    let (_dir, store, file) = store();
    let text = String::from_utf8(ConfigFile::defaults(&file).render())
        .expect("utf-8")
        .replace("0.75", "null");
    std::fs::write(&file, text).expect("write");
    check_refused(
        &store,
        &file,
        |e| {
            matches!(
                e,
                ConfigError::WrongType {
                    key: "adaptive_compaction_threshold",
                    ..
                }
            )
        },
        &["adaptive_compaction_threshold", "null", "a number"],
    );
}

#[test]
fn a_value_breaking_a_settings_rule_is_refused() {
    let (_dir, store, file) = store();
    std::fs::write(&file, br#"{"adaptive_compaction_token_floor": -5}"#).expect("write");
    check_refused(
        &store,
        &file,
        |e| matches!(e, ConfigError::Invalid { .. }),
        &["adaptive_compaction_token_floor", "-5"],
    );
}

#[test]
fn a_ten_megabyte_file_is_refused_before_reading() {
    let (_dir, store, file) = store();
    let mut big = b"{\"note\": \"".to_vec();
    big.resize(10 * 1024 * 1024, b'x');
    big.extend_from_slice(b"\"}");
    std::fs::write(&file, &big).expect("write");
    check_refused(
        &store,
        &file,
        |e| matches!(e, ConfigError::TooLarge { limit, .. } if *limit == MAX_FILE_BYTES),
        &["10485762 bytes"],
    );
}

#[test]
fn a_directory_in_the_file_place_is_refused_and_left_alone() {
    let (_dir, store, file) = store();
    std::fs::create_dir(&file).expect("mkdir");
    std::fs::write(file.join("inside"), b"keep").expect("write inside");
    for result in [
        store.load(),
        store.update(|s| s.adaptive_compaction_min_turns = 9),
    ] {
        let err = result.expect_err("a directory is not a settings file");
        assert!(
            matches!(
                err,
                ConfigError::NotAFile {
                    found: "a directory",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains(&file.display().to_string()));
    }
    assert!(file.is_dir());
    assert_eq!(std::fs::read(file.join("inside")).expect("read"), b"keep");
}

#[test]
fn load_or_last_good_falls_back_with_the_error_as_a_warning() {
    let (_dir, store, file) = store();
    let good = store
        .update(|s| s.adaptive_compaction_min_turns = 7)
        .expect("update");
    std::fs::write(&file, b"{ not json").expect("corrupt");

    let loaded = store.load_or_last_good(Some(&good));
    assert_eq!(loaded.file.origin(), Origin::LastGood);
    assert_eq!(loaded.file.settings().adaptive_compaction_min_turns, 7);
    assert!(matches!(loaded.warning, Some(ConfigError::Syntax { .. })));

    let loaded = store.load_or_last_good(None);
    assert_eq!(loaded.file.origin(), Origin::Defaults);
    assert_eq!(
        loaded.file.settings(),
        &compaction_core::Settings::default()
    );
    assert!(loaded.warning.is_some());
    assert_eq!(std::fs::read(&file).expect("read"), b"{ not json");

    std::fs::write(&file, good.render()).expect("repair");
    let loaded = store.load_or_last_good(None);
    assert!(loaded.warning.is_none());
    assert_eq!(loaded.file.origin(), Origin::Read);
}

/// A hand-written file that needs no backfill is never rewritten, even by a no-op update.
#[test]
fn a_complete_hand_written_file_is_not_rewritten() {
    let (_dir, store, file) = store();
    let hand = "{\"adaptive_compaction_threshold\":1,\n\t\"enable_adaptive_compaction\" : true,\"compaction_summarizer_model\":\"s\",\"adaptive_compaction_retention_turns\":2,\"adaptive_compaction_min_turns\":4,\"adaptive_compaction_token_floor\":30000,\"adaptive_compaction_token_ceiling\":100000,\"adaptive_compaction_decision_model\":\"d\", \"x\": [1e5]}";
    std::fs::write(&file, hand).expect("write");
    let loaded = store.load().expect("load");
    assert_eq!(loaded.origin(), Origin::Read);
    store.update(|_| {}).expect("no-op update");
    store
        .set("adaptive_compaction_threshold", "1.0")
        .expect("same value");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), hand);
}

/// Missing keys are backfilled to disk after the existing keys, whose order is kept.
#[test]
fn missing_keys_are_backfilled_to_disk_once() {
    let (_dir, store, file) = store();
    std::fs::write(
        &file,
        br#"{"desktop_theme": "dark", "adaptive_compaction_retention_turns": 3}"#,
    )
    .expect("write");
    let first = store.load().expect("load");
    assert_eq!(first.origin(), Origin::Backfilled);
    assert_eq!(first.backfilled().len(), 7);
    let on_disk = std::fs::read(&file).expect("read");
    insta::assert_snapshot!(String::from_utf8_lossy(&on_disk));
    let second = store.load().expect("reload");
    assert_eq!(second.origin(), Origin::Read);
    assert_eq!(std::fs::read(&file).expect("read"), on_disk);
}

#[test]
fn set_parses_to_the_key_type_and_extra_keys_keep_their_place() {
    let (_dir, store, file) = store();
    std::fs::write(
        &file,
        br#"{"summarizer_base_url": "http://a", "enable_adaptive_compaction": true}"#,
    )
    .expect("write");
    store
        .set("enable_adaptive_compaction", "false")
        .expect("set bool");
    store
        .set_extra("summarizer_base_url", "http://b".into())
        .expect("set extra");
    let loaded = store
        .set("adaptive_compaction_threshold", "0.5")
        .expect("set float");
    assert!(!loaded.effective().enabled);
    assert_eq!(loaded.effective().threshold, 0.5);
    let keys: Vec<&String> = loaded.raw().keys().collect();
    assert_eq!(keys[0], "summarizer_base_url");
    assert_eq!(keys[1], "enable_adaptive_compaction");
    assert!(matches!(
        store.set_extra("adaptive_compaction_threshold", 1.into()),
        Err(ConfigError::ReservedKey { .. })
    ));
    let before = std::fs::read(&file).expect("read");
    let err = store
        .set("adaptive_compaction_token_floor", "200000")
        .expect_err("floor above ceiling");
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err:?}");
    assert_eq!(err.key(), Some("adaptive_compaction_token_floor"));
    assert_eq!(std::fs::read(&file).expect("read"), before);
}

#[test]
fn set_many_validates_the_values_together_and_writes_all_or_nothing() {
    let (_dir, store, file) = store();
    store.load().expect("create");
    // Each alone breaks floor <= ceiling; together they hold.
    let loaded = store
        .set_many([
            ("adaptive_compaction_token_floor", "200000"),
            ("adaptive_compaction_token_ceiling", "300000"),
        ])
        .expect("set together");
    assert_eq!(loaded.effective().token_floor, 200_000);
    assert_eq!(loaded.effective().token_ceiling, 300_000);
    let before = std::fs::read(&file).expect("read");
    let err = store
        .set_many([
            ("adaptive_compaction_threshold", "0.2"),
            ("adaptive_compaction_min_turns", "four"),
        ])
        .expect_err("a bad value");
    assert_eq!(err.key(), Some("adaptive_compaction_min_turns"));
    assert!(err.to_string().contains("expected an integer"), "{err}");
    let err = store
        .set_many([("adaptive_compaction_threshold", "1.5")])
        .expect_err("out of range");
    assert_eq!(err.key(), Some("adaptive_compaction_threshold"));
    assert_eq!(
        std::fs::read(&file).expect("read"),
        before,
        "nothing written"
    );
}
