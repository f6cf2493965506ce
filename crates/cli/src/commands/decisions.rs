//! `compaction decisions`: the decisions shadow mode recorded for a session
//! (`adaptive_compaction_shadow`), read from the native store (opened for reading only).

use std::path::{Path, PathBuf};

use compaction_core::DecisionRecord;

use super::args::SessionArgs;
use super::output::emit;
use crate::database::{Access, ExistingStore, open_existing_file};
use crate::error::CliError;
use crate::{shadow, wiring};

#[derive(Debug, clap::Args)]
pub(super) struct DecisionsArgs {
    #[command(flatten)]
    target: SessionArgs,
    /// The native session database.
    #[arg(long, value_name = "PATH")]
    db: PathBuf,
    /// One JSON object per decision instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `compaction decisions`.
pub(super) fn run(args: &DecisionsArgs) -> Result<(), CliError> {
    let decisions = recorded(&args.target, &args.db)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        for d in &decisions {
            let line = serde_json::to_string(d).map_err(|e| CliError::Other(e.to_string()))?;
            emit(&mut out, &line)?;
        }
        return Ok(());
    }
    emit(&mut out, shadow::decisions_table(&decisions).trim_end())
}

/// The shadow decisions of a stored native session (opened for reading only); `tune` reads
/// them too.
pub(super) fn recorded(
    target: &SessionArgs,
    db: &Path,
) -> Result<Vec<DecisionRecord>, CliError> {
    if !db.exists() {
        return Err(CliError::Database(format!(
            "{}: no such database file",
            wiring::shown(db)
        )));
    }
    let key = target.key();
    let store = match open_existing_file(db, Access::Read)? {
        ExistingStore::Native(store) => store,
        ExistingStore::Adk(_) => {
            return Err(CliError::Database(format!(
                "{}: an ADK database keeps no shadow decisions (they live in the native store)",
                wiring::shown(db)
            )));
        }
        // A file never opens as PostgreSQL.
        ExistingStore::AdkPostgres(_) => {
            return Err(CliError::Database(format!(
                "{}: `decisions` and `tune` read a database file",
                wiring::shown(db)
            )));
        }
        ExistingStore::Postgres(store) => {
            return Err(CliError::Database(format!(
                "{}: `decisions` and `tune` read a database file",
                store.database()
            )));
        }
    };
    store
        .blocking()
        .decisions(&key)
        .map_err(|e| CliError::Database(e.to_string()))
}
