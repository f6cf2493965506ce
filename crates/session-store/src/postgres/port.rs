//! compaction-core's [`SessionStore`] port on [`PostgresStore`]: every call is the store's own
//! async call of the same purpose, its [`SessionStoreError`](crate::SessionStoreError) mapped
//! onto the port's [`StoreError`].

use async_trait::async_trait;
use compaction_core::{
    AssembledContext, CompactionEntry, DecisionRecord, Event, GateSnapshot, RecallHit, RecallQuery,
    RecalledEvent, Revision, Session, SessionKey, SessionStore, StoreError, Timestamp,
};
use serde_json::{Map, Value};

use crate::postgres::PostgresStore;

#[async_trait]
impl SessionStore for PostgresStore {
    async fn create_session(
        &self,
        key: &SessionKey,
        state: Map<String, Value>,
    ) -> Result<Session, StoreError> {
        Ok(self.create(key, state).await?)
    }

    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError> {
        Ok(self.load_session(key).await?)
    }

    async fn load_context(&self, key: &SessionKey) -> Result<AssembledContext, StoreError> {
        Ok(self.context(key).await?)
    }

    async fn compaction_history(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<CompactionEntry>, StoreError> {
        Ok(self.compactions(key).await?)
    }

    async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
        let header = self.header(key).await?;
        Ok(GateSnapshot::new(header.gate, header.revision))
    }

    async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
        Ok(self.live_tail(key).await?)
    }

    async fn record_decision(
        &self,
        key: &SessionKey,
        record: DecisionRecord,
    ) -> Result<(), StoreError> {
        Ok(self.record(key, &record).await?)
    }

    async fn decisions(&self, key: &SessionKey) -> Result<Vec<DecisionRecord>, StoreError> {
        Ok(self.recorded(key).await?)
    }

    async fn search(
        &self,
        key: &SessionKey,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<RecallHit>, StoreError> {
        Ok(PostgresStore::search(self, key, query, limit).await?)
    }

    async fn expand(
        &self,
        key: &SessionKey,
        compaction_id: &str,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        Ok(PostgresStore::expand(self, key, compaction_id).await?)
    }

    async fn expand_turns(
        &self,
        key: &SessionKey,
        first: usize,
        last: usize,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        Ok(PostgresStore::expand_turns(self, key, first, last).await?)
    }

    async fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<Option<usize>, StoreError> {
        Ok(Some(PostgresStore::turns_before(self, key, ts).await?))
    }

    async fn open_turns(&self, before: Timestamp) -> Result<Option<Vec<SessionKey>>, StoreError> {
        Ok(Some(self.open_turns(before).await?))
    }

    async fn append(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: Event,
    ) -> Result<Revision, StoreError> {
        Ok(self.append_event(key, expected, &event).await?)
    }
}
