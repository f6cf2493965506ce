//! `cargo xtask eval-summary [--sessions DIR] [--also DIR]... [--tuned a,b,...] [--dump DIR]
//! [--summarizer offline|chat|auto] [--decision offline|local|embedding]
//! [--config FILE] [--canary] [--verbose]`: how much of the folded turns a rolling summary still holds.
//!
//! Each labelled session (the repository's `data/research-sessions/*.json` by default, `--sessions DIR` for others;
//! format in its README) is
//! replayed through the real engine (`compaction_core::Engine`, a `SqliteStore` in a temporary
//! directory, the cli's replay driver) under four runs:
//! - `defaults`: the spec's settings and the decision model a user gets from them: what
//!   `decision_adapter = auto` runs without a remote host (`local`: the embedding model when its
//!   files are installed, else the lexical model); `--decision offline` forces the lexical model,
//!   as every figure before session 13 was measured. The run's first line names the model;
//! - `every-2`, `every-3`, `every-5`: forced folds — a decision model that always answers
//!   p = 1, token floor 0, `min_turns` N (K = 1 for N = 2, since min_turns >= K + 1; K = 2
//!   otherwise), so the engine folds every N turns.
//!
//! After each fold (a new live summary) it checks the live summary against the labels of the
//! turns it covers: **fact survival** by kind (`citation`: an author-year key; `number`: a
//! number with a unit or label; `other`: a bare number), a fact surviving when it occurs in
//! the summary (case-insensitive, whitespace collapsed); **superseded** lines
//! (`checks.superseded_lines`); **tokens** (chars / 4, the core's estimator) against the
//! summarizer's budget; **citations lost** (a DOI of a covered turn's `# Cited Sources` the
//! summary no longer holds); **bibliography entries with no claim** (a listed source whose
//! first author and year no prose line of the summary names).
//!
//! Issue 30's checks ([`crate::summary_checks`]): **restated** — a line that states a
//! retracted claim without its corrected content (a marker word is not enough); **valid
//! marked** — a valid fact (`facts[]`, `disputed_but_stands[]`) shown as superseded or
//! withdrawn; **duplicates** — extra lines stating the same labelled fact; **receipt** — the
//! compaction's receipt agrees with its summary. `--tuned a,b,...` names the sessions looked at while tuning: the totals of each
//! run are reported for them and for the others apart.
//!
//! `--canary` replays a generated 55-turn session with one planted fact per turn, five types in
//! rotation (number with unit, citation key, identifier or path, user constraint, decision),
//! folds every 5 turns, and reports the survival of every planted fact folded so far after 1,
//! 3, 5 and 10 folds, per type.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod canary;
mod measure;
mod replay;
mod session;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value};
use summarizer::{SummarizerAdapter, SummarizerConfig};

use canary::*;
use measure::*;
use replay::*;
use session::*;

const USAGE: &str = "usage: cargo xtask eval-summary [--sessions DIR] [--also DIR]... [--tuned a,b,...] [--dump DIR] [--summarizer offline|chat|auto] [--decision offline|local|embedding] [--config FILE] [--canary] [--verbose]";

struct Args {
    sessions: PathBuf,
    /// More session directories (`--also DIR`, repeatable).
    more_sessions: Vec<PathBuf>,
    /// Sessions looked at while tuning (`--tuned a,b`): reported apart from the others.
    tuned: Vec<String>,
    /// Where to write each run's last summary (`--dump DIR`), for reading.
    dump: Option<PathBuf>,
    adapter: SummarizerAdapter,
    /// The `defaults` run's `decision_adapter` (`--decision`); else the `--config` file's,
    /// else `local`.
    decision: Option<String>,
    config: Option<PathBuf>,
    canary: bool,
    verbose: bool,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        sessions: test_data::repo_path(test_data::RESEARCH_SESSIONS),
        more_sessions: Vec::new(),
        tuned: Vec::new(),
        dump: None,
        adapter: SummarizerAdapter::Offline,
        decision: None,
        config: None,
        canary: false,
        verbose: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--sessions" => parsed.sessions = PathBuf::from(value()?),
            "--also" => parsed.more_sessions.push(PathBuf::from(value()?)),
            "--dump" => parsed.dump = Some(PathBuf::from(value()?)),
            "--tuned" => {
                parsed.tuned = value()?
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
            }
            "--config" => parsed.config = Some(PathBuf::from(value()?)),
            "--summarizer" => {
                let v = value()?;
                parsed.adapter = match v.as_str() {
                    "offline" => SummarizerAdapter::Offline,
                    "chat" => SummarizerAdapter::Chat,
                    "auto" => SummarizerAdapter::Auto,
                    _ => {
                        return Err(format!(
                            "--summarizer must be offline, chat or auto, got {v}\n{USAGE}"
                        ));
                    }
                }
            }
            "--decision" => {
                let v = value()?;
                if !matches!(v.as_str(), "offline" | "local" | "embedding") {
                    return Err(format!(
                        "--decision must be offline, local or embedding, got {v}\n{USAGE}"
                    ));
                }
                parsed.decision = Some(v);
            }
            "--canary" => parsed.canary = true,
            "--verbose" => parsed.verbose = true,
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(parsed)
}

