//! Fuzz of the transcript parser (issue 20): arbitrary and mutated transcripts never panic
//! `cli::transcript::parse`; every refusal names the source and, for a bad line, its number.
//!
//! Bounded for CI (256 cases); a longer run: `PROPTEST_CASES=50000 cargo test -p adaptive-compaction-cli --test fuzz`.

use proptest::prelude::*;

const VALID: &str = r#"{"user": "What is SEI?", "assistant": "A layer.", "prompt_tokens": 1200, "tools": [{"name": "search_library", "args": {"q": "sei"}, "result": "Synthesis."}], "findings_summary": "SEI."}"#;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256)
}

fn transcript() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6).prop_map(|edits| {
            let mut bytes = format!("{VALID}\n{VALID}\n").into_bytes();
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

    /// Any bytes: turns with a non-blank user text, or an error that names `t.jsonl`.
    #[test]
    fn fuzz_transcript_parser_never_panics(bytes in transcript()) {
        match cli::transcript::parse("t.jsonl", bytes.as_slice()) {
            Ok(turns) => {
                prop_assert!(!turns.is_empty());
                prop_assert!(turns.iter().all(|t| !t.user.trim().is_empty()));
            }
            Err(e) => prop_assert!(e.to_string().starts_with("t.jsonl"), "{}", e),
        }
    }
}
