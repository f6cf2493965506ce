//! Project automation. `cargo xtask verify` runs every check CI runs, one line per step.
//!
//! Subcommands:
//! - `verify`: fmt, clippy (warnings denied), the purity check on compaction-core, tidy, every
//!   test (unit, integration, doc), the publish dry run and the ADK interop check.
//! - `tidy [--bless]`: the structure rules (see `tidy`), every one enforced, in `verify` too.
//! - `purity`: only the purity check (the core's I/O fence, the feature fences, the dependency
//!   rule).
//! - `publish` (also a step of `verify`): `cargo publish --workspace --dry-run` (offline: `cargo package`).
//! - `pg start|stop|url`: a throwaway PostgreSQL cluster for the PostgreSQL store's tests
//!   (`verify` starts one itself when `COMPACTION_TEST_POSTGRES_URL` is unset and PostgreSQL is
//!   installed, and stops it at the end).
//! - `adk-interop`: the `compaction` binary against real Google ADK (Python venv, pinned ADK).
//! - `eval-decision [--cases FILE | --sessions DIR [--per-turn]] [--adapter NAME]`: decision-quality
//!   figures per split, or per labelled research session probing every turn.
//! - `fetch-model [--dir DIR]`: installs the embedding decision model's files (see
//!   `fetch_model`); `.ci/run` runs it before `verify`.
//! - `eval-summary [--sessions DIR] [--also DIR]... [--tuned a,b] [--dump DIR]
//!   [--summarizer offline|chat|auto] [--decision offline|local|embedding] [--config FILE]
//!   [--canary] [--verbose]`: how much of the folded turns the rolling
//!   summary keeps, and how it handles corrections (see `eval_summary`, `summary_checks`).
//! - `bench-hook [--dir DIR] [--runs N] [--only native|adk|pg] [--keep]`: the post-turn hook
//!   (`compaction evaluate`, release build) on small and large databases side by side, for
//!   docs/BENCHMARKS.md (see `bench_hook`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::{Command, ExitCode};
use std::sync::OnceLock;
use std::time::Instant;

mod adk;
mod bench_hook;
mod eval;
mod eval_summary;
mod fetch_model;
mod pg;
mod purity;
mod summary_checks;
mod tidy;

/// Environment `verify` adds to the cargo commands it runs (the throwaway cluster's URL).
static CARGO_ENV: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();

/// One step of `verify`.
struct Step {
    name: &'static str,
    run: fn() -> Result<(), String>,
}

fn cargo(args: &[&str]) -> Result<(), String> {
    let status = Command::new(env!("CARGO"))
        .args(args)
        .envs(CARGO_ENV.get().into_iter().flatten().map(|(k, v)| (*k, v)))
        .status()
        .map_err(|e| format!("could not run cargo {}: {e}", args.join(" ")))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo {} failed ({status})", args.join(" ")))
    }
}

fn steps() -> Vec<Step> {
    vec![
        Step {
            name: "fmt",
            run: || cargo(&["fmt", "--all", "--", "--check"]),
        },
        Step {
            name: "clippy",
            run: || {
                cargo(&[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--all-features",
                    "--quiet",
                    "--",
                    "-D",
                    "warnings",
                ])
            },
        },
        Step {
            name: "purity",
            run: purity::check,
        },
        Step {
            name: "tidy",
            run: || tidy::check(&adk::workspace_root(), false),
        },
        Step {
            name: "test",
            run: || cargo(&["test", "--workspace", "--all-features", "--quiet"]),
        },
        Step {
            name: "publish",
            run: publish_dry_run,
        },
        Step {
            name: "adk-interop",
            run: adk::interop,
        },
    ]
}

