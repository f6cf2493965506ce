//! A throwaway PostgreSQL cluster: the one launcher behind `cargo xtask pg start|stop|url`,
//! `verify`'s own cluster and the tests that need a cluster of their own (a restart).
//!
//! The cluster lives in a fresh temp directory (initdb with `--auth=trust --no-locale`, its unix
//! socket in that directory, TCP on a free port of 127.0.0.1 only, `fsync=off`) and is owned by
//! the `postgres` user when run as root (initdb refuses root; the commands run through
//! `runuser -u postgres --`). The binaries come from the newest
//! `/usr/lib/postgresql/<version>/bin` (Debian's `postgresql` package), or `$PG_BIN` when set.
//!
//! A [`Cluster`] is a handle, not an owner: it keeps running until [`Cluster::stop`], so that
//! `cargo xtask pg start` can leave it for the tests; a test that owns one stops it itself.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable the PostgreSQL tests read (`cargo xtask pg start` prints it).
pub const URL_VAR: &str = "COMPACTION_TEST_POSTGRES_URL";

/// The test database's URL from [`URL_VAR`], for a test: `None` after a `SKIPPED <test>` line
/// when it is unset; under `CI=true` a missing URL fails the test (a panic naming the variable).
pub fn database_url(test: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            let msg = format!(
                "SKIPPED {test}: {URL_VAR} is unset (start a database with `cargo xtask pg start` \
                 and export the URL it prints, or run `cargo xtask verify`)"
            );
            assert!(
                !crate::in_ci(),
                "{msg}; under CI=true the PostgreSQL tests must run"
            );
            // The real stderr, past the test harness's capture.
            let _ = writeln!(std::io::stderr(), "{msg}");
            None
        }
    }
}

/// Whether a test can start a cluster of its own: `false` after a `SKIPPED <test>` line when
/// PostgreSQL is not installed; under `CI=true` that fails the test.
pub fn installed(test: &str) -> bool {
    if binaries().is_some() {
        return true;
    }
    let msg = format!("SKIPPED {test}: {NOT_INSTALLED}");
    assert!(
        !crate::in_ci(),
        "{msg}; under CI=true the PostgreSQL tests must run"
    );
    let _ = writeln!(std::io::stderr(), "{msg}");
    false
}

/// A running throwaway cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
}

