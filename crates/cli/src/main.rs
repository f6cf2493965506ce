//! `compaction`: the composition root of adaptive-compaction.
//!
//! It reads settings through config-ssot, picks the decision model and the summarizer from the
//! settings and the environment, opens the SQLite session store, and runs compaction-core's
//! engine: on the bundled demo conversation (`demo`), on a transcript (`replay`), or once on a
//! stored session after a turn (`evaluate`, the hook a non-Rust backend calls).
//!
//! It is the only crate that prints. Exit codes: 0 success, 1 unexpected failure, 2 usage
//! error, 3 bad input (transcript or config), 4 database error (busy, corrupt, unknown session).

// The binary is the one place that prints.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use compaction_core::{Engine, SessionKey, SessionStore};
use session_store::{AdkStore, Layout, SqliteStore, detect_layout};
use tracing_subscriber::Layer as _;

mod error;
mod render;
mod serve;
mod wiring;

use cli::replay::{OutcomeSummary, Replay, TurnRecord};
use cli::transcript;
use error::CliError;
use wiring::{ConfigSource, MonotonicClock, ProcessIds, Wiring, wire};

/// The bundled demo conversation.
const DEMO_TRANSCRIPT: &str = include_str!("../demo/research-conversation.jsonl");

#[derive(Debug, Parser)]
#[command(
    name = "compaction",
    version,
    about = "Post-turn adaptive context compaction for long research chats"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay the bundled research conversation offline (no API key, no server).
    Demo {
        /// Print one JSON record per turn instead of the table.
        #[arg(long)]
        json: bool,
        /// Keep the session database at PATH instead of a temporary directory.
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
        /// The session id to create (default: `demo-<run id>`, new on every run).
        #[arg(long)]
        session: Option<String>,
    },
    /// Replay a JSONL transcript (`-` for stdin) through the engine, one evaluation per turn.
    Replay {
        /// The transcript (see README: transcript format), or `-` for stdin.
        file: PathBuf,
        #[command(flatten)]
        run: RunArgs,
        /// Session database file (created when missing; default: a temporary one).
        #[arg(long, value_name = "PATH")]
        db: Option<PathBuf>,
        /// The session id to create (default: `replay-<run id>`, new on every run).
        #[arg(long)]
        session: Option<String>,
    },
    /// Run one post-turn evaluation on a stored session.
    Evaluate {
        #[command(flatten)]
        run: RunArgs,
        /// The session database: an existing native or Google ADK database.
        #[arg(long, value_name = "PATH")]
        db: PathBuf,
        #[command(flatten)]
        target: SessionArgs,
    },
    /// Print a stored session's assembled context and compaction history.
    Inspect {
        #[command(flatten)]
        target: SessionArgs,
        /// Database file.
        #[arg(long, value_name = "PATH")]
        db: PathBuf,
    },
    /// Serve chat turns over HTTP with the post-turn lifecycle of spec section 8 (SSE).
    Serve {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// Session database file (created when missing).
        #[arg(long, value_name = "PATH", default_value = "compaction-sessions.db")]
        db: PathBuf,
        #[command(flatten)]
        adapters: AdapterArgs,
        /// The largest chat message accepted, in bytes (larger: 413).
        #[arg(long, value_name = "BYTES", default_value_t = service::http::DEFAULT_MAX_MESSAGE_BYTES)]
        max_message_bytes: usize,
        /// The longest a turn waits for the previous turn's evaluation, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
        max_wait: f64,
    },
    /// Show or change the settings file (zocrates_config.json).
    Config {
        #[command(subcommand)]
        action: ConfigAction,
        /// The config file (default: $ZOTERO_DATA_DIR or ~/Zotero, then zocrates-data/zocrates_config.json).
        #[arg(long, value_name = "PATH", global = true)]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Decision adapter (overrides the config file's decision_adapter).
    #[arg(long, value_parser = ["auto", "decisions", "chat-logprobs", "offline"])]
    decision: Option<String>,
    /// Summarizer adapter (overrides the config file's summarizer_adapter).
    #[arg(long, value_parser = ["auto", "chat", "offline"])]
    summarizer: Option<String>,
    /// The config file (default: the resolved zocrates_config.json, when it exists).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Print JSON records instead of text.
    #[arg(long)]
    json: bool,
    /// Export spans over OTLP/HTTP (default endpoint: Phoenix's http://localhost:6006/v1/traces).
    #[arg(long, value_name = "URL", num_args = 0..=1)]
    otlp: Option<Option<String>>,
}

