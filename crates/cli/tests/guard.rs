//! `compaction serve` against hostile pages, from outside: the real binary on loopback, raw
//! HTTP/1.1 requests whose every header the test chooses. Each attack is refused before any
//! handler runs and writes nothing: the settings file stays byte-identical, no session is
//! created, the coordinator (a wiremock server that expects no call) is never reached. A
//! token-protected bind refuses a missing or wrong token and accepts the right one, by header
//! or by the cookie its login URL sets.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::{Serve, serve_in, use_coordinator};

/// One answer: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request with exactly `headers` (plus Content-Length and Connection: close).
fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("bound the reads");
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read the answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// One attack: name, method, path, headers, body, the status it must get.
type Attack<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Vec<(&'a str, &'a str)>,
    &'a str,
    u16,
);

/// `compaction serve` with its database and settings file in `dir`, and `extra` arguments.
fn serve(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
    serve_in(dir, extra, env)
}

fn settings_file(dir: &Path) -> std::path::PathBuf {
    dir.join("zocrates-data/zocrates_config.json")
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_pages_and_rebinding_hosts_are_refused_and_write_nothing() {
    let upstream = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(500))
        .expect(0)
        .mount(&upstream)
        .await;
    let dir = tempfile::tempdir().expect("dir");
    use_coordinator(dir.path(), &upstream.uri());
    let server = serve(dir.path(), &[], &[]);
    let addr = server.addr.clone();
    let own = format!("http://{addr}");
    let before = std::fs::read(settings_file(dir.path())).expect("settings file");
    // A session the test itself creates, same-origin: the page's own way works.
    let created = send(
        &addr,
        "POST",
        "/v1/sessions",
        &[
            ("Host", &addr),
            ("Origin", &own),
            ("Content-Type", "application/json"),
        ],
        r#"{"app": "a", "user": "u", "id": "mine"}"#,
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let evil = "http://evil.example";
    let threshold = r#"{"adaptive_compaction_threshold": 0.1}"#;
    let chat = "/v1/sessions/a/u/mine/chat";
    let attacks: [Attack<'_>; 8] = [
        (
            "simple cross-origin settings write",
            "PUT",
            "/v1/settings",
            vec![
                ("Host", &addr),
                ("Origin", evil),
                ("Content-Type", "text/plain"),
            ],
            threshold,
            415,
        ),
        (
            "cross-origin JSON settings write",
            "PUT",
            "/v1/settings",
            vec![
                ("Host", &addr),
                ("Origin", evil),
                ("Content-Type", "application/json"),
            ],
            threshold,
            403,
        ),
        (
            "simple cross-origin session",
            "POST",
            "/v1/sessions",
            vec![
                ("Host", &addr),
                ("Origin", evil),
                ("Content-Type", "text/plain"),
            ],
            r#"{"app": "a", "user": "u", "id": "evil"}"#,
            415,
        ),
        (
            "cross-origin chat turn",
            "POST",
            chat,
            vec![
                ("Host", &addr),
                ("Origin", evil),
                ("Content-Type", "application/json"),
            ],
            r#"{"message": "spend the credits"}"#,
            403,
        ),
        (
            "form-encoded chat turn",
            "POST",
            chat,
            vec![
                ("Host", &addr),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            "message=hi",
            415,
        ),
        (
            "null origin",
            "POST",
            chat,
            vec![
                ("Host", &addr),
                ("Origin", "null"),
                ("Content-Type", "application/json"),
            ],
            r#"{"message": "hi"}"#,
            403,
        ),
        (
            "rebinding host reads sessions",
            "GET",
            "/v1/sessions/a/u/mine",
            vec![("Host", "evil.example:80")],
            "",
            421,
        ),
        (
            "rebinding host writes",
            "POST",
            chat,
            vec![
                ("Host", "evil.example"),
                ("Content-Type", "application/json"),
            ],
            r#"{"message": "hi"}"#,
            421,
        ),
    ];
    for (name, method, path, headers, body, status) in &attacks {
        let answer = send(&addr, method, path, headers, body);
        assert_eq!(answer.status, *status, "{name}: {}", answer.body);
        let json: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON error body");
        assert_eq!(json["error"]["status"], *status, "{name}");
        assert!(json["error"]["message"].is_string(), "{name}");
    }
    assert_eq!(
        std::fs::read(settings_file(dir.path())).expect("settings file"),
        before,
        "the settings file is byte-identical"
    );
    let session = send(
        &addr,
        "GET",
        "/v1/sessions/a/u/mine",
        &[("Host", &addr)],
        "",
    );
    assert_eq!(session.status, 200);
    let json: serde_json::Value = serde_json::from_str(&session.body).expect("json");
    assert_eq!(
        json["context"],
        serde_json::json!([]),
        "no event was written"
    );
    let evil_session = send(
        &addr,
        "GET",
        "/v1/sessions/a/u/evil",
        &[("Host", &addr)],
        "",
    );
    assert_eq!(evil_session.status, 404, "no session was created");
    drop(server);
    upstream.verify().await;
}

#[test]
fn every_answer_carries_the_security_headers() {
    let dir = tempfile::tempdir().expect("dir");
    let server = serve(dir.path(), &[], &[]);
    let addr = server.addr.clone();
    for path in [
        "/",
        "/assets/app.js",
        "/v1/sessions",
        "/healthz",
        "/nowhere",
    ] {
        let answer = send(&addr, "GET", path, &[("Host", &addr)], "");
        assert_eq!(
            answer.header("content-security-policy"),
            Some("default-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
            "{path}"
        );
        assert_eq!(
            answer.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            answer.header("referrer-policy"),
            Some("no-referrer"),
            "{path}"
        );
        assert_eq!(answer.header("access-control-allow-origin"), None, "{path}");
    }
    let api = send(&addr, "GET", "/v1/sessions", &[("Host", &addr)], "");
    assert_eq!(api.header("cache-control"), Some("no-store"));
    // localhost and [::1] names are loopback too.
    for host in ["localhost", "[::1]:1234"] {
        assert_eq!(
            send(&addr, "GET", "/healthz", &[("Host", host)], "").status,
            200
        );
    }
}

#[test]
fn an_explicit_cors_origin_may_call_the_api() {
    let dir = tempfile::tempdir().expect("dir");
    let tool = "http://localhost:3000";
    let server = serve(dir.path(), &["--cors-origin", tool], &[]);
    let addr = server.addr.clone();
    let preflight = send(
        &addr,
        "OPTIONS",
        "/v1/sessions",
        &[
            ("Host", &addr),
            ("Origin", tool),
            ("Access-Control-Request-Method", "POST"),
        ],
        "",
    );
    assert_eq!(preflight.status, 204);
    assert_eq!(preflight.header("access-control-allow-origin"), Some(tool));
    let created = send(
        &addr,
        "POST",
        "/v1/sessions",
        &[
            ("Host", &addr),
            ("Origin", tool),
            ("Content-Type", "application/json"),
        ],
        r#"{"app": "a", "user": "u", "id": "s"}"#,
    );
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.header("access-control-allow-origin"), Some(tool));
    let other = send(
        &addr,
        "POST",
        "/v1/sessions",
        &[
            ("Host", &addr),
            ("Origin", "http://localhost:4000.evil.example"),
            ("Content-Type", "application/json"),
        ],
        r#"{"app": "a", "user": "u", "id": "t"}"#,
    );
    assert_eq!(other.status, 403, "{}", other.body);
}

#[test]
fn a_token_protected_bind_refuses_a_missing_or_wrong_token() {
    let dir = tempfile::tempdir().expect("dir");
    let secret = "test-token-0123456789";
    let server = serve(
        dir.path(),
        &["--require-token", "--token-env", "TEST_SERVE_TOKEN"],
        &[("TEST_SERVE_TOKEN", secret)],
    );
    assert!(
        server.banner.iter().all(|l| !l.contains(secret)),
        "a token from the environment is never printed: {:?}",
        server.banner
    );
    let addr = server.addr.clone();
    let list = |auth: Option<&str>| {
        let mut headers = vec![("Host", addr.as_str())];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        send(&addr, "GET", "/v1/sessions", &headers, "").status
    };
    assert_eq!(list(None), 401);
    assert_eq!(list(Some("Bearer wrong-token")), 401);
    assert_eq!(list(Some(&format!("Bearer {secret}x"))), 401);
    assert_eq!(list(Some(&format!("Bearer {secret}"))), 200);
    assert_eq!(
        send(&addr, "GET", "/healthz", &[("Host", &addr)], "").status,
        200
    );
    assert_eq!(send(&addr, "GET", "/", &[("Host", &addr)], "").status, 401);
    let wrong = send(&addr, "GET", "/?token=nope", &[("Host", &addr)], "");
    assert_eq!(wrong.status, 401);
    let login = send(
        &addr,
        "GET",
        &format!("/?token={secret}"),
        &[("Host", &addr)],
        "",
    );
    assert_eq!(login.status, 303);
    assert_eq!(login.header("location"), Some("/"));
    let cookie = login.header("set-cookie").expect("a cookie").to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().expect("name=value").to_owned();
    let page = send(&addr, "GET", "/", &[("Host", &addr), ("Cookie", &pair)], "");
    assert_eq!(page.status, 200);
}

#[test]
fn a_generated_token_is_printed_once_with_its_login_url() {
    let dir = tempfile::tempdir().expect("dir");
    let server = serve(dir.path(), &["--require-token"], &[]);
    let line = server
        .banner
        .iter()
        .find(|l| l.starts_with("access: token required; log in at "))
        .unwrap_or_else(|| panic!("{:?}", server.banner))
        .clone();
    let token = line
        .split("?token=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a token in the login URL");
    assert_eq!(token.len(), 48, "{line}");
    let addr = server.addr.clone();
    let bearer = format!("Bearer {token}");
    let ok = send(
        &addr,
        "GET",
        "/v1/sessions",
        &[("Host", &addr), ("Authorization", &bearer)],
        "",
    );
    assert_eq!(ok.status, 200);
}

/// SIGTERM with a client stuck half-way through a request and idle connections: the process
/// exits within its `--grace` period plus 2 s.
#[test]
fn sigterm_exits_within_the_grace_period_whatever_clients_do() {
    let dir = tempfile::tempdir().expect("dir");
    let mut server = serve(
        dir.path(),
        &[
            "--grace",
            "1",
            "--header-timeout",
            "60",
            "--body-timeout",
            "60",
        ],
        &[],
    );
    let addr = server.addr.clone();
    let mut half = TcpStream::connect(&addr).expect("connect");
    write!(
        half,
        "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"app\""
    )
    .expect("send half a request");
    let idle: Vec<TcpStream> = (0..50)
        .map(|_| TcpStream::connect(&addr).expect("connect"))
        .collect();
    let started = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = server.child.wait().expect("wait");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "exit after {took:?} ({status})"
    );
    drop((half, idle));
}
