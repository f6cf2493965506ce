//! The SQLite store as the replay's store.

use compaction_core::{AssembledContext, Revision, SessionKey};
use serde_json::{Map, Value};
use session_store::SqliteStore;

use crate::replay::ReplayStore;

#[async_trait::async_trait]
impl ReplayStore for SqliteStore {
    async fn create(
        &self,
        key: &SessionKey,
        state: Map<String, Value>,
    ) -> Result<Revision, String> {
        self.create_session(key, state)
            .map(|_| Revision(0))
            .map_err(|e| e.to_string())
    }

    async fn context(&self, key: &SessionKey) -> Result<AssembledContext, String> {
        self.load_context(key).map_err(|e| e.to_string())
    }
}
