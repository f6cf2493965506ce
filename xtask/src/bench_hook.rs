//! `cargo xtask bench-hook [--dir DIR] [--runs N] [--only native|adk|pg] [--keep]`: issue 29's
//! benchmark of the post-turn hook, whole `compaction evaluate` processes (release build)
//! timed side by side by hyperfine, a small database against a large one in each pair:
//!
//! - native SQLite: sessions `fast` (a fast exit) and `force` (the gate forces a compression)
//!   in a file of about 1 MB, and the same two in a file of more than 1 GB that also holds
//!   10,000 other sessions;
//! - ADK's `DatabaseSessionService` SQLite file: `fast` and `force` at 1,000 and at 50,000
//!   events;
//! - ADK's layout on PostgreSQL (the server of `--pg-url`, else of
//!   `$COMPACTION_TEST_POSTGRES_URL`, e.g. `cargo xtask pg start`; skipped and said so without
//!   one): `fast` and `force` at 1,000 and 10,000 events, 10,000 other sessions in the table.
//!
//! A compression writes, so before each timed `force` run (warm-up included) hyperfine's
//! `--prepare` restores the session: a copy of the file (with its check stamp, times kept) on
//! SQLite, `bench_reset` on PostgreSQL. The files go to `--dir` (default
//! `/tmp/compaction-bench-hook`; ADK's to `/dev/shm` when it exists, since filling them is one
//! committed transaction per event) and are deleted at the end unless `--keep`, as is the
//! PostgreSQL database `compaction_bench_hook`. Needs
//! `hyperfine` on PATH, and `psql` for PostgreSQL. Prints a Markdown table of medians.

// A developer tool: progress goes to stderr, the table to stdout.
#![allow(clippy::print_stderr, clippy::print_stdout)]

mod fixtures;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use fixtures::{APP, USER, with_suffix};

/// Events per session in the small native file (about 1 MB with both sessions).
const NATIVE_EVENTS: usize = 1_000;
/// Events of each of the 10,000 other sessions of the large native file.
const OTHER_EVENTS: usize = 300;
const OTHER_COPIES: usize = 10_000;
const ADK_SIZES: [usize; 2] = [1_000, 50_000];
const PG_SIZES: [usize; 2] = [1_000, 10_000];
/// The PostgreSQL database the ADK tables are written to (dropped first, and at the end).
const PG_DATABASE: &str = "compaction_bench_hook";

struct Options {
    dir: PathBuf,
    runs: u32,
    only: Option<String>,
    keep: bool,
    pg_url: Option<String>,
}

/// One timed command: its label, its arguments after `compaction`, what restores it.
struct Run {
    label: String,
    db: String,
    session: String,
    prepare: Option<String>,
}

/// Two runs measured side by side.
struct Pair {
    name: String,
    small: Run,
    large: Run,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        dir: PathBuf::from("/tmp/compaction-bench-hook"),
        runs: 7,
        only: None,
        keep: false,
        pg_url: std::env::var(crate::pg::URL_VAR).ok(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--dir" => options.dir = PathBuf::from(value()?),
            "--runs" => {
                options.runs = value()?
                    .parse()
                    .map_err(|e| format!("--runs: a whole number ({e})"))?;
            }
            "--only" => options.only = Some(value()?),
            "--pg-url" => options.pg_url = Some(value()?),
            "--keep" => options.keep = true,
            other => return Err(format!("bench-hook: unknown argument {other:?}")),
        }
    }
    Ok(options)
}

pub(crate) fn command(args: &[String]) -> ExitCode {
    let result = parse(args).and_then(|options| {
        let outcome = run_all(&options);
        if !options.keep {
            let _ = std::fs::remove_dir_all(&options.dir);
            let _ = std::fs::remove_dir_all(adk_dir(&options.dir));
            if let Some(url) = options.pg_url.as_deref().filter(|_| wants(&options, "pg")) {
                let _ = fixtures::psql(url, &format!("DROP DATABASE IF EXISTS {PG_DATABASE}"));
            }
        }
        outcome
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-hook FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn wants(options: &Options, part: &str) -> bool {
    options.only.as_deref().is_none_or(|o| o == part)
}

fn run_all(options: &Options) -> Result<(), String> {
    let binary = build_binary()?;
    std::fs::create_dir_all(&options.dir).map_err(|e| format!("{}: {e}", options.dir.display()))?;
    let mut pairs = Vec::new();
    if wants(options, "native") {
        pairs.extend(native_pairs(&binary, &options.dir)?);
    }
    if wants(options, "adk") {
        pairs.extend(adk_pairs(&adk_dir(&options.dir))?);
    }
    if wants(options, "pg") {
        match &options.pg_url {
            Some(url) => pairs.extend(pg_pairs(url)?),
            None => eprintln!(
                "bench-hook: no PostgreSQL (--pg-url or ${}): its pairs are skipped",
                crate::pg::URL_VAR
            ),
        }
    }
    eprintln!("bench-hook: load average before timing: {}", load_average());
    println!(
        "| pair | small: median (min … max) | large: median (min … max) | large/small (median) \
         | CPU small → large |"
    );
    println!("|---|---|---|---|---|");
    for pair in &pairs {
        let (small, large) = time_pair(&binary, options, pair)?;
        println!(
            "| {} | {} | {} | {:.2}× | {:.1} → {:.1} ms |",
            pair.name,
            small.show(),
            large.show(),
            large.median / small.median,
            small.cpu * 1e3,
            large.cpu * 1e3
        );
    }
    eprintln!("bench-hook: load average after timing: {}", load_average());
    Ok(())
}

/// The system's 1, 5 and 15 minute load averages (other builds share the machine).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Builds the release binary and returns its path.
fn build_binary() -> Result<PathBuf, String> {
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "adaptive-compaction-cli",
            "--bin",
            "compaction",
        ])
        .status()
        .map_err(|e| format!("could not run cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --release failed ({status})"));
    }
    Ok(crate::adk::target_dir().join("release").join("compaction"))
}

