//! A password in a PostgreSQL connection string never shows (feature `postgres`, against the
//! real test database; the skip rule of `tests/postgres.rs`). Its own test binary: the test
//! captures log lines with a thread-default `tracing` subscriber, which tests running beside it
//! in one process would race (callsites cache their interest process-wide).
#![cfg(feature = "postgres")]

mod common;

use std::io::Write;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use common::pg::unique_schema;
use compaction_core::{FailureKind, SessionKey, SessionStore};
use session_store::{PostgresOptions, PostgresStore, SessionStoreError};
use test_data::pg::database_url;

fn key(n: u64) -> SessionKey {
    SessionKey::new("zocrates", "user-1", format!("session-{n}"))
}

/// A tracing writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The same URL in libpq's key=value form with a password added (the test cluster trusts
/// every connection, so the password is accepted and ignored).
fn with_password(url: &str, password: &str) -> String {
    let config = tokio_postgres::Config::from_str(url).unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    format!(
        "host={host} port={} user={} dbname={} password={password}",
        config.get_ports().first().copied().unwrap_or(5432),
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("postgres"),
    )
}

/// A password in the connection string never shows: not in `Debug`, not in `database()`, not
/// in the log lines (the migration's), not in errors (a refused connection, a string that does
/// not parse, a session that is not there).
#[test]
fn a_password_never_appears_in_errors_logs_or_debug() {
    let Some(url) = database_url("a_password_never_appears_in_errors_logs_or_debug") else {
        return;
    };
    const SECRET: &str = "hunter2-Secret-pw";
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut shown: Vec<String> = Vec::new();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let schema = unique_schema("t", "secret");
            let store = PostgresStore::connect_with(
                &with_password(&url, SECRET),
                PostgresOptions::default().schema(&schema),
            )
            .await
            .unwrap();
            shown.push(format!("{store:?}"));
            shown.push(store.database().to_owned());
            let missing = store.load(&key(9)).await.unwrap_err();
            shown.push(missing.to_string());
            shown.push(format!("{missing:?}"));

            // Nothing listens on this port: the connection is refused.
            let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = closed.local_addr().unwrap().port();
            drop(closed);
            let refused = PostgresStore::connect(&format!(
                "postgres://alice:{SECRET}@127.0.0.1:{port}/db?connect_timeout=5"
            ))
            .await
            .unwrap_err();
            assert_eq!(refused.failure_kind(), FailureKind::Transport, "{refused}");
            shown.push(refused.to_string());
            shown.push(format!("{refused:?}"));

            for bad in [
                format!("postgres://alice:{SECRET}@127.0.0.1:notaport/db"),
                format!("host=127.0.0.1 password={SECRET} port=x"),
                format!("postgres://alice:{SECRET}@127.0.0.1/db?nonsense_option={SECRET}"),
            ] {
                let err = PostgresStore::connect(&bad).await.unwrap_err();
                assert!(
                    matches!(err, SessionStoreError::PostgresConfig { .. }),
                    "{err:?}"
                );
                shown.push(err.to_string());
                shown.push(format!("{err:?}"));
            }
        });
    });
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("migrated session store"), "{logs}");
    assert!(shown[0].contains("PostgresStore") && shown[0].contains("postgres@"));
    for text in shown.iter().chain([&logs]) {
        assert!(!text.contains(SECRET), "the password leaked: {text}");
    }
}
