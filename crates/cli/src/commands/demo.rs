//! `compaction demo`: the bundled research conversation replayed offline (no API key, no
//! server), on the spec's defaults with the local adapters.

use std::path::PathBuf;

use compaction_core::SessionKey;

use super::args::OtlpArgs;
use crate::database::Database;
use crate::error::CliError;
use crate::registry::Registry;
use crate::transcript;
use crate::wiring::{self, ConfigSource, wire};

/// The bundled demo conversation.
const DEMO_TRANSCRIPT: &str = include_str!("../../demo/research-conversation.jsonl");

#[derive(Debug, clap::Args)]
pub(super) struct DemoArgs {
    /// Print one JSON record per turn instead of the table.
    #[arg(long)]
    json: bool,
    /// Keep the session database at PATH instead of a temporary directory.
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// The session id to create (default: `demo-<run id>`, new on every run).
    #[arg(long)]
    session: Option<String>,
}

/// Runs `compaction demo`.
pub(super) async fn run(registry: &Registry, args: DemoArgs) -> Result<(), CliError> {
    let wiring = wire(registry, ConfigSource::EmbeddedOffline, None, None)?;
    let turns = transcript::parse("demo", DEMO_TRANSCRIPT.as_bytes())?;
    let id = args
        .session
        .unwrap_or_else(|| format!("demo-{}", wiring::run_id()));
    let key = SessionKey::new("zocrates", "demo", id);
    let db = args.db.map(Database::File);
    super::replay::replay_turns(wiring, turns, db, key, args.json, &OtlpArgs::default()).await
}
