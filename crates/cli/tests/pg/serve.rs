//! A `compaction serve` process of the built binary, and an SSE reader for its answers.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use compaction_core::SessionKey;

use super::{SECRET, compaction};

/// A running `compaction serve`; killed when dropped (a failed test leaves no process).
pub(crate) struct Replica {
    child: Child,
    pub(crate) base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a replica on a free port and waits for its `listening on` line.
pub(crate) fn start_replica(
    dir: &std::path::Path,
    config: &std::path::Path,
    db_url: &str,
) -> Replica {
    let mut child = compaction(dir)
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
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start compaction serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let base = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("serve ended before listening: {seen:?}"))
            .expect("read serve's stdout");
        assert!(!line.contains(SECRET), "the password leaked: {line}");
        if let Some(rest) = line.strip_prefix("listening on ") {
            break rest.split_whitespace().next().expect("address").to_owned();
        }
        seen.push(line);
    };
    assert!(
        seen.iter().any(|l| l.starts_with("database: postgres://")),
        "{seen:?}"
    );
    // Keep draining stdout so the replica never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Replica { child, base }
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
