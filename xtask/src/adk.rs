//! `cargo xtask adk-interop`: the Rust `compaction` binary against real Google ADK.
//!
//! Builds the binary, creates (or reuses) a Python virtual environment under the target
//! directory with the pinned ADK, and runs `crates/session-store/tests/adk/interop.py`, which
//! drives ADK's own session services, its `Runner` (with a mock `BaseLlm`) and its own
//! sliding-window compaction around `compaction evaluate` and `compaction inspect`, with local
//! mock models: ADK's prompt builder before and after, ADK's overlapping summaries folded into
//! one, and the warning for user messages filed inside a pipeline scope no `finish_task` closed.
//! Needs `python3` (3.10 or newer; `ADK_INTEROP_PYTHON` overrides) and PyPI on first run; a
//! failed install fails the step loudly.
//!
//! The same checks then run on `DatabaseSessionService` over PostgreSQL (asyncpg), in a fresh
//! database on the server of `COMPACTION_TEST_POSTGRES_URL` (or the cluster `verify` started),
//! else on a throwaway cluster started here when PostgreSQL is installed (`cargo xtask pg`'s);
//! without PostgreSQL that run is skipped and says so, except under `CI=true`, where it fails.

// A developer tool: progress goes to stderr.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pg;

/// What the venv must hold. Changing it rebuilds the venv. `asyncpg` is ADK's driver for
/// `DatabaseSessionService` on PostgreSQL (`postgresql+asyncpg://`).
const REQUIREMENTS: &[&str] = &[
    "google-adk==2.13.0",
    "sqlalchemy[asyncio]",
    "aiosqlite",
    "asyncpg==0.31.0",
];

/// Exits 0 only when the venv's ADK is the pinned one.
const ADK_VERSION_CHECK: &str =
    "import importlib.metadata as m, sys; sys.exit(m.version('google-adk') != '2.13.0')";

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| {
            if p.is_absolute() {
                p
            } else {
                workspace_root().join(p)
            }
        })
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// Creates the venv unless one with exactly [`REQUIREMENTS`] is already there.
fn ensure_venv(venv: &Path) -> Result<PathBuf, String> {
    let marker = venv.join(".adk-interop-requirements");
    let wanted = REQUIREMENTS.join("\n");
    let python = venv_python(venv);
    if python.exists()
        && std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted)
        && Command::new(&python)
            .args(["-c", ADK_VERSION_CHECK])
            .status()
            .is_ok_and(|s| s.success())
    {
        eprintln!("adk-interop: reusing {}", venv.display());
        return Ok(python);
    }
    let base = std::env::var("ADK_INTEROP_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    eprintln!("adk-interop: creating {} with {base}", venv.display());
    run(
        Command::new(&base).args([
            "-c",
            "import sys; sys.exit(0 if sys.version_info >= (3, 10) else 'google-adk needs Python 3.10 or newer')",
        ]),
        &format!("{base} (Python 3.10+ check)"),
    )?;
    run(
        Command::new(&base)
            .arg("-m")
            .arg("venv")
            .arg("--clear")
            .arg(venv),
        &format!("{base} -m venv {}", venv.display()),
    )?;
    eprintln!("adk-interop: pip install {}", REQUIREMENTS.join(" "));
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(REQUIREMENTS),
        "pip install of the pinned ADK (is PyPI reachable?)",
    )?;
    std::fs::write(&marker, wanted)
        .map_err(|e| format!("could not write {}: {e}", marker.display()))?;
    Ok(python)
}

/// The PostgreSQL server the ADK-on-PostgreSQL run uses.
enum PgServer {
    /// The caller's (`COMPACTION_TEST_POSTGRES_URL`, or `verify`'s cluster).
    Given(String),
    /// A throwaway cluster started for this run, stopped after it.
    Started(pg::Cluster),
}

impl PgServer {
    fn url(&self) -> &str {
        match self {
            PgServer::Given(url) => url,
            PgServer::Started(cluster) => &cluster.url,
        }
    }
}

/// The server for the PostgreSQL run, `None` (said on stderr) when there is none; under
/// `CI=true` a missing PostgreSQL is an error.
fn postgres_server() -> Result<Option<PgServer>, String> {
    let given = std::env::var(pg::URL_VAR)
        .ok()
        .filter(|url| !url.trim().is_empty())
        .or_else(|| {
            crate::CARGO_ENV
                .get()
                .into_iter()
                .flatten()
                .find(|(k, _)| *k == pg::URL_VAR)
                .map(|(_, url)| url.clone())
        });
    if let Some(url) = given {
        return Ok(Some(PgServer::Given(url)));
    }
    let ci = std::env::var("CI").as_deref() == Ok("true");
    let why = if pg::binaries().is_some() {
        match pg::start_cluster() {
            Ok(cluster) => return Ok(Some(PgServer::Started(cluster))),
            Err(e) => format!("could not start PostgreSQL ({e})"),
        }
    } else {
        format!("no PostgreSQL installed and {} unset", pg::URL_VAR)
    };
    if ci {
        return Err(format!(
            "under CI=true the DatabaseSessionService-on-PostgreSQL run must run: {why}"
        ));
    }
    eprintln!("adk-interop: SKIPPED DatabaseSessionService on PostgreSQL: {why}");
    Ok(None)
}

/// Runs the interop check; `Err` names the failed stage.
pub(crate) fn interop() -> Result<(), String> {
    let root = workspace_root();
    run(
        Command::new(env!("CARGO")).current_dir(&root).args([
            "build",
            "-p",
            "adaptive-compaction-cli",
            "--quiet",
        ]),
        "cargo build -p adaptive-compaction-cli",
    )?;
    let target = target_dir();
    let binary = target.join("debug").join(if cfg!(windows) {
        "compaction.exe"
    } else {
        "compaction"
    });
    if !binary.exists() {
        return Err(format!("{} was not built", binary.display()));
    }
    let python = ensure_venv(&target.join("adk-venv"))?;
    let work = target.join("adk-interop-work");
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .map_err(|e| format!("could not clear {}: {e}", work.display()))?;
    }
    let script = root.join("crates/session-store/tests/adk/interop.py");
    let server = postgres_server()?;
    let mut command = Command::new(&python);
    command
        .current_dir(&target)
        .arg(&script)
        .arg("--binary")
        .arg(&binary)
        .arg("--workdir")
        .arg(&work);
    if let Some(server) = &server {
        command.arg("--postgres-url").arg(server.url());
    }
    let result = run(&mut command, &format!("{}", script.display()));
    if let Some(PgServer::Started(cluster)) = &server
        && let Err(e) = pg::stop_cluster(cluster)
    {
        return Err(format!(
            "{result:?}; stopping the throwaway PostgreSQL failed: {e}"
        ));
    }
    result
}
