//! How a native store is opened: [`OpenOptions`] (busy timeout, [`Durability`], the integrity
//! check before the first write). Shared by the native and ADK SQLite stores.

use std::time::Duration;

use crate::integrity::IntegrityCheck;

/// How hard each commit is pushed to disk. The journal is always WAL.
///
/// Both settings keep every acknowledged append across a process crash (SIGKILL, panic, OOM
/// kill): a commit is in the WAL file before `append_event` returns, and a torn transaction at
/// the WAL's end is ignored on recovery. They differ only on an OS crash or power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous = NORMAL` (the default): the WAL is fsynced at checkpoints, not at every
    /// commit. An OS crash or power loss may roll back the appends made since the last
    /// checkpoint; the file is never corrupted. About ten times faster than [`Durability::Full`]
    /// on this project's reference machine (see docs/BENCHMARKS.md).
    #[default]
    Normal,
    /// `synchronous = FULL`: every commit fsyncs the WAL before the append is acknowledged, so
    /// an acknowledged event also survives an OS crash or power loss (as far as the disk honours
    /// fsync). Each append then costs at least one fsync.
    Full,
}

impl Durability {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }
}

/// How to open a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenOptions {
    /// How long a call waits for another connection's lock before failing with
    /// [`SessionStoreError::Locked`](crate::SessionStoreError::Locked). Default 5 s.
    pub busy_timeout: Duration,
    /// The commit durability. Default [`Durability::Normal`].
    pub durability: Durability,
    /// The check run on open, before the first write. Default [`IntegrityCheck::Unchanged`]
    /// with a day.
    pub integrity: IntegrityCheck,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            busy_timeout: Duration::from_secs(5),
            durability: Durability::Normal,
            integrity: IntegrityCheck::default(),
        }
    }
}

impl OpenOptions {
    /// Sets the busy timeout (builder style).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Sets the check run on open (builder style).
    pub fn integrity(mut self, check: IntegrityCheck) -> Self {
        self.integrity = check;
        self
    }

    /// Sets the durability (builder style).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}
