//! A PostgreSQL cluster owned by one test, for faults the shared test database must not see
//! (a restart): test-data's launcher (the one behind `cargo xtask pg`), stopped and deleted
//! when dropped.

/// A running cluster of the test's own.
pub(crate) struct Cluster {
    server: test_data::pg::Cluster,
    /// `postgres://postgres@127.0.0.1:<port>/postgres`
    pub(crate) url: String,
}

impl Cluster {
    /// Starts a cluster; panics naming why it could not.
    pub(crate) fn start() -> Cluster {
        let server = test_data::pg::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
        let url = server.url("postgres");
        Cluster { server, url }
    }

    /// `pg_ctl restart -m fast`: every connection is closed, then the server accepts new ones
    /// on the same port (returns when it does).
    pub(crate) fn restart(&self) {
        self.server.restart().unwrap_or_else(|e| panic!("{e}"));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.server.stop();
    }
}