/// The newest PostgreSQL binary directory, if PostgreSQL is installed.
pub fn binaries() -> Option<PathBuf> {
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

/// Why no cluster can be started here, for a message.
pub const NOT_INSTALLED: &str = "no PostgreSQL binaries: install Debian's `postgresql` package \
     (they go to /usr/lib/postgresql/<version>/bin) or set PG_BIN to the directory holding initdb";

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn utf8(path: &Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
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

/// As root, PostgreSQL refuses to run: the cluster's directory goes to a `postgres` system
/// user (created when missing), and `run_as_owner` runs the tools as that user.
fn hand_to_postgres_user(dir: &Path) -> Result<(), String> {
    let exists = Command::new("id")
        .args(["-u", "postgres"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !exists {
        let status = Command::new("useradd")
            .args(["--system", "--home-dir", "/nonexistent"])
            .args(["--shell", "/usr/sbin/nologin", "postgres"])
            .status()
            .map_err(|e| format!("could not run useradd: {e}"))?;
        if !status.success() {
            return Err(format!("useradd postgres failed ({status})"));
        }
    }
    let status = Command::new("chown")
        .arg("postgres:postgres")
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

impl Cluster {
    /// Starts a cluster in a fresh temp directory (see the module docs).
    pub fn start() -> Result<Cluster, String> {
        let bin = binaries().ok_or(NOT_INSTALLED)?;
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("compaction-pg-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut cluster = Cluster { dir, bin, port: 0 };
        match cluster.init_and_start() {
            Ok(()) => Ok(cluster),
            Err(e) => {
                let _ = cluster.stop();
                Err(e)
            }
        }
    }

    /// A cluster started earlier (by `cargo xtask pg start`), from what [`Cluster::record`]
    /// wrote.
    pub fn from_record(text: &str) -> Result<Cluster, String> {
        let mut lines = text.lines();
        let mut next = |what: &str| {
            lines
                .next()
                .map(str::to_owned)
                .ok_or_else(|| format!("missing the {what} line"))
        };
        let dir = PathBuf::from(next("directory")?);
        let bin = PathBuf::from(next("binaries")?);
        let port = next("port")?;
        let port = port
            .parse()
            .map_err(|_| format!("the port line is not a port number: {port:?}"))?;
        Ok(Cluster { dir, bin, port })
    }

    /// What [`Cluster::from_record`] reads back: directory, binaries and port, one a line.
    pub fn record(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.dir.display(),
            self.bin.display(),
            self.port
        )
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The URL of database `name` as the trusted `postgres` user over TCP.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    fn init_and_start(&mut self) -> Result<(), String> {
        if is_root() {
            hand_to_postgres_user(&self.dir)?;
        }
        let data = self.dir.join("data");
        let args = ["-D", utf8(&data)?, "-U", "postgres", "--auth=trust"];
        let options = ["--no-locale", "--encoding=UTF8", "--no-sync"];
        let args: Vec<&str> = args.iter().chain(&options).copied().collect();
        run_as_owner(&self.dir, &self.bin.join("initdb"), &args)?;
        self.port = free_port()?;
        let server_options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off \
             -c full_page_writes=off -c synchronous_commit=off -c max_connections=300",
            self.port,
            utf8(&self.dir)?
        );
        self.pg_ctl(&["-o", &server_options, "start"]).map_err(|e| {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            format!("{e}\nserver log:\n{log}")
        })
    }

    /// `pg_ctl` on this cluster's data directory, waiting up to 60 s.
    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let mut all = vec!["-D", utf8(&data)?, "-l", utf8(&log)?, "-w", "-t", "60"];
        all.extend_from_slice(args);
        run_as_owner(&self.dir, &self.bin.join("pg_ctl"), &all).map(drop)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> Result<String, String> {
        let port = self.port.to_string();
        let args = ["-h", "127.0.0.1", "-p", &port, "-U", "postgres", name];
        run_as_owner(&self.dir, &self.bin.join("createdb"), &args)?;
        Ok(self.url(name))
    }

    /// `pg_ctl restart -m fast`: every connection is closed, then the server accepts new ones
    /// on the same port (returns when it does).
    pub fn restart(&self) -> Result<(), String> {
        self.pg_ctl(&["-m", "fast", "restart"])
    }

    /// Stops the server (`-m immediate`) and deletes the cluster's directory.
    pub fn stop(&self) -> Result<(), String> {
        let stopped = if self.dir.join("data").is_dir() {
            self.pg_ctl(&["-m", "immediate", "stop"])
        } else {
            Ok(())
        };
        std::fs::remove_dir_all(&self.dir)
            .map_err(|e| format!("removing {}: {e}", self.dir.display()))?;
        stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_the_same_cluster() {
        let cluster = Cluster {
            dir: PathBuf::from("/tmp/compaction-pg-1-2"),
            bin: PathBuf::from("/usr/lib/postgresql/17/bin"),
            port: 54_321,
        };
        let back = Cluster::from_record(&cluster.record()).expect("reads back");
        assert_eq!(back.record(), cluster.record());
        assert_eq!(back.url("db"), "postgres://postgres@127.0.0.1:54321/db");
    }

    #[test]
    fn a_damaged_record_names_what_is_wrong() {
        let err = Cluster::from_record("/tmp/x\n/usr/bin\nnot-a-port\n").unwrap_err();
        assert!(err.contains("port") && err.contains("not-a-port"), "{err}");
        let err = Cluster::from_record("/tmp/x\n").unwrap_err();
        assert!(err.contains("binaries"), "{err}");
    }
}
