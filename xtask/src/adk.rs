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

// A developer tool: progress goes to stderr.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the venv must hold. Changing it rebuilds the venv.
const REQUIREMENTS: &[&str] = &["google-adk==2.13.0", "sqlalchemy[asyncio]", "aiosqlite"];

/// Exits 0 only when the venv's ADK is the pinned one.
const ADK_VERSION_CHECK: &str =
    "import importlib.metadata as m, sys; sys.exit(m.version('google-adk') != '2.13.0')";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn target_dir() -> PathBuf {
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
    run(
        Command::new(&python)
            .current_dir(&target)
            .arg(&script)
            .arg("--binary")
            .arg(&binary)
            .arg("--workdir")
            .arg(&work),
        &format!("{}", script.display()),
    )
}
