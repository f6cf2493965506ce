//! `cargo xtask pg start|stop|url`: a throwaway PostgreSQL cluster for the PostgreSQL store's
//! tests, and the one `verify` starts for itself.
//!
//! The cluster lives in a fresh temp directory (initdb with `--auth=trust --no-locale`, its unix
//! socket in that directory, TCP on a free port of 127.0.0.1 only, `fsync=off`), holds one
//! database `compaction_test`, and is owned by the `postgres` user when run as root (initdb
//! refuses root; the commands run through `runuser -u postgres --`). The binaries come from the
//! newest `/usr/lib/postgresql/<version>/bin` (Debian's `postgresql` package), or
//! `$PG_BIN` when set.
//!
//! `start` records the cluster in `target/xtask-pg/cluster` (directory, binaries, URL) so that
//! `url` and `stop` find it; `stop` stops the server (`-m immediate`) and deletes the directory.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable the PostgreSQL tests read.
pub(crate) const URL_VAR: &str = "COMPACTION_TEST_POSTGRES_URL";

/// A running throwaway cluster.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    /// `postgres://postgres@127.0.0.1:<port>/compaction_test`
    pub(crate) url: String,
}

/// The newest PostgreSQL binary directory, if PostgreSQL is installed.
pub(crate) fn binaries() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("PG_BIN") {
        let bin = PathBuf::from(bin);
        return bin.join("initdb").is_file().then_some(bin);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `program` with `args` as the cluster's owner (through `runuser` when root), in `dir`.
fn run_as_owner(dir: &Path, program: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    let output = command
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("could not run {}: {e}", program.display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{} {} failed ({}): {}{}",
            program.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("could not find a free port on 127.0.0.1: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// Starts a throwaway cluster and returns it (see the module docs).
pub(crate) fn start_cluster() -> Result<Cluster, String> {
    let bin = binaries().ok_or(
        "no PostgreSQL binaries: install Debian's `postgresql` package (they go to \
         /usr/lib/postgresql/<version>/bin) or set PG_BIN to the directory holding initdb",
    )?;
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("compaction-pg-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let cluster = Cluster {
        dir: dir.clone(),
        bin: bin.clone(),
        url: String::new(),
    };
    match init_and_start(&cluster) {
        Ok(url) => Ok(Cluster { url, ..cluster }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

fn init_and_start(cluster: &Cluster) -> Result<String, String> {
    let (dir, bin) = (&cluster.dir, &cluster.bin);
    if is_root() {
        hand_to_postgres_user(dir)?;
    }
    let data = dir.join("data");
    let data = data.to_str().ok_or("temp dir is not UTF-8")?;
    let dir_str = dir.to_str().ok_or("temp dir is not UTF-8")?;
    run_as_owner(
        dir,
        &bin.join("initdb"),
        &[
            "-D",
            data,
            "-U",
            "postgres",
            "--auth=trust",
            "--no-locale",
            "--encoding=UTF8",
            "--no-sync",
        ],
    )?;
    let port = free_port()?;
    let server_options = format!(
        "-c listen_addresses=127.0.0.1 -p {port} -k {dir_str} -c fsync=off \
         -c full_page_writes=off -c synchronous_commit=off -c max_connections=300"
    );
    let log = dir.join("server.log");
    let started = run_as_owner(
        dir,
        &bin.join("pg_ctl"),
        &[
            "-D",
            data,
            "-l",
            log.to_str().ok_or("temp dir is not UTF-8")?,
            "-w",
            "-t",
            "30",
            "-o",
            &server_options,
            "start",
        ],
    );
    if let Err(e) = started {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        return Err(format!("{e}\nserver log:\n{log}"));
    }
    let port_str = port.to_string();
    let created = run_as_owner(
        dir,
        &bin.join("createdb"),
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &port_str,
            "-U",
            "postgres",
            "compaction_test",
        ],
    );
    if let Err(e) = created {
        let _ = stop_cluster_at(dir, bin);
        return Err(e);
    }
    Ok(format!(
        "postgres://postgres@127.0.0.1:{port}/compaction_test"
    ))
}

/// As root, PostgreSQL refuses to run: the cluster's directory goes to a `postgres` system
/// user (created when missing), and `run_as_owner` runs the tools as that user.
fn hand_to_postgres_user(dir: &Path) -> Result<(), String> {
    let exists = Command::new("id")
        .args(["-u", "postgres"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !exists {
        let status = Command::new("useradd")
            .args([
                "--system",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "postgres",
            ])
            .status()
            .map_err(|e| format!("could not run useradd: {e}"))?;
        if !status.success() {
            return Err(format!("useradd postgres failed ({status})"));
        }
    }
    let status = Command::new("chown")
        .args(["postgres:postgres"])
        .arg(dir)
        .status()
        .map_err(|e| format!("could not run chown: {e}"))?;
    if !status.success() {
        return Err(format!(
            "chown postgres {} failed ({status})",
            dir.display()
        ));
    }
    Ok(())
}

fn stop_cluster_at(dir: &Path, bin: &Path) -> Result<(), String> {
    let data = dir.join("data");
    let stopped = if data.is_dir() {
        run_as_owner(
            dir,
            &bin.join("pg_ctl"),
            &[
                "-D",
                data.to_str().ok_or("temp dir is not UTF-8")?,
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        )
        .map(drop)
    } else {
        Ok(())
    };
    std::fs::remove_dir_all(dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    stopped
}

/// Stops the cluster and deletes its directory.
pub(crate) fn stop_cluster(cluster: &Cluster) -> Result<(), String> {
    stop_cluster_at(&cluster.dir, &cluster.bin)
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
    let mut lines = text.lines();
    let mut next = |what: &str| {
        lines
            .next()
            .map(str::to_owned)
            .ok_or_else(|| format!("{}: missing the {what} line", path.display()))
    };
    Ok(Cluster {
        dir: PathBuf::from(next("directory")?),
        bin: PathBuf::from(next("binaries")?),
        url: next("URL")?,
    })
}

/// `cargo xtask pg start|stop|url`.
pub(crate) fn command(args: &[String]) -> ExitCode {
    let result = match args.first().map(String::as_str) {
        Some("start") => start_recorded(),
        Some("stop") => read_record().and_then(|cluster| {
            stop_cluster(&cluster)?;
            std::fs::remove_file(record_path()).map_err(|e| e.to_string())?;
            eprintln!("stopped the cluster in {}", cluster.dir.display());
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
        .and_then(|()| {
            std::fs::write(
                &path,
                format!(
                    "{}\n{}\n{}\n",
                    cluster.dir.display(),
                    cluster.bin.display(),
                    cluster.url
                ),
            )
        });
    if let Err(e) = written {
        let _ = stop_cluster(&cluster);
        return Err(format!("recording the cluster in {}: {e}", path.display()));
    }
    eprintln!(
        "started PostgreSQL in {} (stop it with `cargo xtask pg stop`); for the tests:\n  export {URL_VAR}={}",
        cluster.dir.display(),
        cluster.url
    );
    println!("{}", cluster.url);
    Ok(())
}
