//! compaction-core's [`SessionStore`] port, on tokio's blocking pool so that SQLite never runs
//! on an async runtime thread.

use async_trait::async_trait;
use compaction_core::{
    Event, GateSnapshot, Revision, Session, SessionKey, SessionStore, StoreError,
};

use crate::error::SessionStoreError;
use crate::store::SqliteStore;

impl SqliteStore {
    /// Runs `call` with a clone of the store on tokio's blocking pool and awaits it. Use it for
    /// the synchronous calls ([`SqliteStore::load_context`], …) from async code.
    pub async fn spawn_blocking<T, F>(&self, call: F) -> Result<T, SessionStoreError>
    where
        T: Send + 'static,
        F: FnOnce(&SqliteStore) -> Result<T, SessionStoreError> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || call(&store))
            .await
            .map_err(|e| SessionStoreError::Task {
                path: self.path().to_path_buf(),
                operation: "running a store call".to_owned(),
                message: e.to_string(),
            })?
    }
}

#[async_trait]
impl SessionStore for SqliteStore {
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
        let header = self.spawn_blocking(move |s| s.header(&key)).await?;
        Ok(GateSnapshot {
            input: header.gate,
            revision: header.revision,
        })
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
}
