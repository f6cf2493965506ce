//! The command line of `compaction` (the former `src/main.rs`), as [`run_with`]: it reads
//! settings through config-ssot, builds the decision model and the summarizer the settings
//! name from the [`Registry`], opens the SQLite session store, and runs compaction-core's
//! engine: on the bundled demo conversation (`demo`), on a transcript (`replay`), or once on a
//! stored session after a turn (`evaluate`, the hook a non-Rust backend calls).
//!
//! It is the only code that prints. Exit codes: 0 success, 1 unexpected failure, 2 usage
//! error, 3 bad input (transcript or config), 4 database error (busy, corrupt, unknown session).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use compaction_core::{Engine, SessionKey, SessionStore};
use session_store::{AdkStore, Layout, PostgresStore, SqliteStore, detect_layout};
use tracing_subscriber::Layer as _;

use crate::database::{Database, DbArg, Store};
use crate::error::CliError;
use crate::registry::Registry;
use crate::replay::{OutcomeSummary, Replay, TurnRecord};
use crate::wiring::{self, ConfigSource, ProcessIds, SystemClock, Wiring, wire};
use crate::{render, serve, shadow, transcript};

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
    },
    /// Run one post-turn evaluation on a stored session.
    Evaluate {
        #[command(flatten)]
        run: RunArgs,
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
    },
    /// Print a stored session's assembled context and compaction history (read-only).
    Inspect {
        #[command(flatten)]
        target: SessionArgs,
        /// Run SQLite's full integrity check on the file first; exit 4 if it finds damage.
        #[arg(long)]
        check: bool,
        /// One JSON object (the session, its compaction history with each receipt, the
        /// assembled context) instead of text.
        #[arg(long)]
        json: bool,
        /// Database: a SQLite file or a PostgreSQL URL postgres://user@host:port/dbname
        /// (read-only: nothing is written).
        #[arg(long, value_name = "PATH|URL", value_parser = crate::database::parse_db, required_unless_present = "db_env")]
        db: Option<DbArg>,
        /// Read the PostgreSQL URL from the environment variable VAR (for a URL that holds a
        /// password).
        #[arg(long, value_name = "VAR", conflicts_with = "db")]
        db_env: Option<String>,
    },
    /// Lossless recall (read-only): search a session's raw events, or print the original
    /// events of a compaction or a turn range verbatim.
    Recall {
        #[command(flatten)]
        target: SessionArgs,
        #[command(flatten)]
        what: RecallArgs,
        /// At most N hits (1 to 100; default 10).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Print a JSON list of hits `{turn, event_id, author, timestamp, snippet, text,
        /// covered_by}` instead of the listing.
        #[arg(long)]
        json: bool,
        /// Database: a SQLite file or a PostgreSQL URL postgres://user@host:port/dbname
        /// (read-only: nothing is written).
        #[arg(long, value_name = "PATH|URL", value_parser = crate::database::parse_db, required_unless_present = "db_env")]
        db: Option<DbArg>,
        /// Read the PostgreSQL URL from the environment variable VAR (for a URL that holds a
        /// password).
        #[arg(long, value_name = "VAR", conflicts_with = "db")]
        db_env: Option<String>,
    },
    /// List the decisions shadow mode recorded for a session (`adaptive_compaction_shadow`).
    Decisions {
        #[command(flatten)]
        target: SessionArgs,
        /// The native session database.
        #[arg(long, value_name = "PATH")]
        db: PathBuf,
        /// One JSON object per decision instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Choose τ from recorded shadow decisions and labels: the τ with the best F1, the lowest τ
    /// reaching a target precision, and a reliability diagram.
    Tune {
        #[command(flatten)]
        target: SessionArgs,
        /// The native session database holding the decisions.
        #[arg(long, value_name = "PATH")]
        db: PathBuf,
        /// Labels: a labelled research session (`.json`) or a CSV of `turn,label` lines.
        #[arg(long, value_name = "FILE")]
        labels: PathBuf,
        /// The precision the second τ must reach.
        #[arg(long, default_value_t = 0.9)]
        precision: f64,
        /// Write the reliability diagram to this PNG.
        #[arg(long, value_name = "PNG")]
        png: Option<PathBuf>,
    },
    /// Serve chat turns over HTTP with the post-turn lifecycle of spec section 8 (SSE).
    Serve {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// Session database: a SQLite file (created when missing) or a PostgreSQL URL
        /// postgres://user@host:port/dbname shared by every replica (tables created when missing).
        #[arg(long, value_name = "PATH|URL", value_parser = crate::database::parse_db, default_value = "compaction-sessions.db")]
        db: DbArg,
        /// Read the PostgreSQL URL from the environment variable VAR (for a URL that holds a
        /// password).
        #[arg(long, value_name = "VAR", conflicts_with = "db")]
        db_env: Option<String>,
        #[command(flatten)]
        adapters: AdapterArgs,
        /// The largest chat message accepted, in bytes (larger: 413).
        #[arg(long, value_name = "BYTES", default_value_t = service::http::DEFAULT_MAX_MESSAGE_BYTES)]
        max_message_bytes: usize,
        /// The longest a turn waits for the previous turn's evaluation, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
        max_wait: f64,
        #[command(flatten)]
        access: serve::AccessArgs,
        #[command(flatten)]
        limits: serve::LimitArgs,
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
    /// Decision adapter, a registered name: auto, decisions, openai-decisions, chat-logprobs,
    /// offline, or one the binary added (overrides the config file's decision_adapter).
    #[arg(long)]
    decision: Option<String>,
    /// Summarizer adapter, a registered name: auto, chat, offline, or one the binary added
    /// (overrides the config file's summarizer_adapter).
    #[arg(long)]
    summarizer: Option<String>,
    /// The config file (default: the resolved zocrates_config.json, when it exists).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Print JSON records instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    otlp: OtlpArgs,
}

/// Where spans go. `--otlp` takes no value (so `replay --otlp FILE` reads FILE); the URL has
/// its own flag.
#[derive(Debug, Default, clap::Args)]
struct OtlpArgs {
    /// Export spans over OTLP/HTTP: to OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT when set, else to
    /// Phoenix's http://localhost:6006/v1/traces.
    #[arg(long, num_args = 0..=1, require_equals = true, value_name = "NONE")]
    otlp: Option<Option<String>>,
    /// Export spans over OTLP/HTTP to URL (implies --otlp).
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// The Phoenix project the spans are filed under (default: $PHOENIX_PROJECT_NAME, else
    /// Phoenix's `default` project).
    #[arg(long, value_name = "NAME")]
    otlp_project: Option<String>,
}

impl OtlpArgs {
    /// What the flags ask for; `Err` is the usage error for the old `--otlp=URL` form.
    fn request(&self) -> Result<wiring::OtlpRequest, String> {
        if let Some(Some(url)) = &self.otlp {
            return Err(format!(
                "--otlp takes no value (got {url:?}): write --otlp-endpoint {url}"
            ));
        }
        Ok(wiring::OtlpRequest {
            export: self.otlp.is_some() || self.otlp_endpoint.is_some(),
            endpoint: self.otlp_endpoint.clone(),
            project: self.otlp_project.clone(),
        })
    }
}

#[derive(Debug, clap::Args)]
struct AdapterArgs {
    /// Decision adapter, a registered name: auto, decisions, openai-decisions, chat-logprobs,
    /// offline, or one the binary added (overrides the config file's decision_adapter).
    #[arg(long)]
    decision: Option<String>,
    /// Summarizer adapter, a registered name: auto, chat, offline, or one the binary added
    /// (overrides the config file's summarizer_adapter).
    #[arg(long)]
    summarizer: Option<String>,
    /// The config file (default: the resolved zocrates_config.json, when it exists).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(flatten)]
    otlp: OtlpArgs,
}

/// What `recall` brings back: exactly one of a search, a compaction or a turn range.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
struct RecallArgs {
    /// Search the raw events for these words (every word must occur; punctuation and FTS
    /// operators are plain text).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    query: Option<String>,
    /// Print the original events this compaction event covers, verbatim.
    #[arg(long, value_name = "ID")]
    compaction: Option<String>,
    /// Print the events of turns A..B (1-based, inclusive), verbatim.
    #[arg(long, value_name = "A..B", value_parser = crate::recall::parse_turns)]
    turns: Option<(usize, usize)>,
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

/// Runs the `compaction` command line on the process's arguments with the adapters of
/// `registry`, and returns the exit code. The shipped binary is
/// `run_with(Registry::builtin())`.
pub fn run_with(registry: Registry) -> ExitCode {
    run_with_args(registry, std::env::args_os())
}

/// [`run_with`] on `args` (the first one is the program name).
pub fn run_with_args(
    registry: Registry,
    args: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
) -> ExitCode {
    let cli = Cli::parse_from(args);
    let usage_error = |message: String| -> ! {
        use clap::CommandFactory as _;
        Cli::command()
            .error(clap::error::ErrorKind::InvalidValue, message)
            .exit()
    };
    if let Err(message) = cli.command.otlp().map(OtlpArgs::request).transpose() {
        usage_error(message);
    }
    if let Some((decision, summarizer)) = cli.command.adapters() {
        if let Some(name) = decision.filter(|n| !registry.has_decision(n)) {
            usage_error(format!(
                "invalid value '{name}' for '--decision <DECISION>': the registered decision \
                 adapters are: {}",
                registry.decision_names().join(", ")
            ));
        }
        if let Some(name) = summarizer.filter(|n| !registry.has_summarizer(n)) {
            usage_error(format!(
                "invalid value '{name}' for '--summarizer <SUMMARIZER>': the registered \
                 summarizers are: {}",
                registry.summarizer_names().join(", ")
            ));
        }
    }
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
    match runtime.block_on(run(cli, &registry)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", render::for_terminal(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}

/// Logs to stderr (filter from `COMPACTION_LOG`, default `error` plus the OTLP exporter's
/// warnings), and, when spans are
/// exported, sends the program's own spans (one per replayed turn) to the same exporter so that
/// the compaction spans nest under their turn.
pub(crate) fn init_logging(guard: Option<&telemetry::TelemetryGuard>) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // By default errors, plus the exporter's one warning about spans that could not be sent.
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("COMPACTION_LOG").unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(format!("error,{}=warn", telemetry::WARNING_TARGET))
        });
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(fmt);
    let _ = match guard {
        Some(guard) => registry.with(guard.layer()).try_init(),
        None => registry.try_init(),
    };
}

impl Command {
    /// The `--decision` and `--summarizer` flags of a command that builds adapters.
    fn adapters(&self) -> Option<(Option<&str>, Option<&str>)> {
        match self {
            Command::Replay { run, .. } | Command::Evaluate { run, .. } => {
                Some((run.decision.as_deref(), run.summarizer.as_deref()))
            }
            Command::Serve { adapters, .. } => {
                Some((adapters.decision.as_deref(), adapters.summarizer.as_deref()))
            }
            _ => None,
        }
    }

    /// The OTLP flags of a command that runs the engine.
    fn otlp(&self) -> Option<&OtlpArgs> {
        match self {
            Command::Replay { run, .. } | Command::Evaluate { run, .. } => Some(&run.otlp),
            Command::Serve { adapters, .. } => Some(&adapters.otlp),
            _ => None,
        }
    }
}

async fn run(cli: Cli, registry: &Registry) -> Result<(), CliError> {
    match cli.command {
        Command::Demo { json, db, session } => {
            let wiring = wire(registry, ConfigSource::EmbeddedOffline, None, None)?;
            let turns = transcript::parse("demo", DEMO_TRANSCRIPT.as_bytes())?;
            let id = session.unwrap_or_else(|| format!("demo-{}", wiring::run_id()));
            let key = SessionKey::new("zocrates", "demo", id);
            let db = db.map(Database::File);
            replay_turns(wiring, turns, db, key, json, &OtlpArgs::default()).await
        }
        Command::Replay {
            file,
            run,
            db,
            db_env,
            session,
        } => {
            let db = Database::from_args(db, db_env)?;
            let turns = read_transcript(&file)?;
            let wiring = wire(
                registry,
                ConfigSource::Resolve(run.config.clone()),
                run.decision.as_deref(),
                run.summarizer.as_deref(),
            )?;
            let id = session.unwrap_or_else(|| format!("replay-{}", wiring::run_id()));
            let key = SessionKey::new("zocrates", "replay", id);
            replay_turns(wiring, turns, db, key, run.json, &run.otlp).await
        }
        Command::Evaluate {
            run,
            db,
            db_env,
            target,
        } => evaluate(registry, run, target, Database::required(db, db_env)?).await,
        Command::Inspect {
            target,
            db,
            db_env,
            check,
            json,
        } => inspect(&target, Database::required(db, db_env)?, check, json).await,
        Command::Recall {
            target,
            what,
            limit,
            json,
            db,
            db_env,
        } => {
            let key = SessionKey::new(target.app, target.user, target.session);
            let what = match (what.query, what.compaction, what.turns) {
                (Some(q), _, _) => crate::recall::Target::Query(q),
                (_, Some(id), _) => crate::recall::Target::Compaction(id),
                (_, _, Some((a, b))) => crate::recall::Target::Turns(a, b),
                _ => {
                    return Err(CliError::Config(
                        "give --query, --compaction or --turns".into(),
                    ));
                }
            };
            crate::recall::recall(key, Database::required(db, db_env)?, what, limit, json).await
        }
        Command::Decisions { target, db, json } => decisions(&target, db, json),
        Command::Tune {
            target,
            db,
            labels,
            precision,
            png,
        } => tune(&target, db, &labels, precision, png.as_deref()),
        Command::Serve {
            addr,
            db,
            db_env,
            adapters,
            max_message_bytes,
            max_wait,
            access,
            limits,
        } => {
            // `--db-env` wins over `--db`'s default (clap refuses both given).
            let db = Database::from_args(Some(db), db_env)?
                .ok_or_else(|| CliError::Other("no database".to_owned()))?;
            serve::serve(serve::ServeArgs {
                registry: registry.clone(),
                addr,
                db,
                config: adapters.config,
                decision: adapters.decision,
                summarizer: adapters.summarizer,
                otlp: adapters.otlp.request().map_err(CliError::Other)?,
                max_message_bytes,
                max_wait_secs: max_wait,
                access,
                limits,
            })
            .await
        }
        Command::Config { action, config } => config_command(registry, action, config),
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

pub(crate) fn open_store(db: &std::path::Path) -> Result<Arc<SqliteStore>, CliError> {
    SqliteStore::open(db)
        .map(Arc::new)
        .map_err(|e| CliError::Database(e.to_string()))
}

/// An existing session database, opened by its detected layout.
pub(crate) enum ExistingStore {
    /// This project's native store.
    Native(Arc<SqliteStore>),
    /// A Google ADK sessions database, operated on in place.
    Adk(Arc<AdkStore>),
    /// The native store's design on PostgreSQL.
    Postgres(Arc<PostgresStore>),
    /// Google ADK's `DatabaseSessionService` tables on PostgreSQL, operated on in place.
    AdkPostgres(Arc<session_store::AdkPostgresStore>),
}

impl ExistingStore {
    pub(crate) fn port(&self) -> Arc<dyn compaction_core::SessionStore> {
        match self {
            ExistingStore::Native(s) => s.clone(),
            ExistingStore::Adk(s) => s.clone(),
            ExistingStore::Postgres(s) => s.clone(),
            ExistingStore::AdkPostgres(s) => s.clone(),
        }
    }
}

/// How a command uses an existing database.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    /// `evaluate`: may append (and migrate an older native file); damage is checked first.
    Write,
    /// `inspect`: read-only, never migrates, leaves no `-wal`/`-shm` behind.
    Read,
}

/// Opens an existing database: a SQLite file (see [`open_existing_file`]) or the store on
/// PostgreSQL (refused, untouched, when the database holds none; read-only for `inspect`).
pub(crate) async fn open_existing(
    db: &Database,
    access: Access,
) -> Result<ExistingStore, CliError> {
    match db {
        Database::File(path) => {
            if !path.exists() {
                return Err(CliError::Database(format!(
                    "{}: no such database file",
                    wiring::shown(path)
                )));
            }
            open_existing_file(path, access)
        }
        Database::Postgres { url, .. } => {
            // The native store, or ADK's own tables: detected once, on the pool that serves.
            let access = match access {
                Access::Write => session_store::PostgresAccess::Existing,
                Access::Read => session_store::PostgresAccess::ReadOnly,
            };
            crate::database::open_existing_postgres(url, access).await
        }
    }
}

/// Opens an existing database file: the native store, or ADK's `DatabaseSessionService` /
/// `SqliteSessionService` layout; ADK's legacy v0 layout is refused naming `adk migrate session`.
fn open_existing_file(db: &std::path::Path, access: Access) -> Result<ExistingStore, CliError> {
    let database = |e: session_store::SessionStoreError| CliError::Database(e.to_string());
    let options = session_store::OpenOptions::default();
    let read = options.integrity(session_store::IntegrityCheck::Skip);
    match detect_layout(db).map_err(database)? {
        Layout::AdkDatabase | Layout::AdkSqlite | Layout::AdkLegacyV0 => match access {
            Access::Write => AdkStore::open_with(db, options),
            Access::Read => AdkStore::open_read_only(db, read),
        }
        .map(|s| ExistingStore::Adk(Arc::new(s)))
        .map_err(database),
        Layout::Native => match access {
            Access::Write => open_store(db).map(ExistingStore::Native),
            Access::Read => SqliteStore::open_read_only(db, read)
                .map(|s| ExistingStore::Native(Arc::new(s)))
                .map_err(database),
        },
        // Reading commands never write: an empty file is not turned into a store.
        layout => Err(CliError::Database(format!(
            "{}: not a session database (it is {}); `compaction replay --db` creates one",
            wiring::shown(db),
            layout.describe()
        ))),
    }
}

pub(crate) fn build_engine(
    wiring: &Wiring,
    store: Arc<dyn compaction_core::SessionStore>,
    clock: Arc<SystemClock>,
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
    .shadow(wiring.shadow)
    .probe_deadline(wiring.probe_deadline)
    .summarize_deadline(wiring.summarize_deadline)
    .build()
    .map_err(|e| CliError::Config(e.to_string()))
}

async fn replay_turns(
    wiring: Wiring,
    turns: Vec<transcript::TranscriptTurn>,
    db: Option<Database>,
    key: SessionKey,
    json: bool,
    otlp: &OtlpArgs,
) -> Result<(), CliError> {
    let tmp = tempfile::tempdir()
        .map_err(|e| CliError::Other(format!("cannot create a temporary directory: {e}")))?;
    let kept = db.is_some();
    let db = db.unwrap_or_else(|| Database::File(tmp.path().join("sessions.db")));
    let opened = Store::open(&db).await?;
    // Where the session is kept (the file, or the database without its password) and the
    // arguments that name it again.
    let (kept_in, reopen) = (opened.shown(&db), opened.reopen_args(&db));
    let kept = kept.then_some(kept_in);
    let store = opened.port();
    let (telemetry, guard, span_config) =
        wiring::telemetry(otlp.request().map_err(CliError::Other)?)?;
    init_logging(guard.as_ref());
    let clock = Arc::new(SystemClock::default());
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
        })?
        .with_span_config(span_config);
    let mut out = Output::new(std::io::stdout().lock());
    let banner = wiring.banner();
    if json {
        out.json(&serde_json::json!({ "banner": banner }).to_string());
    } else {
        out.line(&banner);
        out.line(&render::table_header());
    }
    let progress = std::io::stderr().is_terminal() && !std::io::stdout().is_terminal();
    let mut last: Option<TurnRecord> = None;
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
                // The session cannot be finished (the store failed, e.g. a full disk): roll
                // it back so that its id can be used again, and say whether that worked.
                let rolled_back = match opened.delete_session(&key).await {
                    Ok(_) => {
                        format!("session {key} was rolled back (deleted); its id can be used again")
                    }
                    Err(d) => format!(
                        "session {key} could not be rolled back ({d}); it holds the turns before turn {}",
                        i + 1
                    ),
                };
                return Err(CliError::Database(format!(
                    "turn {} of {}: {e}; {rolled_back}",
                    i + 1,
                    turns.len()
                )));
            }
        };
        if json {
            out.json(&serde_json::to_string(&record).map_err(|e| CliError::Other(e.to_string()))?);
        } else {
            out.line(&render::table_row(&record));
        }
        last = Some(record);
    }
    if progress {
        eprintln!();
    }
    let compactions = store
        .compaction_history(&key)
        .await
        .map_err(|e| CliError::Database(e.to_string()))?;
    if !json {
        // Only the text output shows the context; an uncompacted one is the whole session.
        let context = store
            .load_context(&key)
            .await
            .map_err(|e| CliError::Database(e.to_string()))?;
        out.line("\nFinal assembled context for the next turn:");
        out.line(render::context(&context, 400).trim_end());
        out.line("\nCompaction history:");
        out.line(render::compaction_history(&compactions).trim_end());
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
            out.json(&serde_json::json!({ "turns": turns.len(), "compactions": compactions, "next_prompt_tokens_without": without, "next_prompt_tokens_with": with, "tokens_saved": saved, "session": key.to_string(), "db": kept }).to_string());
        } else {
            out.line(&format!(
                "\n{} turns, {compactions} compactions. Next prompt: {without} tokens without compaction, {with} with: {saved} tokens saved ({pct:.0}%).",
                turns.len()
            ));
            if let Some(kept_in) = &kept {
                out.line(&format!(
                    "Session {key} is kept in {kept_in}; to see it again: compaction inspect {reopen} --app {} --user {} --session {}",
                    render::shell_word(&key.app_name),
                    render::shell_word(&key.user_id),
                    render::shell_word(&key.session_id),
                ));
            }
        }
    }
    drop(guard);
    if let Some(e) = out.failure() {
        // The output is lost, not the work: the session was finished.
        return Err(CliError::Other(format!(
            "cannot write output: {e}; the replay went on without it and finished session {key} \
             ({} turns, {compactions} compactions stored{})",
            turns.len(),
            kept.as_deref()
                .map(|p| format!(" in {p}"))
                .unwrap_or_default()
        )));
    }
    Ok(())
}

