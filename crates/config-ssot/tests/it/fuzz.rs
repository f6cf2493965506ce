//! Fuzz of the config parser (issue 20): arbitrary and mutated settings files never panic
//! `read` or `load`; a refused file is named and left byte-identical.
//!
//! Bounded for CI (64 cases each); a longer run:
//! `PROPTEST_CASES=20000 cargo test -p adaptive-compaction-config-ssot --test it fuzz`.

use std::time::Duration;

use proptest::prelude::*;

use crate::support::store;

/// A valid file to mutate.
const VALID: &str = "{\n  \"enable_adaptive_compaction\": true,\n  \"adaptive_compaction_threshold\": 0.75,\n  \"adaptive_compaction_min_turns\": 4,\n  \"decision_adapter\": \"offline\"\n}\n";

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64)
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6).prop_map(|edits| {
            let mut bytes = VALID.as_bytes().to_vec();
            for (at, b) in edits {
                let at = at % bytes.len();
                bytes[at] = b;
            }
            bytes
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// `read` and `load` on any content: valid settings, or an error naming the file with
    /// the file unchanged.
    #[test]
    fn fuzz_config_parser_never_panics(bytes in mutated()) {
        let (_dir, store, file) = store();
        std::fs::write(&file, &bytes).expect("write");
        if let Err(e) = store.read(Duration::from_millis(10), |_| {}) {
            prop_assert!(e.to_string().contains("zocrates_config.json"), "{}", e);
        }
        match store.load() {
            Ok(loaded) => prop_assert!(loaded.settings().effective().is_ok()),
            Err(e) => {
                prop_assert!(e.to_string().contains("zocrates_config.json"), "{}", e);
                prop_assert_eq!(std::fs::read(&file).expect("read"), bytes);
            }
        }
    }
}
