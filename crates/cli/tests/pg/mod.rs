//! What the PostgreSQL tests of the `compaction` binary share: the test database's URL (with
//! the skip rule), a fresh database per test, and the binary itself.
#![allow(dead_code)]

use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::NoTls;

pub(crate) mod cluster;
pub(crate) mod serve;

/// A password that must never be shown. The test cluster trusts every connection, so it is
/// accepted and ignored by the server, which is all these tests need: they check what the
/// binary shows, not how the server authenticates.
pub(crate) const SECRET: &str = "hunter2-Secret-pw";

/// A name no other test (or earlier run) uses.
pub(crate) fn unique_name(test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "t_{test}_{}_{nanos}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A plain connection for the test's own SQL.
pub(crate) async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("admin connection");
    tokio::spawn(connection);
    client
}

/// `url` pointing at database `dbname`, with `password` when given.
pub(crate) fn url_of(url: &str, dbname: &str, password: Option<&str>) -> String {
    let config = tokio_postgres::Config::from_str(url).expect("the test URL parses");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let password = password.map(|p| format!(":{p}")).unwrap_or_default();
    format!("postgres://{user}{password}@{host}:{port}/{dbname}")
}

/// A new, empty database for one test; its URL without a password.
pub(crate) async fn fresh_database(url: &str, test: &str) -> String {
    let name = unique_name(test);
    admin(url)
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create the test's database");
    url_of(url, &name, None)
}

/// The password-less display form the binary shows for `url`'s database.
pub(crate) fn shown(url: &str) -> String {
    format!("{} (schema compaction)", url_of(url, &dbname(url), None))
}

pub(crate) fn dbname(url: &str) -> String {
    tokio_postgres::Config::from_str(url)
        .expect("the test URL parses")
        .get_dbname()
        .expect("a database name")
        .to_owned()
}

/// The built binary, with no ambient OTLP endpoint, every log line on (so that a leak into a
/// log would show), and the default config location in `dir` (no config file there: the
/// offline models and the spec defaults).
pub(crate) fn compaction(dir: &std::path::Path) -> Command {
    let mut command = crate::common::compaction();
    command
        .env("COMPACTION_LOG", "trace")
        .env("ZOTERO_DATA_DIR", dir);
    command
}

/// A transcript of `n` turns whose prompts are over the ceiling from the start, so the
/// backstop compacts without a remote model.
pub(crate) fn transcript(n: usize) -> String {
    (1..=n)
        .map(|i| {
            serde_json::json!({
                "user": format!("Question {i} about electrolyte {}?", i / 3),
                "assistant": format!("Answer {i}: a capacity of {i}.5 mAh/g."),
                "prompt_tokens": 120_000,
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}