/// Where the ADK files go: `/dev/shm` when it exists (one fsync per append elsewhere).
fn adk_dir(dir: &Path) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join("compaction-bench-hook-adk")
    } else {
        dir.join("adk")
    }
}

fn size_mb(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e6)
}

/// A copy of `db` and its check stamp, modification times kept, and the command that puts
/// them back and flushes them to disk (`sync FILE`).
fn pristine_copy(db: &Path) -> Result<String, String> {
    let copy = with_suffix(db, ".pristine");
    let mut restore = Vec::new();
    for suffix in ["", "-compaction-check"] {
        let from = with_suffix(db, suffix);
        if !from.exists() {
            continue;
        }
        let to = with_suffix(&copy, suffix);
        let status = Command::new("cp")
            .arg("-p")
            .arg(&from)
            .arg(&to)
            .status()
            .map_err(|e| format!("cp: {e}"))?;
        if !status.success() {
            return Err(format!("cp -p {} failed", from.display()));
        }
        restore.push(format!("cp -p {} {}", to.display(), from.display()));
        // The copy's pages are written out here, not by the timed run's first fsync of the
        // file: otherwise a compress on the large file would pay for flushing the whole
        // restored gigabyte, which no real turn does.
        restore.push(format!("sync {}", from.display()));
    }
    Ok(format!("sh -c '{}'", restore.join(" && ")))
}

fn native_pairs(binary: &Path, dir: &Path) -> Result<Vec<Pair>, String> {
    let small = dir.join("small.db");
    let large = dir.join("large.db");
    for path in [&small, &large] {
        let _ = std::fs::remove_file(path);
    }
    eprintln!("bench-hook: writing {}", small.display());
    fixtures::native(&small, NATIVE_EVENTS, None)?;
    eprintln!(
        "bench-hook: writing {} ({OTHER_COPIES} other sessions)",
        large.display()
    );
    fixtures::native(&large, NATIVE_EVENTS, Some(OTHER_EVENTS))?;
    fixtures::clone_other(&large, OTHER_COPIES)?;
    // The first writing run checks the whole file and leaves the check stamp.
    for db in [&small, &large] {
        evaluate(binary, db, "fast")?;
    }
    let name = |path: &Path, what: &str| format!("{what}, {:.2} MB", size_mb(path));
    let pair = |what: &str, session: &str, prepare: bool| -> Result<Pair, String> {
        let run = |db: &Path| -> Result<Run, String> {
            Ok(Run {
                label: name(db, session),
                db: db.display().to_string(),
                session: session.to_owned(),
                prepare: if prepare {
                    Some(pristine_copy(db)?)
                } else {
                    None
                },
            })
        };
        Ok(Pair {
            name: format!("native SQLite, {what}"),
            small: run(&small)?,
            large: run(&large)?,
        })
    };
    Ok(vec![
        pair("fast exit", "fast", false)?,
        pair("compress", "force", true)?,
    ])
}

fn adk_pairs(dir: &Path) -> Result<Vec<Pair>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for size in ADK_SIZES {
        let path = dir.join(format!("adk-{size}.db"));
        let _ = std::fs::remove_file(&path);
        eprintln!("bench-hook: writing {}", path.display());
        fixtures::adk_sqlite(&path, size)?;
        files.push((size, path));
    }
    let run = |(size, path): &(usize, PathBuf), session: &str| -> Result<Run, String> {
        Ok(Run {
            label: format!("{size} events, {:.1} MB", size_mb(path)),
            db: path.display().to_string(),
            session: session.to_owned(),
            prepare: (session == "force")
                .then(|| pristine_copy(path))
                .transpose()?,
        })
    };
    Ok(vec![
        Pair {
            name: "ADK SQLite file, fast exit".to_owned(),
            small: run(&files[0], "fast")?,
            large: run(&files[1], "fast")?,
        },
        Pair {
            name: "ADK SQLite file, compress".to_owned(),
            small: run(&files[0], "force")?,
            large: run(&files[1], "force")?,
        },
    ])
}

