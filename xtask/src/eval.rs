//! `cargo xtask eval-decision [--cases FILE | --sessions DIR [--per-turn]] [--adapter NAME] [--tau X] [--config FILE]`:
//! runs a decision adapter over labelled cases and prints one line per split:
//! `split=test n=426 auc=… acc@tau=… f1@tau=… recall@tau=… spec@tau=… f1@best=… brier=… ece=…`.
//!
//! With `--sessions DIR` it reads the labelled research sessions of DIR instead (format in
//! `data/research-sessions/README.md`) and probes after every turn with the decision
//! state the engine sends when its gate is open and nothing is compacted
//! (`decision_client::sessions`), label `expect.pivot`; it prints one line per session and one
//! `session=overall`, and with `--per-turn` each turn's p beside its labels.
//!
//! `--loso` first: leave-one-session-out figures of the embedding model and the lexical model,
//! each session scored by a model fitted without it (see [`loso`]).
//!
//! Adapters: `offline` (default), the baselines `novelty` and `constant`, and the remote
//! `decisions`, `chat-logprobs` and `auto`, built by decision-client's factory from the
//! settings file given with `--config` (the spec's keys plus the `decision_*` keys) and the
//! environment. The metrics live in `decision_client::eval`; this file only drives them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use compaction_core::DEFAULT_STATE_BUDGET_TOKENS;
use compaction_core::{CharsPerToken, DecisionState, EffectiveSettings, Settings};
use decision_client::eval::{CONSTANT_BASELINE, by_split, load_cases, metrics, score_states};
use decision_client::offline::lexical_novelty;
use decision_client::sessions::{TurnCase, load_sessions, turn_cases};
use decision_client::{AdapterChoice, DecisionConfig, build_decision_model, process_env};
use serde_json::{Map, Value};

const USAGE: &str = "usage: cargo xtask eval-decision [--loso [--cases FILE] [--sessions DIR]... | --cases FILE | --sessions DIR [--per-turn]] [--adapter offline|novelty|constant|decisions|chat-logprobs|openai-decisions|auto] [--tau X] [--config FILE]";

