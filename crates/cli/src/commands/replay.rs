//! `compaction replay` (and the demo's run): a transcript driven through the engine, one
//! post-turn evaluation per turn, into a new session; one table row or JSON record per turn,
//! then the assembled context, the compaction history and what compaction saved.
//!
//! A turn the store cannot take ends the run and rolls the session back, so its id can be used
//! again. Output that cannot be written loses the output, never the work: the replay finishes
//! its session and says so.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use compaction_core::{SessionKey, SessionStore};

use super::args::{OtlpArgs, RunArgs};
use super::output::Output;
use crate::database::{Database, DbArg, Store};
use crate::error::{Cause, CliError};
use crate::registry::Registry;
use crate::render;
use crate::replay::{Replay, ReplayError};
use crate::transcript::{self, TranscriptTurn};
use crate::wiring::{self, ProcessIds, SystemClock, Wiring, build_engine, init_logging};

#[derive(Debug, clap::Args)]
pub(super) struct ReplayArgs {
    /// The transcript (see README: transcript format), or `-` for stdin.
    file: PathBuf,
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Session database: a SQLite file (created when missing; default: a temporary one) or
    /// a PostgreSQL URL postgres://user@host:port/dbname (tables created when missing).
    #[arg(long, value_name = "PATH|URL", value_parser = crate::database::parse_db)]
    db: Option<DbArg>,
    /// Read the PostgreSQL URL from the environment variable VAR (for a URL that holds a
    /// password: a command line is visible to other users).
    #[arg(long, value_name = "VAR", conflicts_with = "db")]
    db_env: Option<String>,
    /// The session id to create (default: `replay-<run id>`, new on every run).
    #[arg(long)]
    session: Option<String>,
}

/// Runs `compaction replay`.
pub(super) async fn run(registry: &Registry, args: ReplayArgs) -> Result<(), CliError> {
    let ReplayArgs {
        file,
        run,
        db,
        db_env,
        session,
    } = args;
    let db = Database::from_args(db, db_env)?;
    let turns = read_transcript(&file)?;
    let wiring = run.adapters.wire(registry)?;
    let id = session.unwrap_or_else(|| format!("replay-{}", wiring::run_id()));
    let key = SessionKey::new("zocrates", "replay", id);
    replay_turns(wiring, turns, db, key, run.json, &run.otlp).await
}

fn read_transcript(file: &std::path::Path) -> Result<Vec<TranscriptTurn>, CliError> {
    if file.as_os_str() == "-" {
        let stdin = std::io::stdin();
        return Ok(transcript::parse("<stdin>", stdin.lock())?);
    }
    let name = wiring::shown(file);
    let f = std::fs::File::open(file).map_err(|error| transcript::TranscriptError::Io {
        source_name: name.clone(),
        error,
    })?;
    Ok(transcript::parse(&name, std::io::BufReader::new(f))?)
}

/// Where the replayed session is, as the closing lines name it.
struct Kept {
    /// The database the session is kept in (`None`: a temporary one, gone after the run).
    place: Option<String>,
    /// The `--db …` words that name the database again.
    reopen: String,
}

/// Replays `turns` into a new session `key` in `db` (default: a temporary file) and prints
/// what happened.
pub(super) async fn replay_turns(
    wiring: Wiring,
    turns: Vec<TranscriptTurn>,
    db: Option<Database>,
    key: SessionKey,
    json: bool,
    otlp: &OtlpArgs,
) -> Result<(), CliError> {
    let tmp = tempfile::tempdir().map_err(|e| {
        CliError::Other(Cause::with(
            format!("cannot create a temporary directory: {e}"),
            e,
        ))
    })?;
    let kept = db.is_some();
    let db = db.unwrap_or_else(|| Database::File(tmp.path().join("sessions.db")));
    let opened = Store::open(&db).await?;
    // Where the session is kept (the file, or the database without its password) and the
    // arguments that name it again.
    let kept = Kept {
        place: kept.then(|| opened.shown(&db)),
        reopen: opened.reopen_args(&db),
    };
    let (telemetry, guard, span_config) =
        wiring::telemetry(otlp.request().map_err(|m| CliError::Other(Cause::new(m)))?)?;
    init_logging(guard.as_ref());
    let mut replay = start(&wiring, &opened, telemetry, &key)
        .await?
        .with_span_config(span_config);
    let mut out = Output::new(std::io::stdout().lock());
    let banner = wiring.banner();
    if json {
        out.json(&serde_json::json!({ "banner": banner }).to_string());
    } else {
        out.line(&banner);
        out.line(&render::table_header());
    }
    let played = play(&mut replay, &turns, &opened, &key, json, &mut out).await?;
    let compactions = closing(&mut out, &opened.port(), &key, json).await?;
    if played {
        totals(
            &mut out,
            &replay,
            &key,
            json,
            (turns.len(), compactions),
            &kept,
        )
        .await?;
    }
    drop(guard);
    match out.into_failure() {
        // The output is lost, not the work: the session was finished.
        Some(e) => Err(CliError::Other(Cause::with(
            format!(
                "cannot write output: {e}; the replay went on without it and finished session \
                 {key} ({} turns, {compactions} compactions stored{})",
                turns.len(),
                kept.place
                    .as_deref()
                    .map(|p| format!(" in {p}"))
                    .unwrap_or_default()
            ),
            e,
        ))),
        None => Ok(()),
    }
}