// ---------------------------------------------------------------------------------------------
// The labelled sessions.

fn settings_file(path: Option<&Path>) -> Result<Map<String, Value>, String> {
    let Some(path) = path else {
        return Ok(Map::new());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("{}: expected a JSON object", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The `*.json` sessions of `--sessions` and every `--also` directory, by name.
fn session_files(args: &Args) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in std::iter::once(&args.sessions).chain(&args.more_sessions) {
        files.extend(
            std::fs::read_dir(dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json")),
        );
    }
    files.sort_by_key(|p| p.file_stem().map(|s| s.to_owned()));
    if files.is_empty() {
        return Err(format!("{}: no *.json session", args.sessions.display()));
    }
    Ok(files)
}

/// Adds every fold of one replay to `totals`, printing each with `--verbose`.
fn count_folds(
    name: &str,
    replayed: &Replayed,
    turns: &[EvalTurn],
    checks: &Corrections,
    budget: usize,
    verbose: bool,
    totals: &mut Totals,
) {
    for (i, fold) in replayed.folds.iter().enumerate() {
        let m = measure(fold, turns, checks);
        totals.over_budget += usize::from(m.tokens > budget);
        totals.over_bar += usize::from(m.tokens > SUMMARY_BAR_TOKENS);
        totals.max_tokens = totals.max_tokens.max(m.tokens);
        totals.restated += m.restated.len();
        totals.valid_marked += m.valid_marked.len();
        totals.receipt_mismatches += usize::from(m.receipt.is_some());
        if verbose {
            println!(
                "  {name} fold {} (after turn {}, covers {} turns): {}",
                i + 1,
                fold.after_turn,
                fold.covered.len(),
                fold_line(&m)
            );
            for s in &m.restated {
                println!("      restated: {s}");
            }
            for s in &m.valid_marked {
                println!("      valid marked: {s}");
            }
        }
    }
}

async fn run_sessions(
    args: &Args,
    config: &SummarizerConfig,
    map: &Map<String, Value>,
) -> Result<bool, String> {
    let files = session_files(args)?;
    let budget = config.summary_max_tokens;
    let mut ok = true;
    for run in RUNS {
        println!("== run {} ==", run.name);
        if run.every.is_none() {
            let effective = settings_for(run).effective().map_err(|e| e.to_string())?;
            let (_, why) = decision_model(run, &effective, map)?;
            println!("decision model: {why}");
        }
        let mut groups: BTreeMap<&str, Totals> = BTreeMap::new();
        for file in &files {
            let name = file.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
            let group = if args.tuned.is_empty() {
                "all"
            } else if args.tuned.iter().any(|t| t == name) {
                "tuned"
            } else {
                "not tuned"
            };
            let (turns, checks) = load_session(file)?;
            let replayed = replay(&turns, run, config, map).await?;
            let Some(last) = replayed.folds.last() else {
                println!("{name}: no fold");
                continue;
            };
            let totals = groups.entry(group).or_default();
            count_folds(
                name,
                &replayed,
                &turns,
                &checks,
                budget,
                args.verbose,
                totals,
            );
            let m = measure(last, &turns, &checks);
            if let Some(dir) = &args.dump {
                let path = dir.join(format!("{name}.{}.md", run.name));
                std::fs::write(&path, &last.text)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            totals.dois_lost += m.dois_lost.len();
            totals.duplicates += m.duplicates;
            totals.facts.merge(&m.facts);
            totals.by_value.0 += m.by_value.0;
            totals.by_value.1 += m.by_value.1;
            println!(
                "{name} [{}] ({group}) last fold: {} | failures {}",
                run.name,
                fold_line(&m),
                replayed.failures.len()
            );
            for f in &replayed.failures {
                println!("    failure: {f}");
            }
            if args.verbose {
                for miss in &m.missing {
                    println!("    missing {miss}");
                }
            }
        }
        for (group, totals) in &groups {
            println!(
                "OVERALL [{}] ({group}) last fold: {}",
                run.name,
                totals.render(budget)
            );
            ok &= totals.passes();
        }
    }
    Ok(ok)
}

fn run(args: &[String]) -> Result<bool, String> {
    let args = parse_args(args)?;
    let mut map = settings_file(args.config.as_deref())?;
    match &args.decision {
        Some(decision) => {
            map.insert(
                decision_client::KEY_ADAPTER.to_owned(),
                Value::String(decision.clone()),
            );
        }
        None => {
            map.entry(decision_client::KEY_ADAPTER)
                .or_insert_with(|| Value::String("local".to_owned()));
        }
    }
    let mut config = SummarizerConfig::from_map(&map).map_err(|e| e.to_string())?;
    config.adapter = args.adapter;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        if args.canary {
            run_canary(&config, &map).await
        } else {
            run_sessions(&args, &config, &map).await
        }
    })
}

/// Entry point of `cargo xtask eval-summary`.
pub(crate) fn eval_summary(args: &[String]) -> ExitCode {
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("eval-summary: below the issue's bar (see the figures above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("eval-summary: {e}");
            ExitCode::from(2)
        }
    }
}
