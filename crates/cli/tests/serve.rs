//! `compaction serve` as a process, with the other built commands: it streams a turn over
//! loopback and SIGTERM stops it gracefully (exit 0, running evaluations finished) leaving a
//! database that passes `inspect --check`; it watches the settings file, and a
//! `compaction config set` run in another process reaches the page's `settings` event stream;
//! the page's own save answers 422 naming the field and leaves the file as it was. The server is
//! awaited through what it prints and streams, never with sleeps.

mod common;

use common::{Serve, compaction, spawn_serve};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// `compaction serve` on a free port with its database and settings file in `dir`.
fn serve(dir: &std::path::Path) -> Serve {
    let mut command = compaction();
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(dir.join("sessions.db"))
        .env("ZOTERO_DATA_DIR", dir)
        .stderr(Stdio::piped());
    let server = spawn_serve(command);
    assert!(
        server
            .banner
            .iter()
            .any(|l| l.starts_with("preferences: ") && l.contains("zocrates_config.json (")),
        "{:?}",
        server.banner
    );
    server
}

/// One HTTP/1.1 request on a fresh connection (the server closes it after the answer).
fn request(addr: &str, method: &str, path: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("bound the reads");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    stream
}

/// The `data:` of the next `settings` event on an open event stream (chunked framing lines
/// are skipped: only `data:` lines matter).
fn next_settings(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> Value {
    for line in lines {
        let line = line.expect("the stream stays open");
        if let Some(data) = line.strip_prefix("data: ") {
            return serde_json::from_str(data).expect("settings json");
        }
    }
    panic!("the settings stream ended");
}

#[test]
fn config_set_in_another_process_reaches_the_page_and_a_bad_save_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(dir.path());
    assert!(
        server
            .banner
            .iter()
            .any(|l| l.contains("(created with the spec defaults; watched")),
        "the banner says the settings file was created: {:?}",
        server.banner
    );
    let events = request(&server.addr, "GET", "/v1/settings/events", "");
    let mut lines = BufReader::new(events).lines();
    let first = next_settings(&mut lines);
    assert_eq!(first["settings"]["adaptive_compaction_threshold"], 0.75);
    let file = first["path"].as_str().expect("path").to_owned();

    let status = compaction()
        .args(["config", "set", "adaptive_compaction_threshold", "0.6"])
        .env("ZOTERO_DATA_DIR", dir.path())
        .stdout(Stdio::null())
        .status()
        .expect("compaction config set");
    assert!(status.success());
    let changed = next_settings(&mut lines);
    assert_eq!(changed["changed_by"], "file");
    assert_eq!(changed["settings"]["adaptive_compaction_threshold"], 0.6);

    let before = std::fs::read(&file).expect("read the file");
    let mut answer = String::new();
    request(
        &server.addr,
        "PUT",
        "/v1/settings",
        r#"{"adaptive_compaction_threshold": "1.5"}"#,
    )
    .read_to_string(&mut answer)
    .expect("answer");
    assert!(answer.starts_with("HTTP/1.1 422"), "{answer}");
    assert!(
        answer.contains(
            "adaptive_compaction_threshold must be a number in [0.0, 1.0], got 1.5; the file \
             was left untouched"
        ),
        "{answer}"
    );
    assert_eq!(std::fs::read(&file).expect("read the file"), before);
}

#[test]
fn sigterm_stops_the_server_gracefully_and_leaves_a_consistent_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = serve(dir.path());
    let mut created = String::new();
    request(
        &server.addr,
        "POST",
        "/v1/sessions",
        r#"{"app": "app", "user": "u", "id": "s"}"#,
    )
    .read_to_string(&mut created)
    .expect("answer");
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    let mut streamed = String::new();
    request(
        &server.addr,
        "POST",
        "/v1/sessions/app/u/s/chat",
        r#"{"message": "What limits fast charging?"}"#,
    )
    .read_to_string(&mut streamed)
    .expect("answer");
    assert!(streamed.contains("event: done"), "{streamed}");

    let pid = server.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = server.child.wait().expect("wait");
    let mut stderr = String::new();
    server
        .child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert!(status.success(), "exit {status:?}: {stderr}");
    assert!(
        stderr.contains("stopped: every turn and evaluation ended"),
        "{stderr}"
    );

    let inspect = compaction()
        .args(["inspect", "--check", "--db"])
        .arg(dir.path().join("sessions.db"))
        .args(["--session", "s", "--app", "app", "--user", "u"])
        .output()
        .expect("inspect");
    let shown = String::from_utf8_lossy(&inspect.stdout);
    assert!(
        inspect.status.success(),
        "{}",
        String::from_utf8_lossy(&inspect.stderr)
    );
    assert!(
        shown.contains("What limits fast charging?"),
        "the acknowledged turn is stored: {shown}"
    );
}
