//! What the PostgreSQL tests share: the test database's URL with its skip rule, schema names
//! no other test uses, and a plain connection for a test's own SQL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::NoTls;

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
