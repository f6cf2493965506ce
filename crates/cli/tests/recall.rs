//! `compaction recall` end to end: the built binary on the demo's SQLite file. A search finds
//! the folded turns with their text and summary, a compaction and a turn range come back
//! verbatim, bad input exits 3 or 4 with a message naming what is wrong, and the file is
//! never written (no `-wal`/`-shm`, same bytes).

mod common;

use std::path::Path;

use common::compaction;
use compaction_core::store_support::scan::expand_compaction;
use compaction_core::{SessionKey, compaction_history};
use serde_json::Value;
use session_store::blocking::SqliteStore;

fn demo(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("demo.db");
    let out = compaction()
        .args(["demo", "--session", "d1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    db
}

fn recall(db: &Path, args: &[&str]) -> std::process::Output {
    compaction()
        .args([
            "recall",
            "--app",
            "zocrates",
            "--user",
            "demo",
            "--session",
            "d1",
            "--db",
        ])
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &std::process::Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_demo_s_folded_turns_are_found_and_expanded_verbatim_without_writing_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    let before = std::fs::read(&db).unwrap();
    let key = SessionKey::new("zocrates", "demo", "d1");
    let events = SqliteStore::open_read_only(&db, Default::default())
        .unwrap()
        .get_session(&key)
        .unwrap()
        .events;
    let live = compaction_history(&events)
        .into_iter()
        .find(|c| !c.subsumed)
        .expect("the demo compacts");

    let hits = json(&recall(&db, &["--query", "plating", "--json"]));
    assert!(!hits.is_empty());
    for hit in &hits {
        for field in [
            "turn",
            "event_id",
            "author",
            "timestamp",
            "snippet",
            "text",
            "covered_by",
        ] {
            assert!(hit.get(field).is_some(), "{field} missing in {hit}");
        }
        assert!(
            hit["text"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("plating")
        );
        assert!(hit["snippet"].as_str().unwrap().contains("**"));
    }
    let folded: Vec<&Value> = hits
        .iter()
        .filter(|h| h["covered_by"] == live.event_id.as_str())
        .collect();
    assert!(
        folded
            .iter()
            .any(|h| (1..=8).contains(&h["turn"].as_u64().unwrap())),
        "{hits:#?}"
    );

    let expanded = json(&recall(&db, &["--compaction", &live.event_id, "--json"]));
    let want = expand_compaction(&events, &live.event_id).unwrap();
    let ids: Vec<&str> = expanded
        .iter()
        .map(|h| h["event_id"].as_str().unwrap())
        .collect();
    let want_ids: Vec<&str> = want.iter().map(|r| r.event.id.as_str()).collect();
    assert_eq!(ids, want_ids);
    let turn_two = json(&recall(&db, &["--turns", "2..2", "--json"]));
    assert!(turn_two.iter().all(|h| h["turn"] == 2) && !turn_two.is_empty());

    let listing = recall(&db, &["--query", "plating", "--limit", "2"]);
    let text = String::from_utf8(listing.stdout).unwrap();
    assert!(text.contains("folded into"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("turn ")).count(),
        2,
        "{text}"
    );

    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "recall wrote to the file"
    );
    for suffix in ["-wal", "-shm"] {
        let side = db.with_file_name(format!("demo.db{suffix}"));
        assert!(!side.exists(), "{} left behind", side.display());
    }
}

#[test]
fn bad_input_exits_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let db = demo(dir.path());
    let long = "x".repeat(501);
    let cases: [(&[&str], i32, &str); 9] = [
        (&["--query", "   "], 3, "the query is empty"),
        (&["--query", &long], 3, "at most 500"),
        (&["--query", "\"*-\""], 3, "holds no word"),
        (&["--query", "plating", "--limit", "0"], 3, "from 1 to 100"),
        (&["--turns", "5..2"], 2, "expected a turn range A..B"),
        (
            &["--compaction", "no-such-id"],
            4,
            "no compaction event \"no-such-id\"",
        ),
        (&["--turns", "1..999"], 4, "outside the session"),
        (
            &["--query", "plating", "--compaction", "x"],
            2,
            "cannot be used with",
        ),
        (&[], 2, "required"),
    ];
    for (args, code, message) in cases {
        let out = recall(&db, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(
            !stderr.to_lowercase().contains("fts5") && !stderr.contains("SQL"),
            "{stderr}"
        );
    }
    // FTS syntax is searched as plain words, never an SQL error.
    for query in [
        "\"plating",
        "plating*",
        "NEAR(plating onset)",
        "-plating",
        "plating OR",
    ] {
        let out = recall(&db, &["--query", query, "--json"]);
        assert!(
            out.status.success(),
            "{query}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = compaction()
        .args(["recall", "--session", "nope", "--query", "x", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}
