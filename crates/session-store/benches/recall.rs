//! Lossless recall on the SQLite store, hand-timed so that the figures compared are measured
//! side by side in one run (medians and p95 of single calls, interleaved):
//! - `search`: a two-word query on a 10,000-event session (research turns whose texts draw
//!   from a 400-word vocabulary), limit 10;
//! - `expand`: the events of a compaction covering 50 turns (300 events);
//! - `append`: one event, with the recall index against the same store without it (the
//!   `recall_text` table replaced by a view whose inserts do nothing, so no text row and no
//!   FTS5 update), alternating between the two files.
//!
//! Run: `cargo bench -p adaptive-compaction-session-store --bench recall`
#![allow(clippy::print_stdout)]

use std::time::Instant;

use compaction_core::testing::EventFactory;
use compaction_core::{RecallQuery, Revision, SessionKey};
use session_store::blocking::SqliteStore;

#[path = "common/recall_fixture.rs"]
mod fixture;

use fixture::{Words, stats, turn};

fn fill(store: &SqliteStore, key: &SessionKey, turns: usize) -> (Revision, String) {
    store
        .create_session(key, Default::default())
        .expect("create");
    let mut revision = Revision(0);
    let compaction = fixture::history(turns, |e| {
        revision = store.append_event(key, revision, e).expect("append");
    });
    (revision, compaction)
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("recall.db")).expect("open");
    let key = SessionKey::new("bench", "u", "s");
    let (_, compaction) = fill(&store, &key, 1_667);
    let events = store.header(&key).expect("header").revision.0;
    // A common pair (each word in about half of the events) and a selective pair.
    let common = RecallQuery::parse("plating onset").expect("query");
    let rare = RecallQuery::parse("w17 w230").expect("query");
    let matched = |q: &RecallQuery| store.search(&key, q, 100).expect("search").len();
    let (common_hits, rare_hits) = (matched(&common), matched(&rare));
    let expanded = store.expand(&key, &compaction).expect("expand").len();
    let (mut search, mut selective, mut expand) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..1_000 {
        let t = Instant::now();
        std::hint::black_box(store.search(&key, &common, 10).expect("search"));
        search.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(store.search(&key, &rare, 10).expect("search"));
        selective.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(store.expand(&key, &compaction).expect("expand"));
        expand.push(t.elapsed());
    }
    let (p50, p95) = stats(search);
    println!(
        "search 'plating onset', {events} events, {common_hits}+ matches, limit 10: median {p50:?}, p95 {p95:?}"
    );
    let (p50, p95) = stats(selective);
    println!(
        "search 'w17 w230', {events} events, {rare_hits} matches, limit 10: median {p50:?}, p95 {p95:?}"
    );
    let (p50, p95) = stats(expand);
    println!("expand, 50 turns ({expanded} events): median {p50:?}, p95 {p95:?}");

    let with = SqliteStore::open(dir.path().join("with.db")).expect("open");
    let without = SqliteStore::open(dir.path().join("without.db")).expect("open");
    {
        let conn = rusqlite::Connection::open(dir.path().join("without.db")).expect("raw");
        conn.execute_batch(
            "DROP TRIGGER recall_text_insert; DROP TRIGGER recall_text_delete; \
             DROP TABLE recall_fts; DROP TABLE recall_text; \
             CREATE VIEW recall_text AS SELECT 0 AS id, 0 AS session_pk, 0 AS seq, '' AS text; \
             CREATE TRIGGER recall_text_nothing INSTEAD OF INSERT ON recall_text BEGIN SELECT 1; END;",
        )
        .expect("no index");
    }
    fill(&with, &key, 100);
    fill(&without, &key, 100);
    // A second session in each file, appended to alternately.
    let key = SessionKey::new("bench", "u", "appended");
    with.create_session(&key, Default::default())
        .expect("create");
    without
        .create_session(&key, Default::default())
        .expect("create");
    let (mut rev_with, mut rev_without) = (Revision(0), Revision(0));
    let (mut f, mut words) = (EventFactory::starting_at(1_800_000_000.0), Words(11));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for n in 0..500 {
        for e in turn(&mut f, &mut words, 1_000 + n) {
            let t = Instant::now();
            rev_with = with.append_event(&key, rev_with, &e).expect("append");
            a.push(t.elapsed());
            let t = Instant::now();
            rev_without = without.append_event(&key, rev_without, &e).expect("append");
            b.push(t.elapsed());
        }
    }
    let ((a50, a95), (b50, b95)) = (stats(a), stats(b));
    println!("append with the index: median {a50:?}, p95 {a95:?}");
    println!("append without it:     median {b50:?}, p95 {b95:?}");
    println!(
        "ratio of medians: {:.2}",
        a50.as_secs_f64() / b50.as_secs_f64()
    );
}