/// Standard output that may fail (a closed pipe, a full disk): the first failure is kept and
/// later lines are dropped, so that a replay still finishes its session and says so.
struct Output<W: Write> {
    out: W,
    failed: Option<std::io::Error>,
}

impl<W: Write> Output<W> {
    fn new(out: W) -> Self {
        Output { out, failed: None }
    }

    /// Writes one line for a person ([`emit`]); never fails, see [`Output::failure`].
    fn line(&mut self, line: &str) {
        self.raw(&render::for_terminal(line));
    }

    /// Writes one JSON line exactly.
    fn json(&mut self, line: &str) {
        self.raw(line);
    }

    fn raw(&mut self, line: &str) {
        if self.failed.is_none()
            && let Err(e) = writeln!(self.out, "{line}").and_then(|()| self.out.flush())
        {
            self.failed = Some(e);
        }
    }

    /// The first write failure, if any.
    fn failure(&self) -> Option<&std::io::Error> {
        self.failed.as_ref()
    }
}

/// Writes one line for a person: control characters and bidirectional-text controls in it are
/// shown escaped ([`render::for_terminal`]), so session text cannot drive the terminal.
fn emit(out: &mut impl Write, line: &str) -> Result<(), CliError> {
    emit_json(out, &render::for_terminal(line))
}

