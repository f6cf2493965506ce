//! The command line of `compaction`, as [`run_with`]: the clap tree, the checks clap cannot
//! make (registered adapter names, the old `--otlp=URL` form), and the dispatch to one module
//! per subcommand. Each module owns its flags and what its command does: `demo` and `replay`
//! run the engine on a conversation, `evaluate` once on a stored session after a turn (the
//! hook a non-Rust backend calls), `inspect`, `recall` and `decisions` read a stored session,
//! `tune` chooses τ from shadow decisions, `serve` runs the service, `config` edits settings.
//!
//! It is the only code that prints. Exit codes: 0 success, 1 unexpected failure, 2 usage
//! error, 3 bad input (transcript or config), 4 database error (busy, corrupt, unknown session).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::CliError;
use crate::registry::Registry;
use crate::render;

mod args;
mod config;
mod decisions;
mod demo;
mod evaluate;
mod inspect;
mod output;
mod recall;
mod replay;
mod serve;
mod tune;

use args::OtlpArgs;

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
    Demo(demo::DemoArgs),
    /// Replay a JSONL transcript (`-` for stdin) through the engine, one evaluation per turn.
    Replay(replay::ReplayArgs),
    /// Run one post-turn evaluation on a stored session.
    Evaluate(evaluate::EvaluateArgs),
    /// Print a stored session's assembled context and compaction history (read-only).
    Inspect(inspect::InspectArgs),
    /// Lossless recall (read-only): search a session's raw events, or print the original
    /// events of a compaction or a turn range verbatim.
    Recall(recall::RecallArgs),
    /// List the decisions shadow mode recorded for a session (`adaptive_compaction_shadow`).
    Decisions(decisions::DecisionsArgs),
    /// Choose τ from recorded shadow decisions and labels: the τ with the best F1, the lowest τ
    /// reaching a target precision, and a reliability diagram.
    Tune(tune::TuneArgs),
    /// Serve chat turns over HTTP with the post-turn lifecycle of spec section 8 (SSE).
    Serve(serve::ServeArgs),
    /// Show or change the settings file (zocrates_config.json).
    Config(config::ConfigArgs),
}

impl Command {
    /// The `--decision` and `--summarizer` flags of a command that builds adapters.
    fn adapters(&self) -> Option<(Option<&str>, Option<&str>)> {
        match self {
            Command::Replay(replay::ReplayArgs { run, .. })
            | Command::Evaluate(evaluate::EvaluateArgs { run, .. }) => Some(&run.adapters),
            Command::Serve(serve::ServeArgs { adapters, .. }) => Some(adapters),
            _ => None,
        }
        .map(|a| (a.decision.as_deref(), a.summarizer.as_deref()))
    }

    /// The OTLP flags of a command that runs the engine.
    fn otlp(&self) -> Option<&OtlpArgs> {
        match self {
            Command::Replay(replay::ReplayArgs { run, .. })
            | Command::Evaluate(evaluate::EvaluateArgs { run, .. }) => Some(&run.otlp),
            Command::Serve(serve::ServeArgs { otlp, .. }) => Some(otlp),
            _ => None,
        }
    }

    /// The usage error clap cannot find: an `--otlp=URL`, or an adapter name `registry` does
    /// not hold.
    fn usage_error(&self, registry: &Registry) -> Option<String> {
        if let Some(Err(message)) = self.otlp().map(OtlpArgs::request) {
            return Some(message);
        }
        let (decision, summarizer) = self.adapters()?;
        if let Some(name) = decision.filter(|n| !registry.has_decision(n)) {
            return Some(format!(
                "invalid value '{name}' for '--decision <DECISION>': the registered decision \
                 adapters are: {}",
                registry.decision_names().join(", ")
            ));
        }
        summarizer
            .filter(|n| !registry.has_summarizer(n))
            .map(|name| {
                format!(
                    "invalid value '{name}' for '--summarizer <SUMMARIZER>': the registered \
                     summarizers are: {}",
                    registry.summarizer_names().join(", ")
                )
            })
    }

    async fn run(self, registry: &Registry) -> Result<(), CliError> {
        match self {
            Command::Demo(args) => demo::run(registry, args).await,
            Command::Replay(args) => replay::run(registry, args).await,
            Command::Evaluate(args) => evaluate::run(registry, args).await,
            Command::Inspect(args) => inspect::run(args).await,
            Command::Recall(args) => recall::run(args).await,
            Command::Decisions(args) => decisions::run(&args),
            Command::Tune(args) => tune::run(&args),
            Command::Serve(args) => serve::run(registry, args).await,
            Command::Config(args) => config::run(registry, args),
        }
    }
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
    if let Some(message) = cli.command.usage_error(&registry) {
        use clap::CommandFactory as _;
        Cli::command()
            .error(clap::error::ErrorKind::InvalidValue, message)
            .exit()
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
    match runtime.block_on(cli.command.run(&registry)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", render::for_terminal(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}