#[derive(Debug, clap::Args)]
struct AdapterArgs {
    /// Decision adapter (overrides the config file's decision_adapter).
    #[arg(long, value_parser = ["auto", "decisions", "chat-logprobs", "offline"])]
    decision: Option<String>,
    /// Summarizer adapter (overrides the config file's summarizer_adapter).
    #[arg(long, value_parser = ["auto", "chat", "offline"])]
    summarizer: Option<String>,
    /// The config file (default: the resolved zocrates_config.json, when it exists).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Export spans over OTLP/HTTP (default endpoint: Phoenix's http://localhost:6006/v1/traces).
    #[arg(long, value_name = "URL", num_args = 0..=1)]
    otlp: Option<Option<String>>,
}

#[derive(Debug, clap::Args)]
struct SessionArgs {
    /// Session id.
    #[arg(long)]
    session: String,
    /// App name.
    #[arg(long, default_value = "zocrates")]
    app: String,
    /// User id.
    #[arg(long, default_value = "user")]
    user: String,
}

#[derive(Debug, Subcommand)]
enum ConfigAction {
    /// Print the settings file.
    Show,
    /// Print the settings file's path.
    Path,
    /// Set KEY to VALUE under the file lock.
    Set {
        /// A key of the settings file.
        key: String,
        /// The new value (parsed to the key's type).
        value: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Logs to stderr (filter from `COMPACTION_LOG`, default `error`), and, when spans are
/// exported, sends the program's own spans (one per replayed turn) to the same exporter so that
/// the compaction spans nest under their turn.
fn init_logging(guard: Option<&telemetry::TelemetryGuard>) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("COMPACTION_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(fmt);
    let _ = match guard {
        Some(guard) => registry.with(guard.layer()).try_init(),
        None => registry.try_init(),
    };
}

async fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Demo { json, db, session } => {
            let wiring = wire(ConfigSource::EmbeddedOffline, None, None)?;
            let turns = transcript::parse("demo", DEMO_TRANSCRIPT.as_bytes())?;
            let id = session.unwrap_or_else(|| format!("demo-{}", wiring::run_id()));
            let key = SessionKey::new("zocrates", "demo", id);
            replay_turns(wiring, turns, db, key, json, None).await
        }
        Command::Replay {
            file,
            run,
            db,
            session,
        } => {
            let turns = read_transcript(&file)?;
            let wiring = wire(
                ConfigSource::Resolve(run.config.clone()),
                run.decision.as_deref(),
                run.summarizer.as_deref(),
            )?;
            let id = session.unwrap_or_else(|| format!("replay-{}", wiring::run_id()));
            let key = SessionKey::new("zocrates", "replay", id);
            replay_turns(wiring, turns, db, key, run.json, run.otlp).await
        }
        Command::Evaluate { run, db, target } => evaluate(run, target, db).await,
        Command::Inspect { target, db } => inspect(&target, db),
        Command::Serve {
            addr,
            db,
            adapters,
            max_message_bytes,
            max_wait,
        } => {
            serve::serve(serve::ServeArgs {
                addr,
                db,
                config: adapters.config,
                decision: adapters.decision,
                summarizer: adapters.summarizer,
                otlp: adapters.otlp,
                max_message_bytes,
                max_wait_secs: max_wait,
            })
            .await
        }
        Command::Config { action, config } => config_command(action, config),
    }
}

