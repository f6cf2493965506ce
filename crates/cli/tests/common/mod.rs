//! What every cli test needs: the built binary, with no ambient OTLP endpoint or log filter.
#![allow(dead_code)]

use std::process::Command;

/// The built `compaction` binary, with no ambient OTLP endpoint or `COMPACTION_LOG`.
pub(crate) fn compaction() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_compaction"));
    command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("COMPACTION_LOG")
        // The embedding model's files are looked for where none are: every test but the
        // embedding model's own runs the lexical model, whatever this machine has installed.
        .env("XDG_CACHE_HOME", NO_MODEL_CACHE)
        .env("HF_HUB_CACHE", NO_MODEL_CACHE);
    command
}

/// `compaction replay FILE` on the offline models (the lexical decision model and the
/// extractive summarizer), whatever settings or model files this machine has.
pub(crate) fn offline_replay(file: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = compaction();
    command
        .arg("replay")
        .arg(file)
        .args(["--decision", "offline", "--summarizer", "offline"]);
    command
}

/// What a finished run printed on stdout; a failed run panics with its status and stderr.
#[track_caller]
pub(crate) fn success(what: &str, out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A cache directory that does not exist.
pub(crate) const NO_MODEL_CACHE: &str = "/nonexistent/compaction-test-cache";

/// `compaction` with the process's own environment for the embedding model's files: the
/// installed model when there is one.
pub(crate) fn compaction_with_installed_model() -> Command {
    let mut command = compaction();
    for var in ["XDG_CACHE_HOME", "HF_HUB_CACHE"] {
        match std::env::var_os(var) {
            Some(v) => command.env(var, v),
            None => command.env_remove(var),
        };
    }
    command
}

/// A running `compaction serve`; killed when dropped (a failed test leaves no process).
pub(crate) struct Serve {
    pub(crate) child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The lines printed before `listening on`.
    pub(crate) banner: Vec<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `command` (a `compaction serve --addr 127.0.0.1:0 …`) with its stdout piped, waits
/// for its `listening on http://ADDR` line and keeps draining stdout afterwards, so the server
/// never blocks on a full pipe. The caller chooses what happens to stderr.
pub(crate) fn spawn_serve(mut command: Command) -> Serve {
    use std::io::{BufRead as _, BufReader};
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn compaction serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut banner = Vec::new();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("serve stopped before listening: {banner:?}"))
            .expect("read serve's stdout");
        if let Some(rest) = line.strip_prefix("listening on http://") {
            break rest.split_whitespace().next().expect("address").to_owned();
        }
        banner.push(line);
    };
    std::thread::spawn(move || for _ in lines {});
    Serve {
        child,
        base: format!("http://{addr}"),
        addr,
        banner,
    }
}

/// `compaction serve` on loopback with its database and settings file in `dir`, `extra`
/// arguments and `env` variables; stderr discarded.
pub(crate) fn serve_in(dir: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
    let mut command = compaction();
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(dir.join("sessions.db"))
        .args(extra)
        .env("ZOTERO_DATA_DIR", dir)
        .stderr(std::process::Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    spawn_serve(command)
}

/// Points the settings file in `dir` at an OpenAI-compatible coordinator at `base_url`
/// (model `m`), through `compaction config set`.
pub(crate) fn use_coordinator(dir: &std::path::Path, base_url: &str) {
    for (key, value) in [
        ("coordinator_base_url", base_url),
        ("coordinator_model", "m"),
    ] {
        let out = compaction()
            .args(["config", "set", key, value])
            .env("ZOTERO_DATA_DIR", dir)
            .output()
            .expect("config set");
        assert!(out.status.success(), "{out:?}");
    }
}