/// Writes one line exactly as given (JSON records: serde_json already escapes what JSON must).
fn emit_json(out: &mut impl Write, line: &str) -> Result<(), CliError> {
    writeln!(out, "{line}").map_err(|e| CliError::Other(format!("cannot write output: {e}")))
}

async fn evaluate(
    registry: &Registry,
    run: RunArgs,
    target: SessionArgs,
    db: Database,
) -> Result<(), CliError> {
    let wiring = wire(
        registry,
        ConfigSource::Resolve(run.config.clone()),
        run.decision.as_deref(),
        run.summarizer.as_deref(),
    )?;
    let store = open_existing(&db, Access::Write).await?;
    let (telemetry, guard, _) = wiring::telemetry(run.otlp.request().map_err(CliError::Other)?)?;
    init_logging(guard.as_ref());
    let engine = build_engine(
        &wiring,
        store.port(),
        Arc::new(SystemClock::default()),
        Arc::new(ProcessIds::default()),
        telemetry,
    )?;
    let key = SessionKey::new(target.app, target.user, target.session);
    let outcome = engine.evaluate_and_compact(&key).await;
    drop(guard);
    let warnings = scope_warnings(&store, &key).await;
    for warning in &warnings {
        eprintln!("warning: session {key}: {warning}");
    }
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
            "warnings": warnings,
        });
        emit_json(&mut out, &record.to_string())?;
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

