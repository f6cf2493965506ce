//! `compaction evaluate`: one post-turn evaluation on a stored session (native or Google ADK,
//! SQLite or PostgreSQL, operated on in place): the hook a non-Rust backend calls after a
//! turn closes. Prints the outcome; a store failure is exit 4.

use std::sync::Arc;

use compaction_core::{Outcome, SessionKey};

use super::args::{RunArgs, SessionArgs};
use super::output::{emit, emit_json};
use crate::database::{Access, Database, DbArg, ExistingStore, open_existing};
use crate::error::{Cause, CliError};
use crate::registry::Registry;
use crate::replay::OutcomeSummary;
use crate::wiring::{self, ProcessIds, SystemClock, Wiring, build_engine, init_logging};

#[derive(Debug, clap::Args)]
pub(super) struct EvaluateArgs {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// The session database: an existing native or Google ADK SQLite file, or a PostgreSQL
    /// URL postgres://user@host:port/dbname holding the native store or Google ADK's
    /// DatabaseSessionService tables (operated on in place).
    #[arg(long, value_name = "PATH|URL", value_parser = crate::database::parse_db, required_unless_present = "db_env")]
    db: Option<DbArg>,
    /// Read the PostgreSQL URL from the environment variable VAR (for a URL that holds a
    /// password).
    #[arg(long, value_name = "VAR", conflicts_with = "db")]
    db_env: Option<String>,
    #[command(flatten)]
    target: SessionArgs,
}

/// Runs `compaction evaluate`.
pub(super) async fn run(registry: &Registry, args: EvaluateArgs) -> Result<(), CliError> {
    let EvaluateArgs {
        run,
        db,
        db_env,
        target,
    } = args;
    let db = Database::required(db, db_env)?;
    let wiring = run.adapters.wire(registry)?;
    let store = open_existing(&db, Access::Write).await?;
    let (telemetry, guard, _) = wiring::telemetry(
        run.otlp
            .request()
            .map_err(|m| CliError::Other(Cause::new(m)))?,
    )?;
    init_logging(guard.as_ref());
    let engine = build_engine(
        &wiring,
        store.port(),
        Arc::new(SystemClock::default()),
        Arc::new(ProcessIds::default()),
        telemetry,
    )?;
    let key = target.key();
    let outcome = engine.evaluate_and_compact(&key).await;
    drop(guard);
    let warnings = scope_warnings(&store, &key).await;
    for warning in &warnings {
        eprintln!("warning: session {key}: {warning}");
    }
    print_outcome(&wiring, &key, &outcome, &warnings, run.json)?;
    if let Outcome::StoreFailed { failure } = outcome {
        return Err(CliError::database(failure));
    }
    Ok(())
}

/// The outcome as one JSON record, or one line after the banner.
fn print_outcome(
    wiring: &Wiring,
    key: &SessionKey,
    outcome: &Outcome,
    warnings: &[String],
    json: bool,
) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let summary = OutcomeSummary::of(outcome);
    let probability = outcome.probability().map(|p| p.value());
    if json {
        let record = serde_json::json!({
            "banner": wiring.banner(),
            "session": key.to_string(),
            "outcome": outcome.label(),
            "gate": summary.gate,
            "probability": probability,
            "verdict": summary.verdict,
            "compaction_event_id": outcome.compaction().map(|c| c.event.id.clone()),
            "detail": summary.detail,
            "warnings": warnings,
        });
        return emit_json(&mut out, &record.to_string());
    }
    emit(&mut out, &wiring.banner())?;
    let p = probability.map_or_else(|| "-".to_owned(), |p| format!("{p:.2}"));
    let event = outcome
        .compaction()
        .map(|c| format!(", compaction event {}", c.event.id))
        .unwrap_or_default();
    emit(
        &mut out,
        &format!(
            "{key}: {} (gate {}, p {p}, verdict {}{event}): {}",
            outcome.label(),
            summary.gate,
            summary.verdict,
            summary.detail
        ),
    )
}

/// What a person should know about the session besides the outcome: on an ADK file, user
/// messages ADK's Runner filed inside a pipeline scope no `finish_task` closed (one outline
/// read). A failed read is no warning; the engine already reported the store.
async fn scope_warnings(store: &ExistingStore, key: &SessionKey) -> Vec<String> {
    let found = match store {
        ExistingStore::Adk(store) => store.blocking().scoped_user_messages(key).ok(),
        #[cfg(feature = "postgres")]
        ExistingStore::AdkPostgres(store) => store.scoped_user_messages(key).await.ok(),
        _ => None,
    };
    found
        .filter(|found| !found.is_empty())
        .map(|found| found.to_string())
        .into_iter()
        .collect()
}
