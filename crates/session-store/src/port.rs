//! The async stores: compaction-core's [`SessionStore`] port for both databases, each call
//! the synchronous store's call of the same purpose (module [`crate::blocking`]) moved to
//! tokio's blocking pool, so that SQLite never runs on an async runtime thread.
//!
//! The async types have no inherent method named like a port method, so
//! `store.gate_snapshot(&key).await` means the port's call wherever the port is in scope.

use std::path::Path;

use async_trait::async_trait;
use compaction_core::{
    AssembledContext, CompactionEntry, DecisionRecord, Event, GateSnapshot, RecallHit, RecallQuery,
    RecalledEvent, Revision, Session, SessionKey, SessionStore, StoreError, TailWindow, Timestamp,
};
use serde_json::{Map, Value};

use crate::adk::AdkFlavor;
use crate::adk::store::AdkStore as BlockingAdk;
use crate::error::SessionStoreError;
use crate::options::OpenOptions;
use crate::store::SqliteStore as BlockingSqlite;

/// Runs `call` with a clone of `store` on tokio's blocking pool and awaits it; a call that
/// panicked or was cancelled is a [`SessionStoreError::Task`] naming `path`.
async fn on_blocking_pool<S, T, F>(store: &S, path: &Path, call: F) -> Result<T, SessionStoreError>
where
    S: Clone + Send + 'static,
    T: Send + 'static,
    F: FnOnce(&S) -> Result<T, SessionStoreError> + Send + 'static,
{
    let owned = store.clone();
    tokio::task::spawn_blocking(move || call(&owned))
        .await
        .map_err(|e| SessionStoreError::Task {
            path: path.to_path_buf(),
            operation: "running a store call".to_owned(),
            message: e.to_string(),
        })?
}

/// The native SQLite store, async: implements [`SessionStore`] (create, load, context,
/// compaction history, gate snapshot, live tail, append) with every call on tokio's blocking
/// pool. Cheap to clone (one shared connection). [`SqliteStore::blocking`] gives the
/// synchronous store for code that is not on a runtime.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    blocking: BlockingSqlite,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` (see [`crate::blocking::SqliteStore::open`]).
    /// Opening reads and may migrate the file: call it at start-up, or on the blocking pool.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SessionStoreError> {
        Ok(BlockingSqlite::open(path)?.into())
    }

    /// Opens the store at `path` with `options`.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        Ok(BlockingSqlite::open_with(path, options)?.into())
    }

    /// Opens an existing store for reading only (see
    /// [`crate::blocking::SqliteStore::open_read_only`]): never migrates, never writes.
    pub fn open_read_only(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        Ok(BlockingSqlite::open_read_only(path, options)?.into())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.blocking.path()
    }

    /// The synchronous store behind this one (same connection).
    pub fn blocking(&self) -> &BlockingSqlite {
        &self.blocking
    }

    /// Runs `call` with the synchronous store on tokio's blocking pool and awaits it: for the
    /// store's own calls that the port does not cover (`header`, `integrity_check`, …).
    pub async fn spawn_blocking<T, F>(&self, call: F) -> Result<T, SessionStoreError>
    where
        T: Send + 'static,
        F: FnOnce(&BlockingSqlite) -> Result<T, SessionStoreError> + Send + 'static,
    {
        on_blocking_pool(&self.blocking, self.path(), call).await
    }
}

impl From<BlockingSqlite> for SqliteStore {
    fn from(blocking: BlockingSqlite) -> Self {
        SqliteStore { blocking }
    }
}

/// A Google ADK sessions database, async: implements [`SessionStore`] with every call on
/// tokio's blocking pool. [`AdkStore::blocking`] gives the synchronous store.
#[derive(Debug, Clone)]
pub struct AdkStore {
    blocking: BlockingAdk,
}

impl AdkStore {
    /// Opens an ADK database in place (see [`crate::blocking::AdkStore::open`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SessionStoreError> {
        Ok(BlockingAdk::open(path)?.into())
    }

    /// Opens an ADK database with `options`.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        Ok(BlockingAdk::open_with(path, options)?.into())
    }

    /// Opens an ADK database for reading only (see
    /// [`crate::blocking::AdkStore::open_read_only`]).
    pub fn open_read_only(
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> Result<Self, SessionStoreError> {
        Ok(BlockingAdk::open_read_only(path, options)?.into())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.blocking.path()
    }

    /// Which of ADK's layouts the file has.
    pub fn flavor(&self) -> AdkFlavor {
        self.blocking.flavor()
    }

    /// The synchronous store behind this one.
    pub fn blocking(&self) -> &BlockingAdk {
        &self.blocking
    }

    /// Runs `call` with the synchronous store on tokio's blocking pool and awaits it.
    pub async fn spawn_blocking<T, F>(&self, call: F) -> Result<T, SessionStoreError>
    where
        T: Send + 'static,
        F: FnOnce(&BlockingAdk) -> Result<T, SessionStoreError> + Send + 'static,
    {
        on_blocking_pool(&self.blocking, self.path(), call).await
    }
}