fn read_transcript(file: &std::path::Path) -> Result<Vec<transcript::TranscriptTurn>, CliError> {
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

fn open_store(db: &std::path::Path) -> Result<Arc<SqliteStore>, CliError> {
    SqliteStore::open(db)
        .map(Arc::new)
        .map_err(|e| CliError::Database(e.to_string()))
}

/// An existing session database, opened by its detected layout.
enum ExistingStore {
    /// This project's native store.
    Native(Arc<SqliteStore>),
    /// A Google ADK sessions database, operated on in place.
    Adk(Arc<AdkStore>),
}

impl ExistingStore {
    fn port(&self) -> Arc<dyn compaction_core::SessionStore> {
        match self {
            ExistingStore::Native(s) => s.clone(),
            ExistingStore::Adk(s) => s.clone(),
        }
    }
}

/// Opens an existing database: the native store, or ADK's `DatabaseSessionService` /
/// `SqliteSessionService` layout; ADK's legacy v0 layout is refused naming `adk migrate session`.
fn open_existing(db: &std::path::Path) -> Result<ExistingStore, CliError> {
    let database = |e: session_store::SessionStoreError| CliError::Database(e.to_string());
    match detect_layout(db).map_err(database)? {
        Layout::AdkDatabase | Layout::AdkSqlite | Layout::AdkLegacyV0 => AdkStore::open(db)
            .map(|s| ExistingStore::Adk(Arc::new(s)))
            .map_err(database),
        Layout::Native => open_store(db).map(ExistingStore::Native),
        // Reading commands never write: an empty file is not turned into a store.
        layout => Err(CliError::Database(format!(
            "{}: not a session database (it is {}); `compaction replay --db` creates one",
            wiring::shown(db),
            layout.describe()
        ))),
    }
}

fn build_engine(
    wiring: &Wiring,
    store: Arc<dyn compaction_core::SessionStore>,
    clock: Arc<MonotonicClock>,
    ids: Arc<ProcessIds>,
    telemetry: Arc<dyn compaction_core::Telemetry>,
) -> Result<Engine, CliError> {
    Engine::builder(
        wiring.decision.model.clone(),
        wiring.summarizer.summarizer.clone(),
        store,
        clock,
        ids,
    )
    .settings(wiring.settings.clone())
    .telemetry(telemetry)
    .build()
    .map_err(|e| CliError::Config(e.to_string()))
}

async fn replay_turns(
    wiring: Wiring,
    turns: Vec<transcript::TranscriptTurn>,
    db: Option<PathBuf>,
    key: SessionKey,
    json: bool,
    otlp: Option<Option<String>>,
) -> Result<(), CliError> {
    let tmp = tempfile::tempdir()
        .map_err(|e| CliError::Other(format!("cannot create a temporary directory: {e}")))?;
    let kept = db.clone();
    let db = db.unwrap_or_else(|| tmp.path().join("sessions.db"));
    let store = open_store(&db)?;
    let (telemetry, guard) = wiring::telemetry(otlp)?;
    init_logging(guard.as_ref());
    let clock = Arc::new(MonotonicClock::default());
    let ids = Arc::new(ProcessIds::default());
    let engine = build_engine(
        &wiring,
        store.clone(),
        clock.clone(),
        ids.clone(),
        telemetry,
    )?;
    // The session is created before anything is printed: an id already in use fails cleanly.
    let mut replay = Replay::start(engine, store.clone(), clock, ids, key.clone())
        .await
        .map_err(|e| {
            CliError::Database(format!(
                "{e} (pick another --session, or leave it out for a new one)"
            ))
        })?;
    let mut out = std::io::stdout().lock();
    let banner = wiring.banner();
    if json {
        emit(
            &mut out,
            &serde_json::json!({ "banner": banner }).to_string(),
        )?;
    } else {
        emit(&mut out, &banner)?;
        emit(&mut out, &render::table_header())?;
    }
    let progress = std::io::stderr().is_terminal() && !std::io::stdout().is_terminal();
    let mut last: Option<TurnRecord> = None;
    for (i, turn) in turns.iter().enumerate() {
        if progress {
            eprint!("\rreplaying turn {}/{}", i + 1, turns.len());
        }
        let record = replay.turn(turn).await.map_err(|e| {
            if progress {
                // End the progress line so that the error starts on its own.
                eprintln!();
            }
            CliError::Database(e.to_string())
        })?;
        if json {
            emit(
                &mut out,
                &serde_json::to_string(&record).map_err(|e| CliError::Other(e.to_string()))?,
            )?;
        } else {
            emit(&mut out, &render::table_row(&record))?;
        }
        last = Some(record);
    }
    if progress {
        eprintln!();
    }
    let context = store
        .load_context(&key)
        .await
        .map_err(|e| CliError::Database(e.to_string()))?;
    let compactions = store
        .compaction_history(&key)
        .await
        .map_err(|e| CliError::Database(e.to_string()))?;
    if !json {
        emit(&mut out, "\nFinal assembled context for the next turn:")?;
        emit(&mut out, render::context(&context, 400).trim_end())?;
        emit(&mut out, "\nCompaction history:")?;
        emit(
            &mut out,
            render::compaction_history(&compactions).trim_end(),
        )?;
    }
    let compactions = compactions.len();
    if last.is_some() {
        let (without, with) = replay
            .next_prompt_tokens()
            .await
            .map_err(|e| CliError::Database(e.to_string()))?;
        let saved = without.saturating_sub(with);
        let pct = if without == 0 {
            0.0
        } else {
            100.0 * saved as f64 / without as f64
        };
        if json {
            emit(
                &mut out,
                &serde_json::json!({ "turns": turns.len(), "compactions": compactions, "next_prompt_tokens_without": without, "next_prompt_tokens_with": with, "tokens_saved": saved, "session": key.to_string(), "db": kept.as_deref().map(wiring::shown) }).to_string(),
            )?;
        } else {
            emit(
                &mut out,
                &format!(
                    "\n{} turns, {compactions} compactions. Next prompt: {without} tokens without compaction, {with} with: {saved} tokens saved ({pct:.0}%).",
                    turns.len()
                ),
            )?;
            if let Some(path) = &kept {
                emit(
                    &mut out,
                    &format!(
                        "Session {key} is kept in {}; to see it again: compaction inspect --db {} --app {} --user {} --session {}",
                        wiring::shown(path),
                        render::shell_word(&wiring::shown(path)),
                        render::shell_word(&key.app_name),
                        render::shell_word(&key.user_id),
                        render::shell_word(&key.session_id),
                    ),
                )?;
            }
        }
    }
    drop(guard);
    Ok(())
}

fn emit(out: &mut impl Write, line: &str) -> Result<(), CliError> {
    writeln!(out, "{line}").map_err(|e| CliError::Other(format!("cannot write output: {e}")))
}

async fn evaluate(run: RunArgs, target: SessionArgs, db: PathBuf) -> Result<(), CliError> {
    if !db.exists() {
        return Err(CliError::Database(format!(
            "{}: no such database file",
            wiring::shown(&db)
        )));
    }
    let wiring = wire(
        ConfigSource::Resolve(run.config.clone()),
        run.decision.as_deref(),
        run.summarizer.as_deref(),
    )?;
    let store = open_existing(&db)?;
    let (telemetry, guard) = wiring::telemetry(run.otlp)?;
    init_logging(guard.as_ref());
    let engine = build_engine(
        &wiring,
        store.port(),
        Arc::new(MonotonicClock::default()),
        Arc::new(ProcessIds::default()),
        telemetry,
    )?;
    let key = SessionKey::new(target.app, target.user, target.session);
    let outcome = engine.evaluate_and_compact(&key).await;
    drop(guard);
    let mut out = std::io::stdout().lock();
    let summary = OutcomeSummary::of(&outcome);
    let probability = outcome.probability().map(|p| p.value());
    if run.json {
        let record = serde_json::json!({
            "banner": wiring.banner(),
            "session": key.to_string(),
            "outcome": outcome.label(),
            "gate": summary.gate,
            "probability": probability,
            "verdict": summary.verdict,
            "compaction_event_id": outcome.compaction().map(|c| c.event.id.clone()),
            "detail": summary.detail,
        });
        emit(&mut out, &record.to_string())?;
    } else {
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
        )?;
    }
    if let compaction_core::Outcome::StoreFailed { failure } = outcome {
        return Err(CliError::Database(failure.to_string()));
    }
    Ok(())
}

