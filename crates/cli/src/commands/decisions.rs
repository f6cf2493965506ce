//! `compaction decisions`: the decisions shadow mode recorded for a session
//! (`adaptive_compaction_shadow`), read from the native store (opened for reading only).

use std::path::{Path, PathBuf};

use compaction_core::DecisionRecord;

use super::args::SessionArgs;
use super::output::emit;
use crate::database::{Access, ExistingStore, open_existing_file};
use crate::error::{Cause, CliError};
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
            let line = serde_json::to_string(d).map_err(CliError::other)?;
            emit(&mut out, &line)?;
        }
        return Ok(());
    }
    emit(&mut out, shadow::decisions_table(&decisions).trim_end())
}

/// The shadow decisions of a stored native session (opened for reading only); `tune` reads
/// them too.
pub(super) fn recorded(target: &SessionArgs, db: &Path) -> Result<Vec<DecisionRecord>, CliError> {
    if !db.exists() {
        return Err(CliError::Database(Cause::new(format!(
            "{}: no such database file",
            wiring::shown(db)
        ))));
    }
    let key = target.key();
    let store = match open_existing_file(db, Access::Read)? {
        ExistingStore::Native(store) => store,
        ExistingStore::Adk(_) => {
            return Err(CliError::Database(Cause::new(format!(
                "{}: an ADK database keeps no shadow decisions (they live in the native store)",
                wiring::shown(db)
            ))));
        }
        // A file never opens as PostgreSQL.
        #[cfg(feature = "postgres")]
        opened @ (ExistingStore::Postgres(_) | ExistingStore::AdkPostgres(_)) => {
            return Err(CliError::Database(Cause::new(format!(
                "{}: `decisions` and `tune` read a database file",
                opened.postgres_database().unwrap_or_default()
            ))));
        }
    };
    store.blocking().decisions(&key).map_err(CliError::database)
}
