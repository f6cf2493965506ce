//! A Rust service adopting the engine: its own decision adapter, the engine, the async SQLite
//! store, the offline summarizer, the system clock and process ids — no test-support items.
//! Run: `cargo run -p adaptive-compaction-service --example custom_decision_adapter`.
#![allow(clippy::print_stdout)]

use std::sync::Arc;

use compaction_core::{
    AdapterError, DecisionAnswer, DecisionModel, Engine, EventBuilder, FailureKind, ModelInfo,
    ProbeRequest, SessionKey, SessionStore, Settings, async_trait, classified,
};
use service::{ProcessIds, SystemClock};
use session_store::SqliteStore;
use summarizer::{SummarizerConfig, build_summarizer};

/// The service's own model: compaction is warranted when the user says they are moving on.
struct MovingOn;

#[async_trait]
impl DecisionModel for MovingOn {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("in-house", "local", "moving-on-v1")
    }

    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        let latest = request.state.latest_turn.to_lowercase();
        if latest.is_empty() {
            return Err(classified(FailureKind::InvalidReply, "empty latest turn"));
        }
        let p = if latest.contains("moving on") {
            0.9
        } else {
            0.1
        };
        Ok(DecisionAnswer::new(p).with_served_model("moving-on-v1"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path().join("sessions.db"))?);
    let settings = Settings::default();
    let summarizer = build_summarizer(
        &settings.clone().effective()?,
        &SummarizerConfig::default(),
        |_| None,
    )?;
    let (clock, ids) = (
        Arc::new(SystemClock::default()),
        Arc::new(ProcessIds::default()),
    );
    let engine = Engine::builder(
        Arc::new(MovingOn),
        summarizer.summarizer,
        store.clone(),
        clock.clone(),
        ids.clone(),
    )
    .settings(settings)
    .build()?;

    let key = SessionKey::new("my-app", "user-1", "session-1");
    let mut revision = store
        .create_session(&key, Default::default())
        .await?
        .revision;
    let events = EventBuilder::new(clock.as_ref(), ids.as_ref(), "coordinator");
    for (i, query) in [
        "What limits fast charging?",
        "Why plating?",
        "And SEI growth?",
        "Thanks. Moving on: what about sodium-ion cost?",
    ]
    .iter()
    .enumerate()
    {
        let invocation = format!("inv-{i}");
        let reply = format!("An answer about {query}");
        let tokens = 40_000 + 10_000 * i as u64;
        for event in [
            events.user_query(&invocation, query),
            events.reply(&invocation, &reply, Some(tokens)),
        ] {
            revision = store.append(&key, revision, event).await?;
        }
        // The post-turn hook: after the turn's stream closed.
        let outcome = engine.evaluate_and_compact(&key).await;
        println!("turn {}: {outcome}", i + 1);
        if let Some(compaction) = outcome.compaction() {
            revision = compaction.revision;
        }
    }
    let context = store.load_context(&key).await?;
    println!(
        "next prompt: {} entries, summary live: {}",
        context.entries.len(),
        context.summary().is_some()
    );
    Ok(())
}
