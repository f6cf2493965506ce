//! Shadow mode end to end (issue 16): the bundled research conversation replayed with
//! `adaptive_compaction_shadow: true` records a decision at every opened gate and compacts
//! nothing; `compaction decisions` lists them and `compaction tune` chooses τ from them and
//! the turn labels, writing a reliability diagram.

mod common;

use common::compaction;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

fn demo_transcript() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("demo/research-conversation.jsonl")
}

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// The session key arguments of the replayed session.
const SESSION: [&str; 6] = [
    "--app",
    "zocrates",
    "--user",
    "replay",
    "--session",
    "shadowed",
];

fn shadow_replay(dir: &Path) -> (PathBuf, Vec<Value>) {
    let config = dir.join("shadow.json");
    std::fs::write(
        &config,
        json!({"adaptive_compaction_shadow": true, "decision_adapter": "offline",
               "summarizer_adapter": "offline"})
        .to_string(),
    )
    .unwrap();
    let db = dir.join("sessions.db");
    let stdout = ok(compaction()
        .arg("replay")
        .arg(demo_transcript())
        .args(["--config"])
        .arg(&config)
        .args(["--db"])
        .arg(&db)
        .args(["--session", "shadowed", "--json"])
        .output()
        .unwrap());
    let records = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (db, records)
}

#[test]
fn shadow_mode_records_decisions_and_tune_chooses_tau() {
    let dir = tempfile::tempdir().unwrap();
    let (db, records) = shadow_replay(dir.path());
    assert!(
        records[0]["banner"]
            .as_str()
            .unwrap()
            .contains("shadow mode: decisions are recorded, nothing is compacted"),
        "{}",
        records[0]
    );
    let turns: Vec<&Value> = records.iter().filter(|r| r.get("turn").is_some()).collect();
    assert_eq!(turns.len(), 22);
    assert!(
        turns
            .iter()
            .all(|r| r["outcome"] != "compressed" && r["outcome"] != "forced")
    );
    let shadowed = turns.iter().filter(|r| r["outcome"] == "shadowed").count();
    assert!(shadowed >= 10, "the gate opened {shadowed} times");
    let closing = records.last().unwrap();
    assert_eq!(closing["compactions"], 0, "{closing}");

    // `decisions` lists one row per opened gate, p beside the turn.
    let listed = ok(compaction()
        .arg("decisions")
        .args(["--db"])
        .arg(&db)
        .args(SESSION)
        .args(["--json"])
        .output()
        .unwrap());
    let decisions: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(decisions.len(), shadowed);
    assert!(decisions.iter().all(|d| d["probability"].is_f64()));
    let table = ok(compaction()
        .arg("decisions")
        .args(["--db"])
        .arg(&db)
        .args(SESSION)
        .output()
        .unwrap());
    assert!(table.starts_with("turn  revision"), "{table}");
    assert_eq!(table.lines().count(), shadowed + 1);

    // Labels: the conversation pivots at turns 10 and 16 (a CSV, as a reviewer would write).
    let labels = dir.path().join("labels.csv");
    let csv: String = std::iter::once("turn,label".to_owned())
        .chain((1..=22).map(|t| format!("{t},{}", t == 10 || t == 16)))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&labels, csv).unwrap();
    let png = dir.path().join("reliability.png");
    let report = ok(compaction()
        .arg("tune")
        .args(["--db"])
        .arg(&db)
        .args(SESSION)
        .args(["--labels"])
        .arg(&labels)
        .args(["--png"])
        .arg(&png)
        .output()
        .unwrap());
    assert!(
        report.contains(&format!("{shadowed} labelled decisions")),
        "{report}"
    );
    assert!(report.contains("best F1: τ = "), "{report}");
    assert!(report.contains("precision ≥ 0.90"), "{report}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    if let Ok(keep) = std::env::var("SHADOW_PNG_OUT") {
        std::fs::copy(&png, keep).unwrap();
    }
}

#[test]
fn bad_labels_are_named_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = shadow_replay(dir.path());
    let labels = dir.path().join("labels.csv");
    std::fs::write(&labels, "turn,label\n1,false\n2,maybe\n").unwrap();
    let output = compaction()
        .arg("tune")
        .args(["--db"])
        .arg(&db)
        .args(SESSION)
        .args(["--labels"])
        .arg(&labels)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("labels.csv:3: expected `turn,label`"),
        "{stderr}"
    );
}
