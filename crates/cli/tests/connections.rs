//! `compaction serve` under 2,000 idle and slow connections (issue 28), from outside: a new
//! client is answered at once (the connection cap fits the raised descriptor budget, so nobody
//! queues behind idle sockets), and every idle or slow connection is closed by the header
//! timeout.

mod common;

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::serve_in;

/// The header timeout the server runs with: a client that queued behind the idle connections
/// would wait about this long.
const HEADER_TIMEOUT_SECS: u64 = 8;

/// Raises this process's descriptor limit (it holds 2,000 sockets; the server it starts
/// inherits the limit): to 8,192 where the hard limit is lower and the process may raise it
/// (root, as in CI), else the soft limit to the hard one.
fn raise_own_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let wanted = limit.maximum.map(|hard| hard.max(8_192));
    let raised = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: wanted,
            maximum: wanted,
        },
    );
    if raised.is_err() {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        );
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Waits until the server closes `stream` (end of file or a reset); false when it is still
/// open after `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream
        .set_read_timeout(Some(within))
        .expect("bound the read");
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            // A slow connection may get an answer (408) before the close.
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn two_thousand_idle_and_slow_connections_neither_stop_a_new_client_nor_stay_open() {
    let limit = raise_own_limit();
    assert!(
        limit >= 2_300,
        "this test holds 2,000 sockets; the hard descriptor limit is {limit}"
    );
    let dir = tempfile::tempdir().expect("dir");
    let timeout = HEADER_TIMEOUT_SECS.to_string();
    let server = serve_in(dir.path(), &["--header-timeout", &timeout], &[]);
    let connections = server
        .banner
        .iter()
        .find(|l| l.starts_with("connections:"))
        .expect("the banner says how many connections it serves");
    assert!(connections.contains("at most"), "{connections}");

    let opened = Instant::now();
    let mut held: Vec<TcpStream> = (0..2_000)
        .map(|i| {
            let mut stream = TcpStream::connect(&server.addr).expect("connect");
            if i % 2 == 1 {
                // Half a request head, never finished.
                stream
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    .expect("send half a head");
            }
            stream
        })
        .collect();

    let asked = Instant::now();
    let mut client = TcpStream::connect(&server.addr).expect("a new client connects");
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("bound the read");
    write!(
        client,
        "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr
    )
    .expect("ask");
    let mut answer = String::new();
    client.read_to_string(&mut answer).expect("an answer");
    let waited = asked.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        waited < Duration::from_secs(HEADER_TIMEOUT_SECS / 2),
        "a new client waited {waited:?} behind 2,000 idle or slow connections"
    );

    let deadline = Duration::from_secs(HEADER_TIMEOUT_SECS * 3);
    let open = held
        .iter_mut()
        .filter_map(|s| {
            let left = deadline.saturating_sub(opened.elapsed());
            (!closed_within(s, left.max(Duration::from_millis(1)))).then_some(())
        })
        .count();
    assert_eq!(
        open, 0,
        "connections still open {deadline:?} after they were opened (header timeout {HEADER_TIMEOUT_SECS} s)"
    );
}