/// Every publishable crate packages and would publish: `cargo publish --workspace --dry-run
/// --no-verify --allow-dirty` (names, versions on internal dependencies, licenses, READMEs,
/// the dependency order; `--no-verify` because the test step already built everything). It
/// needs the registry's index; when that is unreachable (`--offline` or no network) the
/// strongest offline check runs instead, `cargo package --workspace --no-verify --offline`
/// without xtask and tests, and the step says so.
fn publish_dry_run() -> Result<(), String> {
    let online = cargo(&[
        "publish",
        "--workspace",
        "--dry-run",
        "--no-verify",
        "--allow-dirty",
        "--quiet",
    ]);
    let Err(e) = online else {
        return Ok(());
    };
    eprintln!(
        "xtask verify: {e}; if the registry's index was unreachable, packaging offline instead"
    );
    cargo(&[
        "package",
        "--workspace",
        "--exclude",
        "xtask",
        "--exclude",
        "tests",
        "--exclude",
        "test-data",
        "--no-verify",
        "--allow-dirty",
        "--offline",
        "--quiet",
    ])
    .map(|()| eprintln!("xtask verify: publish: packaged offline (the index was not checked)"))
    .map_err(|offline| format!("{e}; offline: {offline}"))
}

/// The PostgreSQL tests' database for `verify`: the caller's `COMPACTION_TEST_POSTGRES_URL`,
/// or a throwaway cluster started here when PostgreSQL is installed (returned to be stopped),
/// or none (the tests then say they were skipped, and fail under `CI=true`).
fn postgres_for_tests() -> Option<pg::Cluster> {
    if std::env::var_os(pg::URL_VAR).is_some() {
        eprintln!("xtask verify: PostgreSQL tests use ${}", pg::URL_VAR);
        return None;
    }
    if pg::binaries().is_none() {
        eprintln!(
            "xtask verify: no PostgreSQL installed and {} unset: the PostgreSQL store's tests \
             will be skipped (a failure under CI=true)",
            pg::URL_VAR
        );
        return None;
    }
    match pg::start_cluster() {
        Ok(cluster) => {
            eprintln!(
                "xtask verify: started a throwaway PostgreSQL for the tests: {}",
                cluster.url
            );
            let _ = CARGO_ENV.set(vec![(pg::URL_VAR, cluster.url.clone())]);
            Some(cluster)
        }
        Err(e) => {
            eprintln!("xtask verify: could not start PostgreSQL ({e}); its tests will be skipped");
            None
        }
    }
}

fn verify() -> ExitCode {
    let started = Instant::now();
    let mut failed = Vec::new();
    let cluster = postgres_for_tests();
    let steps = steps();
    for step in &steps {
        let t = Instant::now();
        eprintln!("xtask verify: {} ...", step.name);
        match (step.run)() {
            Ok(()) => eprintln!(
                "xtask verify: {} ok ({:.1}s)",
                step.name,
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("xtask verify: {} FAILED: {e}", step.name);
                failed.push(step.name);
            }
        }
    }
    if let Some(cluster) = cluster
        && let Err(e) = pg::stop_cluster(&cluster)
    {
        eprintln!("xtask verify: stopping the throwaway PostgreSQL failed: {e}");
        failed.push("pg-stop");
    }
    let total = started.elapsed().as_secs_f64();
    if failed.is_empty() {
        eprintln!(
            "xtask verify: all {} steps passed in {total:.1}s",
            steps.len()
        );
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "xtask verify: {} of {} steps failed ({}) in {total:.1}s",
            failed.len(),
            steps.len(),
            failed.join(", ")
        );
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("verify") => verify(),
        Some("tidy") => {
            let bless = args.iter().any(|a| a == "--bless");
            match tidy::check(&adk::workspace_root(), bless) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some("purity") => match purity::check() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        Some("publish") => match publish_dry_run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        Some("pg") => pg::command(&args[1..]),
        Some("bench-hook") => bench_hook::command(&args[1..]),
        Some("eval-decision") => eval::eval_decision(&args[1..]),
        Some("eval-summary") => eval_summary::eval_summary(&args[1..]),
        Some("fetch-model") => fetch_model::fetch_model(&args[1..]),
        Some("adk-interop") => match adk::interop() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("adk-interop FAILED: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!(
                "usage: cargo xtask <verify|purity|publish|eval-decision|eval-summary|fetch-model|adk-interop|pg|bench-hook>"
            );
            ExitCode::from(2)
        }
    }
}