/// `url` with its database name replaced by `database`.
fn database_url(url: &str, database: &str) -> String {
    let base = url.split('?').next().unwrap_or(url);
    match base.rfind('/') {
        Some(slash) if slash > "postgres://".len() => format!("{}/{database}", &base[..slash]),
        _ => format!("{base}/{database}"),
    }
}

fn pg_pairs(url: &str) -> Result<Vec<Pair>, String> {
    let database = PG_DATABASE;
    fixtures::psql(url, &format!("DROP DATABASE IF EXISTS {database}"))?;
    fixtures::psql(url, &format!("CREATE DATABASE {database}"))?;
    let db = database_url(url, database);
    eprintln!("bench-hook: writing ADK's tables in PostgreSQL database {database}");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(fixtures::adk_postgres(&db, &PG_SIZES))?;
    let reset = format!(
        "psql -X -q -v ON_ERROR_STOP=1 {db} -c \"{}\"",
        fixtures::POSTGRES_RESET
    );
    let run = |size: usize, session: &str| Run {
        label: format!("{size} events"),
        db: db.clone(),
        session: format!("{session}-{size}"),
        prepare: (session == "force").then(|| reset.clone()),
    };
    Ok(vec![
        Pair {
            name: "ADK on PostgreSQL, fast exit".to_owned(),
            small: run(PG_SIZES[0], "fast"),
            large: run(PG_SIZES[1], "fast"),
        },
        Pair {
            name: "ADK on PostgreSQL, compress".to_owned(),
            small: run(PG_SIZES[0], "force"),
            large: run(PG_SIZES[1], "force"),
        },
    ])
}

/// The `evaluate` arguments for `session` in `db`.
fn evaluate_args(db: &str, session: &str) -> Vec<String> {
    [
        "evaluate",
        "--db",
        db,
        "--app",
        APP,
        "--user",
        USER,
        "--session",
        session,
        "--decision",
        "offline",
        "--summarizer",
        "offline",
        "--json",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// One `evaluate` run, which must succeed.
fn evaluate(binary: &Path, db: &Path, session: &str) -> Result<(), String> {
    let out = Command::new(binary)
        .args(evaluate_args(&db.display().to_string(), session))
        .output()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "evaluate {session} in {} failed: {}",
            db.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A command's figures, in seconds.
struct Figures {
    label: String,
    median: f64,
    min: f64,
    max: f64,
    /// The process's CPU time, user + system (hyperfine's means).
    cpu: f64,
}

impl Figures {
    fn show(&self) -> String {
        format!(
            "{}: {:.1} ms ({:.1} … {:.1})",
            self.label,
            self.median * 1e3,
            self.min * 1e3,
            self.max * 1e3
        )
    }
}

/// Runs hyperfine on both commands of `pair`, side by side in one run.
fn time_pair(binary: &Path, options: &Options, pair: &Pair) -> Result<(Figures, Figures), String> {
    let json = options.dir.join("hyperfine.json");
    let command = |run: &Run| {
        std::iter::once(binary.display().to_string())
            .chain(evaluate_args(&run.db, &run.session))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut hyperfine = Command::new("hyperfine");
    hyperfine
        .args(["-N", "--style", "basic", "--warmup", "1", "--runs"])
        .arg(options.runs.to_string())
        .arg("--export-json")
        .arg(&json);
    for run in [&pair.small, &pair.large] {
        if let Some(prepare) = &run.prepare {
            hyperfine.arg("--prepare").arg(prepare);
        }
    }
    for run in [&pair.small, &pair.large] {
        hyperfine.arg("-n").arg(&run.label).arg(command(run));
    }
    eprintln!("bench-hook: timing {}", pair.name);
    let status = hyperfine
        .current_dir(&options.dir)
        .status()
        .map_err(|e| format!("could not run hyperfine: {e}"))?;
    if !status.success() {
        return Err(format!("hyperfine failed on {} ({status})", pair.name));
    }
    let text = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    let report: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let figures = |i: usize, run: &Run| -> Result<Figures, String> {
        let r = &report["results"][i];
        let get = |k: &str| {
            r[k].as_f64()
                .ok_or_else(|| format!("hyperfine's JSON has no {k}"))
        };
        Ok(Figures {
            label: run.label.clone(),
            median: get("median")?,
            min: get("min")?,
            max: get("max")?,
            cpu: get("user")? + get("system")?,
        })
    };
    Ok((figures(0, &pair.small)?, figures(1, &pair.large)?))
}