fn inspect(target: &SessionArgs, db: PathBuf) -> Result<(), CliError> {
    if !db.exists() {
        return Err(CliError::Database(format!(
            "{}: no such database file",
            wiring::shown(&db)
        )));
    }
    let key = SessionKey::new(
        target.app.clone(),
        target.user.clone(),
        target.session.clone(),
    );
    let database = |e: session_store::SessionStoreError| CliError::Database(e.to_string());
    // (events, revision, the view's compactions, the context)
    let (events, revision, compactions, context) = match open_existing(&db)? {
        ExistingStore::Native(store) => {
            // `inspect` runs no engine: the synchronous store serves it directly.
            let store = store.blocking();
            let header = store.header(&key).map_err(database)?;
            (
                header.revision.0,
                header.revision,
                store.compaction_history(&key).map_err(database)?,
                store.load_context(&key).map_err(database)?,
            )
        }
        ExistingStore::Adk(store) => {
            let session = store.blocking().get_session(&key).map_err(database)?;
            let compactions = compaction_core::compaction_history(&session.events);
            let context = compaction_core::assemble_context(&session.events);
            (
                session.events.len() as u64,
                session.revision,
                compactions,
                context,
            )
        }
    };
    let mut out = std::io::stdout().lock();
    emit(
        &mut out,
        &format!("session {key}: {events} events, revision {revision}"),
    )?;
    emit(&mut out, "\nCompaction history:")?;
    emit(
        &mut out,
        render::compaction_history(&compactions).trim_end(),
    )?;
    emit(&mut out, "\nAssembled context for the next turn:")?;
    emit(&mut out, render::context(&context, usize::MAX).trim_end())
}

fn config_command(action: ConfigAction, config: Option<PathBuf>) -> Result<(), CliError> {
    let store = wiring::config_store(config)?;
    let mut out = std::io::stdout().lock();
    match action {
        ConfigAction::Path => emit(&mut out, &wiring::shown(store.path().file())),
        ConfigAction::Show => {
            let file = store.load().map_err(|e| CliError::Config(e.to_string()))?;
            emit(&mut out, &format!("# {}", wiring::shown(file.path())))?;
            emit(&mut out, String::from_utf8_lossy(&file.render()).trim_end())
        }
        ConfigAction::Set { key, value } => {
            let file = if compaction_core::settings::KEYS.contains(&key.as_str()) {
                store
                    .set(&key, &value)
                    .map_err(|e| CliError::Config(e.to_string()))?
            } else {
                wiring::set_adapter_key(&store, &key, &value)?
            };
            emit(
                &mut out,
                &format!("{key} set in {}", wiring::shown(file.path())),
            )
        }
    }
}
