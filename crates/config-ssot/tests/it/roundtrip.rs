//! proptest: load → save → load is the identity for any valid settings plus arbitrary unknown
//! keys in any position, and a file this crate wrote re-renders byte-identically.

use compaction_core::KEYS;
use compaction_core::Settings;
use config_ssot::{ConfigStore, Origin};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn valid_settings() -> impl Strategy<Value = Settings> {
    let slug = "[a-z0-9]{1,8}(/[a-z0-9.:_-]{1,12}){0,2}";
    (
        any::<bool>(),
        slug,
        0i64..20,
        0i64..40,
        (0i64..200_000, 0i64..200_000),
        0.0f64..=1.0,
        "\\PC{0,6}[a-z]\\PC{0,6}",
    )
        .prop_map(
            |(enable, summarizer, k, min, (a, b), tau, decision)| Settings {
                enable_adaptive_compaction: enable,
                compaction_summarizer_model: summarizer,
                adaptive_compaction_retention_turns: k,
                adaptive_compaction_min_turns: min,
                adaptive_compaction_token_floor: a.min(b),
                adaptive_compaction_token_ceiling: a.max(b),
                adaptive_compaction_threshold: tau,
                adaptive_compaction_decision_model: decision,
            },
        )
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,12}|[\\x00-\\x1f\"\\\\]{0,4}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("\\PC{0,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// The whole object: the spec keys and unknown keys, shuffled into an arbitrary order.
fn file_map() -> impl Strategy<Value = Map<String, Value>> {
    (
        valid_settings(),
        prop::collection::vec(("\\PC{0,16}", json_value()), 0..6),
    )
        .prop_flat_map(|(settings, extras)| {
            let Value::Object(spec) = serde_json::to_value(&settings).expect("settings to JSON")
            else {
                unreachable!("settings serialize to an object")
            };
            let mut entries: Vec<(String, Value)> = spec.into_iter().collect();
            for (k, v) in extras {
                if !KEYS.contains(&k.as_str()) && !entries.iter().any(|(e, _)| *e == k) {
                    entries.push((k, v));
                }
            }
            Just(entries).prop_shuffle()
        })
        .prop_map(|entries| entries.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A file written by this crate loads to exactly its content, is not rewritten by a load,
    /// and saving it again (a no-op update, then a real one undone) reproduces its bytes.
    #[test]
    fn load_save_load_is_the_identity(map in file_map()) {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("zocrates_config.json");
        let store = ConfigStore::open(file.clone());
        std::fs::write(&file, serde_json::to_vec(&map).expect("to JSON")).expect("write");

        let first = store.load().expect("load a valid file");
        prop_assert_eq!(first.origin(), Origin::Read);
        prop_assert_eq!(first.raw(), &map);
        let bytes = first.render();

        // Save: flip the master toggle and back, so two real atomic writes happen.
        let original = first.settings().enable_adaptive_compaction;
        store.update(|s| s.enable_adaptive_compaction = !original).expect("flip");
        let saved = store.update(|s| s.enable_adaptive_compaction = original).expect("flip back");
        prop_assert_eq!(saved.raw(), &map);
        prop_assert_eq!(std::fs::read(&file).expect("read"), bytes.clone());

        let second = store.load().expect("reload");
        prop_assert_eq!(second.origin(), Origin::Read);
        prop_assert_eq!(second.raw(), &map);
        prop_assert_eq!(second.settings(), first.settings());
        prop_assert_eq!(second.render(), bytes);
    }
}
