//! compaction-core's [`SessionStore`] port for both stores, on tokio's blocking pool so that
//! SQLite never runs on an async runtime thread. Each port call is the store's synchronous
//! call of the same name ([`SqliteStore::get_session`] for `load`, `append_event` for
//! `append`) moved to the pool.

use std::path::Path;

use async_trait::async_trait;
use compaction_core::{
    Event, GateSnapshot, Revision, Session, SessionKey, SessionStore, StoreError,
};

use crate::adk::AdkStore;
use crate::error::SessionStoreError;
use crate::store::SqliteStore;

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

impl SqliteStore {
    /// Runs `call` with a clone of the store on tokio's blocking pool and awaits it. Use it for
    /// the synchronous calls ([`SqliteStore::load_context`], …) from async code.
    pub async fn spawn_blocking<T, F>(&self, call: F) -> Result<T, SessionStoreError>
    where
        T: Send + 'static,
        F: FnOnce(&SqliteStore) -> Result<T, SessionStoreError> + Send + 'static,
    {
        on_blocking_pool(self, self.path(), call).await
    }
}

/// Implements the port for a store whose synchronous calls are named as the port's are.
macro_rules! blocking_port {
    ($store:ty) => {
        #[async_trait]
        impl SessionStore for $store {
            async fn load(&self, key: &SessionKey) -> Result<Session, StoreError> {
                let key = key.clone();
                Ok(on_blocking_pool(self, self.path(), move |s| s.get_session(&key)).await?)
            }

            async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
                let key = key.clone();
                Ok(on_blocking_pool(self, self.path(), move |s| s.load_live_tail(&key)).await?)
            }

            async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
                let key = key.clone();
                Ok(on_blocking_pool(self, self.path(), move |s| s.gate_snapshot(&key)).await?)
            }

            async fn append(
                &self,
                key: &SessionKey,
                expected: Revision,
                event: Event,
            ) -> Result<Revision, StoreError> {
                let key = key.clone();
                Ok(on_blocking_pool(self, self.path(), move |s| {
                    s.append_event(&key, expected, &event)
                })
                .await?)
            }
        }
    };
}

blocking_port!(SqliteStore);
blocking_port!(AdkStore);
