//! Lossless recall on `PostgresStore`, hand-timed like the SQLite recall bench (same
//! generated history: 10,003 events, texts from a 400-word vocabulary, one compaction over the
//! first 50 turns), single calls interleaved so compared figures share the machine's load:
//! - `search`: a common and a selective two-word query, limit 10, right after the fill (the
//!   GIN index's pending list still full) and again after `VACUUM ANALYZE` (what autovacuum
//!   does soon after such a fill);
//! - `expand`: the events of the 50-turn compaction;
//! - `append`: one event, with the index, against a schema whose GIN and turn-start indexes
//!   are dropped (the vector still computed and stored), and against one that also stores no
//!   vector (a `BEFORE INSERT` trigger nulls it: a trigger's own cost, so this baseline is a
//!   little slow), each event to all three in turn, the order reversed every other event.
//!
//! Needs `COMPACTION_TEST_POSTGRES_URL` (`cargo xtask pg start`); without it the bench says so
//! and measures nothing. Its schemas are dropped at the end.
//!
//! Run: `cargo bench -p adaptive-compaction-session-store --features postgres --bench recall_postgres`
#![allow(clippy::print_stdout)]

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use compaction_core::testing::EventFactory;
use compaction_core::{RecallQuery, Revision, SessionKey, SessionStore};
use serde_json::Map;
use session_store::{PostgresOptions, PostgresStore};
use tokio::runtime::Runtime;

#[path = "common/recall_fixture.rs"]
mod fixture;

use fixture::{Words, stats, turn};

use test_data::pg::URL_VAR;

/// Fills a new session of `turns` generated turns; returns the compaction's id.
fn fill(rt: &Runtime, store: &PostgresStore, key: &SessionKey, turns: usize) -> String {
    rt.block_on(store.create_session(key, Map::new()))
        .expect("create");
    let mut events = Vec::new();
    let compaction = fixture::history(turns, |e| events.push(e.clone()));
    rt.block_on(async {
        for (i, e) in events.into_iter().enumerate() {
            store
                .append(key, Revision(i as u64), e)
                .await
                .expect("append");
        }
    });
    compaction
}

fn searches(rt: &Runtime, store: &PostgresStore, key: &SessionKey, compaction: &str, when: &str) {
    let common = RecallQuery::parse("plating onset").expect("query");
    let rare = RecallQuery::parse("w17 w230").expect("query");
    let matched = |q: &RecallQuery| {
        rt.block_on(store.search(key, q, 100))
            .expect("search")
            .len()
    };
    let (common_hits, rare_hits) = (matched(&common), matched(&rare));
    let (mut search, mut selective, mut expand) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..300 {
        for (q, samples) in [(&common, &mut search), (&rare, &mut selective)] {
            let t = Instant::now();
            std::hint::black_box(rt.block_on(store.search(key, q, 10)).expect("search"));
            samples.push(t.elapsed());
        }
        let t = Instant::now();
        std::hint::black_box(rt.block_on(store.expand(key, compaction)).expect("expand"));
        expand.push(t.elapsed());
    }
    let expanded = rt.block_on(store.expand(key, compaction)).expect("expand");
    let (p50, p95) = stats(search);
    println!(
        "{when}: search 'plating onset', {common_hits}+ matches, limit 10: median {p50:?}, p95 {p95:?}"
    );
    let (p50, p95) = stats(selective);
    println!(
        "{when}: search 'w17 w230', {rare_hits} matches, limit 10: median {p50:?}, p95 {p95:?}"
    );
    let (p50, p95) = stats(expand);
    println!(
        "{when}: expand, 50 turns ({} events): median {p50:?}, p95 {p95:?}",
        expanded.len()
    );
}

/// Single appends to each store in turn (the order reversed every other event), one
/// median each, and each median's ratio to the last store's.
fn appends(rt: &Runtime, stores: &[(&str, &PostgresStore)]) {
    let key = SessionKey::new("bench", "u", "appended");
    let mut revisions = vec![Revision(0); stores.len()];
    for (_, store) in stores {
        rt.block_on(store.create_session(&key, Map::new()))
            .expect("create");
    }
    let (mut f, mut words) = (EventFactory::starting_at(1_800_000_000.0), Words(11));
    let mut samples = vec![Vec::new(); stores.len()];
    for n in 0..300 {
        for (k, e) in turn(&mut f, &mut words, 1_000 + n).into_iter().enumerate() {
            let mut order: Vec<usize> = (0..stores.len()).collect();
            if k % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let t = Instant::now();
                revisions[i] = rt
                    .block_on(stores[i].1.append(&key, revisions[i], e.clone()))
                    .expect("append");
                samples[i].push(t.elapsed());
            }
        }
    }
    let medians: Vec<_> = samples.into_iter().map(stats).collect();
    let base = medians.last().expect("stores").0.as_secs_f64();
    for ((name, _), (p50, p95)) in stores.iter().zip(medians) {
        println!(
            "append {name}: median {p50:?}, p95 {p95:?}, ratio of medians {:.2}",
            p50.as_secs_f64() / base
        );
    }
}

fn main() {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty()) else {
        println!(
            "SKIPPED the PostgreSQL recall benchmark: {URL_VAR} is unset (`cargo xtask pg start`)"
        );
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let schemas = [0, 1, 2].map(|i| format!("bench_recall{i}_{}_{nanos}", std::process::id()));
    let connect = |schema: &str| {
        rt.block_on(PostgresStore::connect_with(
            &url,
            PostgresOptions::default().schema(schema),
        ))
        .expect("connect")
    };
    let stores = schemas.clone().map(|s| connect(&s));
    let with = &stores[0];
    let (admin, connection) = rt
        .block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls))
        .expect("admin connection");
    rt.spawn(connection);
    let admin_sql = |sql: String| rt.block_on(admin.batch_execute(&sql)).expect("admin SQL");
    let no_indexes = "DROP INDEX events_recall; DROP INDEX events_turn_starts;";
    admin_sql(format!("SET search_path = {}; {no_indexes}", schemas[1]));
    admin_sql(format!(
        "SET search_path = {}; {no_indexes} \
         CREATE FUNCTION no_recall() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN NEW.recall := NULL; RETURN NEW; END $$; \
         CREATE TRIGGER no_recall BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION no_recall();",
        schemas[2]
    ));

    let key = SessionKey::new("bench", "u", "s");
    let started = Instant::now();
    let compaction = fill(&rt, with, &key, 1_667);
    let events = rt.block_on(with.header(&key)).expect("header").revision.0;
    println!(
        "fixture: {events} events appended in {:.1?}",
        started.elapsed()
    );
    searches(&rt, with, &key, &compaction, "after the fill");
    admin_sql(format!("VACUUM ANALYZE {}.events", schemas[0]));
    searches(&rt, with, &key, &compaction, "after VACUUM ANALYZE");

    for store in &stores {
        fill(&rt, store, &SessionKey::new("bench", "u", "warm"), 100);
    }
    // The same statistics for all three tables, so only the index differs.
    for schema in &schemas {
        admin_sql(format!("VACUUM ANALYZE {schema}.events"));
    }
    appends(
        &rt,
        &[
            ("with the index", &stores[0]),
            ("vector stored, no GIN or turn index", &stores[1]),
            ("no vector, no indexes (trigger)", &stores[2]),
        ],
    );
    for schema in &schemas {
        admin_sql(format!("DROP SCHEMA {schema} CASCADE"));
    }
}
