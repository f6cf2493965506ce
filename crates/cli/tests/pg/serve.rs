//! A `compaction serve` process of the built binary, and an SSE reader for its answers.

use std::process::Stdio;

use compaction_core::SessionKey;

use super::{SECRET, compaction};
use crate::common::{Serve, spawn_serve};

/// A replica: a running `compaction serve` (its `base` is `http://127.0.0.1:PORT`).
pub(crate) type Replica = Serve;

/// Starts a replica on a free port and waits for its `listening on` line.
pub(crate) fn start_replica(
    dir: &std::path::Path,
    config: &std::path::Path,
    db_url: &str,
) -> Replica {
    let mut command = compaction(dir);
    command
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--db-env",
            "TEST_REPLICA_DB",
        ])
        .arg("--config")
        .arg(config)
        .args(["--decision", "offline", "--summarizer", "offline"])
        .env("TEST_REPLICA_DB", db_url)
        .env("COMPACTION_LOG", "error")
        .stderr(Stdio::inherit());
    let replica = spawn_serve(command);
    for line in &replica.banner {
        assert!(!line.contains(SECRET), "the password leaked: {line}");
    }
    assert!(
        replica
            .banner
            .iter()
            .any(|l| l.starts_with("database: postgres://")),
        "{:?}",
        replica.banner
    );
    replica
}

#[derive(Debug)]
pub(crate) struct Sse {
    pub(crate) event: String,
    pub(crate) data: String,
}

/// Reads SSE events from a response, handing each to `seen`; stops when `seen` says so or
/// the body ends.
pub(crate) async fn read_sse(mut response: reqwest::Response, mut seen: impl FnMut(Sse) -> bool) {
    let mut buffer = String::new();
    while let Some(chunk) = response.chunk().await.expect("SSE chunk") {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if block.trim_start().starts_with(':') {
                continue;
            }
            let mut event = Sse {
                event: "message".into(),
                data: String::new(),
            };
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event.event = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    event.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !seen(event) {
                return;
            }
        }
    }
}

pub(crate) fn session_url(base: &str, key: &SessionKey, tail: &str) -> String {
    format!(
        "{base}/v1/sessions/{}/{}/{}{tail}",
        key.app_name, key.user_id, key.session_id
    )
}
