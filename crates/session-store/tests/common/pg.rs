//! What the PostgreSQL tests share: the test database's URL with its skip rule, schema names
//! no other test uses, and a plain connection for a test's own SQL.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::NoTls;

/// The variable the tests read (`cargo xtask pg start` prints it).
pub const URL_VAR: &str = "COMPACTION_TEST_POSTGRES_URL";

/// The test database's URL, or `None` after printing why the test is skipped. Under
/// `CI=true` a missing URL fails the test.
pub fn database_url(test: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            let msg = format!(
                "SKIPPED {test}: {URL_VAR} is unset (start a database with `cargo xtask pg start` \
                 and export the URL it prints, or run `cargo xtask verify`)"
            );
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{msg}; under CI=true the PostgreSQL tests must run"
            );
            // The real stderr, past the test harness's capture.
            let _ = writeln!(std::io::stderr(), "{msg}");
            None
        }
    }
}

/// A schema name starting with `prefix` that no other test (or earlier run) uses.
pub fn unique_schema(prefix: &str, test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}_{test}_{}_{}_{}",
        std::process::id(),
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A plain connection for the test's own SQL.
pub async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("admin connection");
    tokio::spawn(connection);
    client
}