/// What a person should know about the session besides the outcome: on an ADK file, user
/// messages ADK's Runner filed inside a pipeline scope no `finish_task` closed (one outline
/// read). A failed read is no warning; the engine already reported the store.
async fn scope_warnings(store: &ExistingStore, key: &SessionKey) -> Vec<String> {
    let found = match store {
        ExistingStore::AdkPostgres(store) => store.scoped_user_messages(key).await.ok(),
        _ => None,
    };
    if let Some(found) = found {
        return if found.is_empty() {
            Vec::new()
        } else {
            vec![found.to_string()]
        };
    }
    match store {
        ExistingStore::Adk(store) => store
            .blocking()
            .scoped_user_messages(key)
            .ok()
            .filter(|found| !found.is_empty())
            .map(|found| found.to_string())
            .into_iter()
            .collect(),
        ExistingStore::Native(_) | ExistingStore::Postgres(_) | ExistingStore::AdkPostgres(_) => {
            Vec::new()
        }
    }
}

async fn inspect(
    target: &SessionArgs,
    db: Database,
    check: bool,
    json: bool,
) -> Result<(), CliError> {
    let file = crate::database::file_of(&db);
    if check {
        let Some(file) = file else {
            return Err(CliError::Input(
                "--check runs SQLite's integrity check on a database file; a PostgreSQL \
                 database is checked by PostgreSQL itself (leave out --check)"
                    .to_owned(),
            ));
        };
        if !file.exists() {
            return Err(CliError::Database(format!(
                "{}: no such database file",
                wiring::shown(file)
            )));
        }
        session_store::check_integrity(file).map_err(|e| CliError::Database(e.to_string()))?;
    }
    let key = SessionKey::new(
        target.app.clone(),
        target.user.clone(),
        target.session.clone(),
    );
    let database = |e: session_store::SessionStoreError| CliError::Database(e.to_string());
    // (events, revision, the view's compactions, the context)
    let opened = open_existing(&db, Access::Read).await?;
    let shown = match (&opened, file) {
        (ExistingStore::Postgres(store), _) => store.database().to_owned(),
        (ExistingStore::AdkPostgres(store), _) => store.database().to_owned(),
        (_, Some(file)) => wiring::shown(file),
        (_, None) => String::new(),
    };
    let (events, revision, compactions, context) = match &opened {
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
        ExistingStore::Adk(_) | ExistingStore::AdkPostgres(_) => {
            let session = match &opened {
                ExistingStore::AdkPostgres(store) => {
                    store.get_session(&key).await.map_err(database)?
                }
                ExistingStore::Adk(store) => {
                    store.blocking().get_session(&key).map_err(database)?
                }
                _ => unreachable!("matched above"),
            };
            let compactions = compaction_core::compaction_history(&session.events);
            // Exactly what ADK's prompt builder shows: every summary it still renders.
            let context = compaction_core::adk_prompt_context(&session.events);
            let scoped = compaction_core::scoped_user_messages(&session.events);
            if !scoped.is_empty() {
                eprintln!("warning: session {key}: {scoped}");
            }
            (
                session.events.len() as u64,
                session.revision,
                compactions,
                context,
            )
        }
        ExistingStore::Postgres(store) => {
            let header = store.header(&key).await.map_err(database)?;
            (
                header.revision.0,
                header.revision,
                SessionStore::compaction_history(&**store, &key)
                    .await
                    .map_err(|e| CliError::Database(e.to_string()))?,
                SessionStore::load_context(&**store, &key)
                    .await
                    .map_err(|e| CliError::Database(e.to_string()))?,
            )
        }
    };
    let mut out = std::io::stdout().lock();
    if json {
        let value = serde_json::json!({
            "session": key.to_string(),
            "events": events,
            "revision": revision.0,
            "integrity_check": check.then_some("ok"),
            "compaction_history": render::compaction_history_json(&compactions),
            "context": render::context_json(&context),
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
    emit(
        &mut out,
        render::compaction_history(&compactions).trim_end(),
    )?;
    emit(&mut out, "\nAssembled context for the next turn:")?;
    emit(&mut out, render::context(&context, usize::MAX).trim_end())
}

/// The shadow decisions of a stored native session (opened for reading only).
fn recorded_decisions(
    target: &SessionArgs,
    db: &std::path::Path,
) -> Result<Vec<compaction_core::DecisionRecord>, CliError> {
    if !db.exists() {
        return Err(CliError::Database(format!(
            "{}: no such database file",
            wiring::shown(db)
        )));
    }
    let key = SessionKey::new(
        target.app.clone(),
        target.user.clone(),
        target.session.clone(),
    );
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

fn decisions(target: &SessionArgs, db: PathBuf, json: bool) -> Result<(), CliError> {
    let decisions = recorded_decisions(target, &db)?;
    let mut out = std::io::stdout().lock();
    if json {
        for d in &decisions {
            let line = serde_json::to_string(d).map_err(|e| CliError::Other(e.to_string()))?;
            emit(&mut out, &line)?;
        }
        return Ok(());
    }
    emit(&mut out, shadow::decisions_table(&decisions).trim_end())
}

fn tune(
    target: &SessionArgs,
    db: PathBuf,
    labels: &std::path::Path,
    precision: f64,
    png: Option<&std::path::Path>,
) -> Result<(), CliError> {
    if !(0.0..=1.0).contains(&precision) {
        return Err(CliError::Input(format!(
            "--precision must be a number in [0, 1], got {precision}"
        )));
    }
    let decisions = recorded_decisions(target, &db)?;
    let labels = shadow::read_labels(labels)?;
    let tuning = shadow::tune(&decisions, &labels, precision);
    let mut out = std::io::stdout().lock();
    emit(&mut out, shadow::report(&tuning).trim_end())?;
    if let Some(png) = png {
        shadow::write_reliability_png(&tuning, png)?;
        emit(
            &mut out,
            &format!("reliability diagram: {}", wiring::shown(png)),
        )?;
    }
    Ok(())
}

fn config_command(
    registry: &Registry,
    action: ConfigAction,
    config: Option<PathBuf>,
) -> Result<(), CliError> {
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
            let file = if compaction_core::KEYS.contains(&key.as_str()) {
                store
                    .set(&key, &value)
                    .map_err(|e| CliError::Config(e.to_string()))?
            } else {
                wiring::set_adapter_key(registry, &store, &key, &value)?
            };
            emit(
                &mut out,
                &format!("{key} set in {}", wiring::shown(file.path())),
            )
        }
    }
}
