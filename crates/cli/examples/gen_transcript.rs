//! Writes a synthetic transcript of about N events to stdout (default 10,000), for measuring
//! `compaction replay` on long sessions.
//!
//! `cargo run --release -p adaptive-compaction-cli --example gen_transcript -- 10000 > big.jsonl`
#![allow(clippy::print_stdout)]

use serde_json::json;

fn main() {
    let target: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let mut events = 0usize;
    let mut turn = 0usize;
    let mut tokens = 14_000u64;
    while events < target {
        turn += 1;
        let topic = turn / 12;
        let research = turn.is_multiple_of(2);
        let mut line = json!({
            "user": format!("Topic {topic}: follow-up question {turn} on the measured capacity retention?"),
            "assistant": format!("For topic {topic}, turn {turn}: retention was {}% after {} cycles at 25 °C.", 70 + turn % 25, 100 * (turn % 9 + 1)),
            "prompt_tokens": tokens,
            "completion_tokens": 250,
        });
        if research {
            line["tools"] = json!([{ "name": "search_library", "args": {"query": format!("topic {topic} q{turn}")},
                "result": format!("Synthesis for turn {turn}: {}\n# Cited Sources\n1. Author{turn} et al. ({}). doi:10.1000/gen.{turn}", "Findings sentence with 12.5 mAh/g. ".repeat(20), 2000 + turn % 25) }]);
            line["pipeline"] = json!(
                (0..5)
                    .map(|s| format!("step {s} of turn {turn}: {}", "raw chunk text ".repeat(40)))
                    .collect::<Vec<_>>()
            );
            line["findings_summary"] =
                json!(format!("Turn {turn} found 12.5 mAh/g for topic {topic}."));
            events += 9;
            tokens += 7_000;
        } else {
            events += 2;
            tokens += 2_500;
        }
        println!("{line}");
    }
}
