//! Transcripts as data: every `tests/transcripts/*.jsonl` is replayed on the offline models and
//! the spec defaults, and what a person sees — the replay's table, then `inspect`'s history
//! with each receipt and the assembled context with its summary — is a snapshot. Adding a case is dropping a transcript
//! (invented text, never an evaluation session's) into the directory.

mod common;

use std::path::Path;

use common::{compaction, offline_replay, success};

fn replay_then_inspect(transcript: &Path) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    let replay = offline_replay(transcript)
        .args(["--session", "case", "--db"])
        .arg(&db)
        .env("ZOTERO_DATA_DIR", dir.path())
        .output()
        .expect("run replay");
    let replayed = success("replay", &replay);
    // The table; the assembled context it prints next is `inspect`'s, below.
    let table = replayed
        .split("\nFinal assembled context")
        .next()
        .unwrap_or_default();
    let inspect = compaction()
        .args(["inspect", "--user", "replay", "--session", "case", "--db"])
        .arg(&db)
        .env("ZOTERO_DATA_DIR", dir.path())
        .output()
        .expect("run inspect");
    let inspect = success("inspect", &inspect);
    format!("$ compaction replay\n{table}\n$ compaction inspect\n{inspect}")
}

#[test]
fn each_transcript_replays_to_its_snapshot() {
    insta::glob!("transcripts/*.jsonl", |path| {
        let shown = replay_then_inspect(path);
        insta::with_settings!({filters => vec![
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[timestamp]"),
            (r"\b[0-9a-f]{8,}-[0-9a-f]+-\d+\b", "[event-id]"),
            (r"inv-\d{4}-[0-9A-Za-z-]+", "[invocation]"),
            (r"/[^ \n]*sessions\.db", "[db]"),
            (r"\d+(\.\d+)? ?ms\b", "[ms]"),
        ]}, {
            insta::assert_snapshot!(shown);
        });
    });
}
