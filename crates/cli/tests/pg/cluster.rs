//! A PostgreSQL cluster owned by one test, for faults the shared test database must not see
//! (a restart): initdb in a temp directory, TCP on a free port of 127.0.0.1, trust auth, as the
//! `postgres` user when run as root (initdb refuses root). The same recipe as `cargo xtask pg`
//! (xtask/src/pg.rs). Stopped (`-m immediate`) and deleted when dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster of the test's own.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// `postgres://postgres@127.0.0.1:<port>/postgres`
    pub(crate) url: String,
}

/// The newest `/usr/lib/postgresql/<version>/bin` (or `$PG_BIN`), if PostgreSQL is installed.
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

/// Runs a PostgreSQL program as the cluster's owner; panics with its output on failure.
fn run_as_owner(dir: &Path, program: &Path, args: &[&str]) {
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
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    assert!(
        output.status.success(),
        "{} {} failed: {}{}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl Cluster {
    /// Starts a cluster with PostgreSQL's binaries in `bin`.
    pub(crate) fn start(bin: PathBuf) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("compaction-test-pg-")
            .tempdir()
            .expect("temp dir");
        if is_root() {
            // The `postgres` user exists where Debian's package is installed; initdb needs it
            // to own the directory.
            let status = Command::new("chown")
                .arg("postgres:postgres")
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown postgres {}", dir.path().display());
        }
        let data = dir.path().join("data");
        let data = data.to_str().expect("UTF-8 temp dir");
        run_as_owner(
            dir.path(),
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
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let cluster = Cluster {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            bin,
        };
        cluster.pg_ctl(&["-o", &cluster.server_options(port), "start"]);
        cluster
    }

    fn server_options(&self, port: u16) -> String {
        format!(
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off -c max_connections=100",
            self.dir.path().display()
        )
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("server.log");
        let mut all = vec![
            "-D",
            data.to_str().expect("UTF-8"),
            "-l",
            log.to_str().expect("UTF-8"),
            "-w",
            "-t",
            "60",
        ];
        all.extend_from_slice(args);
        run_as_owner(self.dir.path(), &self.bin.join("pg_ctl"), &all);
    }

    /// `pg_ctl restart -m fast`: every connection is closed, then the server accepts new ones
    /// on the same port (returns when it does).
    pub(crate) fn restart(&self) {
        self.pg_ctl(&["-m", "fast", "restart"]);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"));
            c
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = command
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}