/// Builds the engine on `opened` and creates the session: before anything is printed, so an
/// id already in use fails cleanly.
async fn start(
    wiring: &Wiring,
    opened: &Store,
    telemetry: Arc<dyn compaction_core::Telemetry>,
    key: &SessionKey,
) -> Result<Replay<dyn SessionStore>, CliError> {
    let store = opened.port();
    let clock = Arc::new(SystemClock::default());
    let ids = Arc::new(ProcessIds::default());
    let engine = build_engine(wiring, store.clone(), clock.clone(), ids.clone(), telemetry)?;
    Replay::start(engine, store, clock, ids, key.clone())
        .await
        .map_err(|e| {
            CliError::Database(Cause::with(
                format!("{e} (pick another --session, or leave it out for a new one)"),
                e,
            ))
        })
}

/// Replays every turn, one row or record each; whether there was any turn. A turn the store
/// cannot take rolls the session back ([`roll_back`]).
async fn play(
    replay: &mut Replay<dyn SessionStore>,
    turns: &[TranscriptTurn],
    opened: &Store,
    key: &SessionKey,
    json: bool,
    out: &mut Output<impl Write>,
) -> Result<bool, CliError> {
    let progress = std::io::stderr().is_terminal() && !std::io::stdout().is_terminal();
    let mut played = false;
    for (i, turn) in turns.iter().enumerate() {
        if progress {
            eprint!("\rreplaying turn {}/{}", i + 1, turns.len());
        }
        let record = match replay.turn(turn).await {
            Ok(record) => record,
            Err(e) => {
                if progress {
                    // End the progress line so that the error starts on its own.
                    eprintln!();
                }
                return Err(roll_back(opened, key, (i + 1, turns.len()), e).await);
            }
        };
        if json {
            out.json(&serde_json::to_string(&record).map_err(CliError::other)?);
        } else {
            out.line(&render::table_row(&record));
        }
        played = true;
    }
    if progress {
        eprintln!();
    }
    Ok(played)
}

/// The session cannot be finished (the store failed at turn `at.0` of `at.1`, e.g. a full
/// disk): rolls it back so that its id can be used again, and says whether that worked.
async fn roll_back(
    opened: &Store,
    key: &SessionKey,
    (turn, of): (usize, usize),
    e: ReplayError,
) -> CliError {
    let rolled_back = match opened.delete_session(key).await {
        Ok(_) => format!("session {key} was rolled back (deleted); its id can be used again"),
        Err(d) => format!(
            "session {key} could not be rolled back ({d}); it holds the turns before turn {turn}"
        ),
    };
    CliError::Database(Cause::with(
        format!("turn {turn} of {of}: {e}; {rolled_back}"),
        e,
    ))
}

/// The text output's closing sections (the assembled context and the compaction history);
/// the number of compactions.
async fn closing(
    out: &mut Output<impl Write>,
    store: &Arc<dyn SessionStore>,
    key: &SessionKey,
    json: bool,
) -> Result<usize, CliError> {
    let compactions = store
        .compaction_history(key)
        .await
        .map_err(CliError::database)?;
    if !json {
        // Only the text output shows the context; an uncompacted one is the whole session.
        let context = store.load_context(key).await.map_err(CliError::database)?;
        out.line("\nFinal assembled context for the next turn:");
        out.line(render::context(&context, 400).trim_end());
        out.line("\nCompaction history:");
        out.line(render::compaction_history(&compactions).trim_end());
    }
    Ok(compactions.len())
}

/// The last line or record: turns, compactions, the next prompt with and without compaction,
/// and where the session is kept.
async fn totals(
    out: &mut Output<impl Write>,
    replay: &Replay<dyn SessionStore>,
    key: &SessionKey,
    json: bool,
    (turns, compactions): (usize, usize),
    kept: &Kept,
) -> Result<(), CliError> {
    let (without, with) = replay
        .next_prompt_tokens()
        .await
        .map_err(CliError::database)?;
    let saved = without.saturating_sub(with);
    let pct = if without == 0 {
        0.0
    } else {
        100.0 * saved as f64 / without as f64
    };
    if json {
        out.json(&serde_json::json!({ "turns": turns, "compactions": compactions, "next_prompt_tokens_without": without, "next_prompt_tokens_with": with, "tokens_saved": saved, "session": key.to_string(), "db": kept.place }).to_string());
        return Ok(());
    }
    out.line(&format!(
        "\n{turns} turns, {compactions} compactions. Next prompt: {without} tokens without compaction, {with} with: {saved} tokens saved ({pct:.0}%)."
    ));
    if let Some(place) = &kept.place {
        out.line(&format!(
            "Session {key} is kept in {place}; to see it again: compaction inspect {} --app {} --user {} --session {}",
            kept.reopen,
            render::shell_word(&key.app_name),
            render::shell_word(&key.user_id),
            render::shell_word(&key.session_id),
        ));
    }
    Ok(())
}
