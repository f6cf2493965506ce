//! Issue 30: every compaction carries a receipt, and `compaction inspect` shows it — in text
//! (the headline, each correction, the dropped findings counted by reason) and with `--json`
//! (`compaction_history[].receipt {kept, corrected, dropped}`), on the demo's real session.

mod common;

use common::compaction;
use serde_json::Value;

fn demo_db(dir: &std::path::Path) -> std::path::PathBuf {
    let db = dir.join("demo.db");
    let out = compaction()
        .args(["demo", "--session", "receipts", "--db"])
        .arg(&db)
        .output()
        .expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    db
}

fn inspect(db: &std::path::Path, json: bool) -> String {
    let mut command = compaction();
    command
        .args(["inspect", "--user", "demo", "--session", "receipts", "--db"])
        .arg(db);
    if json {
        command.arg("--json");
    }
    let out = command.output().expect("run inspect");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn inspect_shows_each_compaction_receipt_in_text_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = demo_db(dir.path());

    let text = inspect(&db, false);
    let history = text
        .split("\nAssembled context for the next turn:")
        .next()
        .expect("a history section");
    insta::with_settings!({filters => vec![
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "[timestamp]"),
        (r"(?m)^[0-9a-f]+-[0-9a-f]+-\d+ ", "[event-id] "),
        (r"/[^ ]*demo\.db", "[db]"),
    ]}, {
        insta::assert_snapshot!("inspect_receipt_text", history);
    });

    let value: Value = serde_json::from_str(&inspect(&db, true)).expect("one JSON object");
    let entries = value["compaction_history"].as_array().expect("an array");
    assert!(!entries.is_empty(), "{value}");
    // The receipts as the JSON carries them (ids and times left out: they change per run).
    let receipts: Vec<Value> = entries
        .iter()
        .map(|e| {
            let r = &e["receipt"];
            assert!(
                r["kept"].as_u64().is_some(),
                "every compaction has a receipt: {e}"
            );
            serde_json::json!({"subsumed": e["subsumed"], "receipt": r})
        })
        .collect();
    insta::assert_snapshot!(
        "inspect_receipt_json",
        serde_json::to_string_pretty(&receipts).expect("json")
    );
    // The text and the JSON agree on the counts.
    for e in entries {
        let r = &e["receipt"];
        let headline = format!(
            "{} findings kept, {} corrected, {} dropped",
            r["kept"],
            r["corrected"].as_array().map_or(0, Vec::len),
            r["dropped"].as_array().map_or(0, Vec::len)
        );
        assert!(text.contains(&headline), "{headline}\n{text}");
    }
}