struct Args {
    cases: PathBuf,
    sessions: Option<PathBuf>,
    per_turn: bool,
    adapter: String,
    tau: Option<f64>,
    config: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        cases: test_data::repo_path(test_data::TIAGE_CASES),
        sessions: None,
        per_turn: false,
        adapter: "offline".to_owned(),
        tau: None,
        config: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--cases" => parsed.cases = PathBuf::from(value()?),
            "--sessions" => parsed.sessions = Some(PathBuf::from(value()?)),
            "--per-turn" => parsed.per_turn = true,
            "--adapter" => parsed.adapter = value()?,
            "--config" => parsed.config = Some(PathBuf::from(value()?)),
            "--tau" => {
                let v = value()?;
                let tau = v
                    .parse::<f64>()
                    .ok()
                    .filter(|t| (0.0..=1.0).contains(t))
                    .ok_or_else(|| format!("--tau must be a number in [0, 1], got {v}"))?;
                parsed.tau = Some(tau);
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if parsed.per_turn && parsed.sessions.is_none() {
        return Err(format!("--per-turn needs --sessions DIR\n{USAGE}"));
    }
    Ok(parsed)
}

/// The settings file as a JSON object, or an empty one.
fn settings_map(path: Option<&Path>) -> Result<Map<String, Value>, String> {
    let Some(path) = path else {
        return Ok(Map::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!(
            "{}: expected a JSON object of settings",
            path.display()
        )),
        Err(e) => Err(format!("{}: invalid JSON: {e}", path.display())),
    }
}

/// The spec's settings: defaults overlaid with the file's keys.
fn effective_settings(map: &Map<String, Value>) -> Result<EffectiveSettings, String> {
    let mut merged = serde_json::to_value(Settings::default()).map_err(|e| e.to_string())?;
    if let Value::Object(defaults) = &mut merged {
        for key in compaction_core::KEYS {
            if let Some(v) = map.get(key) {
                defaults.insert(key.to_owned(), v.clone());
            }
        }
    }
    let settings: Settings =
        serde_json::from_value(merged).map_err(|e| format!("settings: {e}"))?;
    settings.effective().map_err(|e| e.to_string())
}

/// Scores every decision state with the chosen adapter.
async fn score(
    adapter: &str,
    settings: &EffectiveSettings,
    config: &Map<String, Value>,
    states: &[&DecisionState],
) -> Result<Vec<Option<f64>>, String> {
    match adapter {
        "novelty" => Ok(states.iter().map(|s| Some(lexical_novelty(s))).collect()),
        "constant" => Ok(states.iter().map(|_| Some(CONSTANT_BASELINE)).collect()),
        name => {
            let choice = AdapterChoice::parse(name)
                .ok_or_else(|| format!("unknown adapter {name}\n{USAGE}"))?;
            let mut decision_config =
                DecisionConfig::from_map(config).map_err(|e| e.to_string())?;
            decision_config.adapter = choice;
            let selected = build_decision_model(settings, &decision_config, process_env).map_err(
                |e| match e {
                    decision_client::FactoryError::NotBuilt { .. } => format!(
                        "{e}; for a remote model run \
                         `cargo run -p xtask --features remote -- eval-decision ...`"
                    ),
                    e => e.to_string(),
                },
            )?;
            Ok(score_states(selected.model.as_ref(), &settings.decision_model, states).await)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let args = parse_args(args)?;
    let config = settings_map(args.config.as_deref())?;
    let settings = effective_settings(&config)?;
    let tau = args.tau.unwrap_or(settings.threshold);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    if let Some(dir) = &args.sessions {
        return run_sessions(dir, &args, &settings, &config, tau, &runtime);
    }
    let cases = load_cases(&args.cases).map_err(|e| e.to_string())?;
    eprintln!(
        "eval-decision: adapter={} tau={tau} cases={}",
        args.adapter,
        args.cases.display()
    );
    for (split, members) in by_split(&cases) {
        let states: Vec<DecisionState> = members.iter().map(|c| c.state()).collect();
        let states: Vec<&DecisionState> = states.iter().collect();
        let scores = runtime.block_on(score(&args.adapter, &settings, &config, &states))?;
        let scored: Vec<(f64, bool)> = scores
            .iter()
            .zip(&members)
            .filter_map(|(p, c)| p.map(|p| (p, c.label)))
            .collect();
        let failed = failed_note(members.len() - scored.len());
        match metrics(&scored, tau) {
            Some(m) => println!("split={split} {m}{failed}"),
            None => println!("split={split} n=0{failed}"),
        }
    }
    Ok(())
}

/// ` failed=N` when N probes failed.
fn failed_note(failed: usize) -> String {
    if failed > 0 {
        format!(" failed={failed}")
    } else {
        String::new()
    }
}

/// `--sessions DIR`: every turn of every session, per session and overall.
fn run_sessions(
    dir: &Path,
    args: &Args,
    settings: &EffectiveSettings,
    config: &Map<String, Value>,
    tau: f64,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), String> {
    let sessions = load_sessions(dir).map_err(|e| e.to_string())?;
    eprintln!(
        "eval-decision: adapter={} tau={tau} sessions={} (every turn probed, gate open, nothing compacted)",
        args.adapter,
        dir.display()
    );
    let mut overall: Vec<(f64, bool)> = Vec::new();
    let mut overall_failed = 0;
    for session in &sessions {
        let cases: Vec<TurnCase> = turn_cases(session, &CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS);
        let states: Vec<&DecisionState> = cases.iter().map(|c| &c.state).collect();
        let scores = runtime.block_on(score(&args.adapter, settings, config, &states))?;
        if args.per_turn {
            for (case, p) in cases.iter().zip(&scores) {
                let labels = [
                    (case.expect.pivot, "pivot"),
                    (case.expect.clarification_loop, "loop"),
                    (case.expect.closes_topic, "closes"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, name)| *name)
                .collect::<Vec<_>>()
                .join(",");
                let compress = p.map(|p| p >= tau);
                let p = p.map_or_else(|| "failed".to_owned(), |p| format!("{p:.3}"));
                let verdict = match compress {
                    Some(true) => "COMPRESS",
                    Some(false) => "CONTINUE",
                    None => "-",
                };
                let miss = match (compress, case.expect.pivot) {
                    (Some(true), false) => "  <- false COMPRESS",
                    (Some(false), true) => "  <- missed pivot",
                    _ => "",
                };
                println!(
                    "session={} turn={:>2} p={p} {verdict:<8} labels={}{miss}",
                    case.session,
                    case.turn,
                    if labels.is_empty() { "-" } else { &labels }
                );
            }
        }
        let scored: Vec<(f64, bool)> = scores
            .iter()
            .zip(&cases)
            .filter_map(|(p, c)| p.map(|p| (p, c.expect.pivot)))
            .collect();
        let failed = cases.len() - scored.len();
        overall_failed += failed;
        match metrics(&scored, tau) {
            Some(m) => println!("session={} {m}{}", session.session, failed_note(failed)),
            None => println!("session={} n=0{}", session.session, failed_note(failed)),
        }
        overall.extend(scored);
    }
    match metrics(&overall, tau) {
        Some(m) => println!("session=overall {m}{}", failed_note(overall_failed)),
        None => println!("session=overall n=0{}", failed_note(overall_failed)),
    }
    Ok(())
}

/// `eval-decision --loso [--cases FILE] [--sessions DIR]...`: leave-one-session-out. Each
/// labelled session (by default the repository's, and the shared ones when
/// `COMPACTION_OUTSIDE_DATA` names them) is scored by the embedding model's head and by the
/// lexical model, both refitted without it; then the TIAGE test split by the heads fitted on
/// every session. Built in release: the fit is a few seconds there. The
/// fitting lives in decision-client's `fit_embedding_model` example (it needs the `embedding`
/// feature and the model's files, which xtask does not build): this runs it.
fn loso(args: &[String]) -> ExitCode {
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "adaptive-compaction-decision-client",
            "--features",
            "embedding,eval",
            "--example",
            "fit_embedding_model",
            "--",
        ])
        .args(args)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("eval-decision --loso: the fit example failed ({s})");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("eval-decision --loso: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Entry point of the subcommand; `args` follow `eval-decision`.
pub(crate) fn eval_decision(args: &[String]) -> ExitCode {
    if args.first().is_some_and(|a| a == "--loso") {
        return loso(&args[1..]);
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eval-decision: {e}");
            ExitCode::FAILURE
        }
    }
}
