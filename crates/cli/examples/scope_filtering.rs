//! How much scope filtering shrinks the summarizer prompt on the bundled demo conversation.
//!
//! `cargo run --release -p adaptive-compaction-cli --example scope_filtering`
//!
//! The demo is replayed into a SQLite session with compaction disabled, then the summarizer
//! prompt for a compaction at the last turn (K = 2) is built twice: as the engine builds it
//! (search-pipeline events filtered out by their isolation scope) and with every scope erased.
#![allow(clippy::print_stdout)]

use std::sync::Arc;

use cli::replay::Replay;
use compaction_core::testing::{
    RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{
    CharsPerToken, Engine, SessionKey, SessionStore, Settings, TokenEstimator, plan_compaction,
};
use session_store::SqliteStore;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let turns = cli::transcript::parse(
        "demo",
        include_str!("../demo/research-conversation.jsonl").as_bytes(),
    )?;
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path().join("demo.db"))?);
    let clock = Arc::new(SteppingClock::starting_at(1_800_000_000));
    let ids = Arc::new(SequentialIds::default());
    let engine = Engine::builder(
        Arc::new(ScriptedDecisionModel::constant(0.0)),
        Arc::new(RecordingSummarizer::new()),
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .settings(Settings {
        enable_adaptive_compaction: false,
        ..Settings::default()
    })
    .build()?;
    let key = SessionKey::new("zocrates", "demo", "scope");
    let mut replay = Replay::start(engine, store.clone(), clock, ids, key.clone()).await?;
    for turn in &turns {
        replay.turn(turn).await?;
    }
    let events = store.load(&key).await?.events;
    let filtered = plan_compaction(&events, 2)
        .ok_or("no plan")?
        .summarizer_prompt();
    let mut unscoped = events.clone();
    for e in &mut unscoped {
        e.isolation_scope = None;
    }
    let unfiltered = plan_compaction(&unscoped, 2)
        .ok_or("no plan")?
        .summarizer_prompt();
    let (f, u) = (filtered.chars().count(), unfiltered.chars().count());
    println!(
        "demo conversation: {} turns, {} events ({} scoped)",
        turns.len(),
        events.len(),
        events.iter().filter(|e| !e.is_unscoped()).count()
    );
    println!(
        "summarizer prompt without scope filtering: {u} chars (~{} tokens)",
        CharsPerToken.estimate(&unfiltered)
    );
    println!(
        "summarizer prompt with scope filtering:    {f} chars (~{} tokens)",
        CharsPerToken.estimate(&filtered)
    );
    println!("reduction: {:.1}%", 100.0 * (u - f) as f64 / u as f64);
    Ok(())
}
