//! `compaction serve` as a process: it streams a turn over loopback, then SIGTERM stops it
//! gracefully (no new turns, running evaluations finish, exit 0) and leaves a database that
//! passes `inspect --check` with every acknowledged event in it.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

fn compaction() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_compaction"));
    command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    command
}

/// One HTTP/1.1 exchange with `Connection: close`: the status line's code and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Kills the server if the test fails before it stopped it.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigterm_stops_the_server_gracefully_and_leaves_a_consistent_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sessions.db");
    let config = dir.path().join("zocrates_config.json");
    let made = compaction()
        .args(["config", "show", "--config"])
        .arg(&config)
        .output()
        .expect("config show");
    assert!(made.status.success(), "{made:?}");
    let mut server = Server(
        compaction()
            .args(["serve", "--addr", "127.0.0.1:0", "--db"])
            .arg(&db)
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve"),
    );
    let stdout = server.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the banner names the address")
            .expect("utf-8");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().expect("addr").to_owned();
        }
    };
    let (status, _) = http(
        &addr,
        "POST",
        "/v1/sessions",
        r#"{"app": "app", "user": "u", "id": "s"}"#,
    );
    assert_eq!(status, 201);
    let (status, body) = http(
        &addr,
        "POST",
        "/v1/sessions/app/u/s/chat",
        r#"{"message": "What limits fast charging?"}"#,
    );
    assert_eq!(status, 200);
    assert!(body.contains("event: done"), "{body}");

    let pid = server.0.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = server.0.wait().expect("wait");
    let mut stderr = String::new();
    server
        .0
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
        .arg(&db)
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
