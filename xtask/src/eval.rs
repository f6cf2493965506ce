//! `cargo xtask eval-decision [--cases FILE] [--adapter NAME] [--tau X] [--config FILE]`:
//! runs a decision adapter over labelled cases and prints one line per split:
//! `split=test n=426 auc=… acc@tau=… f1@tau=… f1@best=… brier=… ece=…`.
//!
//! Adapters: `offline` (default), the baselines `novelty` and `constant`, and the remote
//! `decisions`, `chat-logprobs` and `auto`, built by decision-client's factory from the
//! settings file given with `--config` (the spec's keys plus the `decision_*` keys) and the
//! environment. The metrics live in `decision_client::eval`; this file only drives them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use compaction_core::{EffectiveSettings, Settings};
use decision_client::eval::{
    CONSTANT_BASELINE, Case, by_split, load_cases, metrics, novelty_baseline, score_cases,
};
use decision_client::{AdapterChoice, DecisionConfig, build_decision_model, process_env};
use serde_json::{Map, Value};

const USAGE: &str = "usage: cargo xtask eval-decision [--cases FILE] [--adapter offline|novelty|constant|decisions|chat-logprobs|auto] [--tau X] [--config FILE]";

struct Args {
    cases: PathBuf,
    adapter: String,
    tau: Option<f64>,
    config: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut parsed = Args {
        cases: workspace.join("../shared/data/topic-shift/cases.jsonl"),
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
        for key in compaction_core::settings::KEYS {
            if let Some(v) = map.get(key) {
                defaults.insert(key.to_owned(), v.clone());
            }
        }
    }
    let settings: Settings =
        serde_json::from_value(merged).map_err(|e| format!("settings: {e}"))?;
    settings.effective().map_err(|e| e.to_string())
}

/// Scores every case of one split with the chosen adapter.
async fn score(
    adapter: &str,
    settings: &EffectiveSettings,
    config: &Map<String, Value>,
    cases: &[&Case],
) -> Result<Vec<Option<f64>>, String> {
    match adapter {
        "novelty" => Ok(cases.iter().map(|c| Some(novelty_baseline(c))).collect()),
        "constant" => Ok(cases.iter().map(|_| Some(CONSTANT_BASELINE)).collect()),
        name => {
            let choice = AdapterChoice::parse(name)
                .ok_or_else(|| format!("unknown adapter {name}\n{USAGE}"))?;
            let mut decision_config =
                DecisionConfig::from_map(config).map_err(|e| e.to_string())?;
            decision_config.adapter = choice;
            let selected = build_decision_model(settings, &decision_config, process_env)
                .map_err(|e| e.to_string())?;
            Ok(score_cases(selected.model.as_ref(), &settings.decision_model, cases).await)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let args = parse_args(args)?;
    let config = settings_map(args.config.as_deref())?;
    let settings = effective_settings(&config)?;
    let tau = args.tau.unwrap_or(settings.threshold);
    let cases = load_cases(&args.cases).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    eprintln!(
        "eval-decision: adapter={} tau={tau} cases={}",
        args.adapter,
        args.cases.display()
    );
    for (split, members) in by_split(&cases) {
        let scores = runtime.block_on(score(&args.adapter, &settings, &config, &members))?;
        let scored: Vec<(f64, bool)> = scores
            .iter()
            .zip(&members)
            .filter_map(|(p, c)| p.map(|p| (p, c.label)))
            .collect();
        let failed = members.len() - scored.len();
        let failed = if failed > 0 {
            format!(" failed={failed}")
        } else {
            String::new()
        };
        match metrics(&scored, tau) {
            Some(m) => println!("split={split} {m}{failed}"),
            None => println!("split={split} n=0{failed}"),
        }
    }
    Ok(())
}

/// Entry point of the subcommand; `args` follow `eval-decision`.
pub(crate) fn eval_decision(args: &[String]) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eval-decision: {e}");
            ExitCode::FAILURE
        }
    }
}