impl From<BlockingAdk> for AdkStore {
    fn from(blocking: BlockingAdk) -> Self {
        AdkStore { blocking }
    }
}

/// Implements the port for `$store`: the calls both stores answer the same way (each by its
/// synchronous call on the pool), plus `$extra` items.
macro_rules! port_impl {
    ($store:ty { $($extra:item)* }) => {
        #[async_trait]
        impl SessionStore for $store {
        async fn create_session(
            &self,
            key: &SessionKey,
            state: Map<String, Value>,
        ) -> Result<Session, StoreError> {
            let key = key.clone();
            Ok(self
                .spawn_blocking(move |s| s.create_session(&key, state))
                .await?)
        }

        async fn load(&self, key: &SessionKey) -> Result<Session, StoreError> {
            let key = key.clone();
            Ok(self.spawn_blocking(move |s| s.get_session(&key)).await?)
        }

        async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
            let key = key.clone();
            Ok(self.spawn_blocking(move |s| s.load_live_tail(&key)).await?)
        }

        async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
            let key = key.clone();
            Ok(self.spawn_blocking(move |s| s.gate_snapshot(&key)).await?)
        }

        async fn append(
            &self,
            key: &SessionKey,
            expected: Revision,
            event: Event,
        ) -> Result<Revision, StoreError> {
            let key = key.clone();
            Ok(self
                .spawn_blocking(move |s| s.append_event(&key, expected, &event))
                .await?)
        }

        $($extra)*
        }
    };
}

port_impl!(SqliteStore {

    async fn load_context(&self, key: &SessionKey) -> Result<AssembledContext, StoreError> {
        let key = key.clone();
        Ok(self.spawn_blocking(move |s| s.load_context(&key)).await?)
    }

    async fn compaction_history(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<CompactionEntry>, StoreError> {
        let key = key.clone();
        Ok(self
            .spawn_blocking(move |s| s.compaction_history(&key))
            .await?)
    }

    async fn load_live_tail_window(
        &self,
        key: &SessionKey,
        max_events: usize,
    ) -> Result<TailWindow, StoreError> {
        let key = key.clone();
        let (session, whole) = self
            .spawn_blocking(move |s| s.load_live_tail_window(&key, max_events))
            .await?;
        Ok(TailWindow::new(session, whole))
    }

    async fn record_decision(
        &self,
        key: &SessionKey,
        record: DecisionRecord,
    ) -> Result<(), StoreError> {
        let key = key.clone();
        Ok(self
            .spawn_blocking(move |s| s.record_decision(&key, &record))
            .await?)
    }

    async fn decisions(&self, key: &SessionKey) -> Result<Vec<DecisionRecord>, StoreError> {
        let key = key.clone();
        Ok(self.spawn_blocking(move |s| s.decisions(&key)).await?)
    }

    async fn search(
        &self,
        key: &SessionKey,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<RecallHit>, StoreError> {
        let (key, query) = (key.clone(), query.clone());
        Ok(self.spawn_blocking(move |s| s.search(&key, &query, limit)).await?)
    }

    async fn expand(
        &self,
        key: &SessionKey,
        compaction_id: &str,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        let (key, id) = (key.clone(), compaction_id.to_owned());
        Ok(self.spawn_blocking(move |s| s.expand(&key, &id)).await?)
    }

    async fn expand_turns(
        &self,
        key: &SessionKey,
        first: usize,
        last: usize,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        let key = key.clone();
        Ok(self
            .spawn_blocking(move |s| s.expand_turns(&key, first, last))
            .await?)
    }

    async fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<Option<usize>, StoreError> {
        let key = key.clone();
        Ok(self.spawn_blocking(move |s| s.turns_before(&key, ts)).await?)
    }

    async fn open_turns(&self, before: Timestamp) -> Result<Option<Vec<SessionKey>>, StoreError> {
        Ok(Some(self.spawn_blocking(move |s| s.open_turns(before)).await?))
    }
});

// ADK's file may not be given indexes of ours, so its context, compaction history and recall
// (search, expand) come from the port's defaults (the whole session, read once and scanned).
port_impl!(AdkStore {});
