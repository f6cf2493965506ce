//! `compaction inspect`: a stored session's assembled context and compaction history, with
//! each compaction's receipt (read-only: never created, migrated or written, no `-wal`/`-shm`
//! left behind). On an ADK database the context is exactly what ADK's prompt builder shows.

use std::path::Path;

use compaction_core::{AssembledContext, CompactionEntry, Revision, SessionKey};

use super::args::{ReadDbArgs, SessionArgs};
use super::output::{emit, emit_json};
use crate::database::{Access, ExistingStore, file_of, open_existing};
use crate::error::{Cause, CliError};
use crate::{render, wiring};

#[derive(Debug, clap::Args)]
pub(super) struct InspectArgs {
    #[command(flatten)]
    target: SessionArgs,
    /// Run SQLite's full integrity check on the file first; exit 4 if it finds damage.
    #[arg(long)]
    check: bool,
    /// One JSON object (the session, its compaction history with each receipt, the
    /// assembled context) instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    db: ReadDbArgs,
}

/// What `inspect` shows of a session.
struct Inspected {
    /// How many events the session holds.
    events: u64,
    revision: Revision,
    /// The compactions of the session's view.
    compactions: Vec<CompactionEntry>,
    /// The context the next turn's prompt is built from.
    context: AssembledContext,
}

/// Runs `compaction inspect`.
pub(super) async fn run(args: InspectArgs) -> Result<(), CliError> {
    let InspectArgs {
        target,
        check,
        json,
        db,
    } = args;
    let db = db.database()?;
    let file = file_of(&db);
    if check {
        check_file(file)?;
    }
    let key = target.key();
    let opened = open_existing(&db, Access::Read).await?;
    let shown = match (opened.postgres_database(), file) {
        (Some(database), _) => database.to_owned(),
        (None, Some(file)) => wiring::shown(file),
        (None, None) => String::new(),
    };
    let inspected = read(&opened, &key).await?;
    print(&inspected, &key, &shown, check, json)
}

/// `--check`: SQLite's full integrity check of the database file (refused for PostgreSQL).
fn check_file(file: Option<&Path>) -> Result<(), CliError> {
    let Some(file) = file else {
        return Err(CliError::Input(Cause::new(
            "--check runs SQLite's integrity check on a database file; a PostgreSQL \
             database is checked by PostgreSQL itself (leave out --check)"
                .to_owned(),
        )));
    };
    if !file.exists() {
        return Err(CliError::Database(Cause::new(format!(
            "{}: no such database file",
            wiring::shown(file)
        ))));
    }
    session_store::check_integrity(file).map_err(CliError::database)
}

/// Reads what `inspect` shows, the way each store keeps it.
async fn read(opened: &ExistingStore, key: &SessionKey) -> Result<Inspected, CliError> {
    let database = |e: session_store::SessionStoreError| CliError::database(e);
    match opened {
        ExistingStore::Native(store) => {
            // `inspect` runs no engine: the synchronous store serves it directly.
            let store = store.blocking();
            let header = store.header(key).map_err(database)?;
            Ok(Inspected {
                events: header.revision.0,
                revision: header.revision,
                compactions: store.compaction_history(key).map_err(database)?,
                context: store.load_context(key).map_err(database)?,
            })
        }
        ExistingStore::Adk(store) => {
            let session = store.blocking().get_session(key).map_err(database)?;
            Ok(adk_session(key, &session))
        }
        #[cfg(feature = "postgres")]
        ExistingStore::AdkPostgres(store) => {
            let session = store.get_session(key).await.map_err(database)?;
            Ok(adk_session(key, &session))
        }
        #[cfg(feature = "postgres")]
        ExistingStore::Postgres(store) => {
            let header = store.header(key).await.map_err(database)?;
            let port = |e: compaction_core::StoreError| CliError::database(e);
            Ok(Inspected {
                events: header.revision.0,
                revision: header.revision,
                compactions: compaction_core::SessionStore::compaction_history(&**store, key)
                    .await
                    .map_err(port)?,
                context: compaction_core::SessionStore::load_context(&**store, key)
                    .await
                    .map_err(port)?,
            })
        }
    }
}

/// An ADK session as `inspect` shows it: exactly what ADK's prompt builder shows (every
/// summary it still renders), and a warning for user messages filed inside an open scope.
fn adk_session(key: &SessionKey, session: &compaction_core::Session) -> Inspected {
    let scoped = compaction_core::scoped_user_messages(&session.events);
    if !scoped.is_empty() {
        eprintln!("warning: session {key}: {scoped}");
    }
    Inspected {
        events: session.events.len() as u64,
        revision: session.revision,
        compactions: compaction_core::compaction_history(&session.events),
        context: compaction_core::adk_prompt_context(&session.events),
    }
}

/// Prints the session as one JSON object or as text.
fn print(
    inspected: &Inspected,
    key: &SessionKey,
    shown: &str,
    check: bool,
    json: bool,
) -> Result<(), CliError> {
    let Inspected {
        events,
        revision,
        compactions,
        context,
    } = inspected;
    let mut out = std::io::stdout().lock();
    if json {
        let value = serde_json::json!({
            "session": key.to_string(),
            "events": events,
            "revision": revision.0,
            "integrity_check": check.then_some("ok"),
            "compaction_history": render::compaction_history_json(compactions),
            "context": render::context_json(context),
        });
        return emit_json(&mut out, &value.to_string());
    }
    if check {
        emit(&mut out, &format!("{shown}: integrity check: ok"))?;
    }
    emit(
        &mut out,
        &format!("session {key}: {events} events, revision {revision}"),
    )?;
    emit(&mut out, "\nCompaction history:")?;
    emit(&mut out, render::compaction_history(compactions).trim_end())?;
    emit(&mut out, "\nAssembled context for the next turn:")?;
    emit(&mut out, render::context(context, usize::MAX).trim_end())
}
