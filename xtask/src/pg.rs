//! `cargo xtask pg start|stop|url`: a throwaway PostgreSQL cluster for the PostgreSQL store's
//! tests, and the one `verify` starts for itself. The launcher is test-data's
//! ([`test_data::pg`], shared with the tests that need a cluster of their own); this module adds
//! the test database `compaction_test` and the record that lets `url` and `stop` find the
//! cluster `start` left running (`target/xtask-pg/cluster`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(crate) use test_data::pg::{URL_VAR, binaries};

/// The database the PostgreSQL tests use.
const DATABASE: &str = "compaction_test";

/// A running throwaway cluster and its test database's URL.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    server: test_data::pg::Cluster,
    /// `postgres://postgres@127.0.0.1:<port>/compaction_test`
    pub(crate) url: String,
}

/// Starts a throwaway cluster with the test database.
pub(crate) fn start_cluster() -> Result<Cluster, String> {
    let server = test_data::pg::Cluster::start()?;
    match server.create_database(DATABASE) {
        Ok(url) => Ok(Cluster { server, url }),
        Err(e) => {
            let _ = server.stop();
            Err(e)
        }
    }
}

/// Stops the cluster and deletes its directory.
pub(crate) fn stop_cluster(cluster: &Cluster) -> Result<(), String> {
    cluster.server.stop()
}

/// Where `start` records the cluster for `url` and `stop`.
fn record_path() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    root.join("target").join("xtask-pg").join("cluster")
}

fn read_record() -> Result<Cluster, String> {
    let path = record_path();
    let text = std::fs::read_to_string(&path).map_err(|_| {
        format!(
            "no cluster recorded in {} (start one with `cargo xtask pg start`)",
            path.display()
        )
    })?;
    let server = test_data::pg::Cluster::from_record(&text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let url = server.url(DATABASE);
    Ok(Cluster { server, url })
}

/// `cargo xtask pg start|stop|url`.
pub(crate) fn command(args: &[String]) -> ExitCode {
    let result = match args.first().map(String::as_str) {
        Some("start") => start_recorded(),
        Some("stop") => read_record().and_then(|cluster| {
            stop_cluster(&cluster)?;
            std::fs::remove_file(record_path()).map_err(|e| e.to_string())?;
            eprintln!("stopped the cluster in {}", cluster.server.dir().display());
            Ok(())
        }),
        Some("url") => read_record().map(|cluster| println!("{}", cluster.url)),
        _ => Err("usage: cargo xtask pg <start|stop|url>".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask pg: {e}");
            ExitCode::FAILURE
        }
    }
}

fn start_recorded() -> Result<(), String> {
    if let Ok(running) = read_record() {
        return Err(format!(
            "a cluster is already recorded ({}); stop it first with `cargo xtask pg stop`",
            running.url
        ));
    }
    let cluster = start_cluster()?;
    let path = record_path();
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, cluster.server.record()));
    if let Err(e) = written {
        let _ = stop_cluster(&cluster);
        return Err(format!("recording the cluster in {}: {e}", path.display()));
    }
    eprintln!(
        "started PostgreSQL in {} (stop it with `cargo xtask pg stop`); for the tests:\n  export {URL_VAR}={}",
        cluster.server.dir().display(),
        cluster.url
    );
    println!("{}", cluster.url);
    Ok(())
}
