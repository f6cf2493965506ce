//! [`AdkPostgresStore`]'s reads of the live tail: one outline read of the session and one
//! batched read of the rows it needs whole, at most once per revision of the session.
//!
//! The answer is kept per revision ([`crate::tail_memo`]): the gate snapshot, the live tail and
//! the scope warning of one evaluation read the session once.

use std::collections::HashMap;

use compaction_core::{
    Event, GateSnapshot, Revision, ScopedUserMessages, Session, SessionKey, gate_input,
    scoped_user_messages,
};
use deadpool_postgres::Transaction;

use crate::error::SessionStoreError;
use crate::postgres::adk::{AdkPostgresStore, EventRow, Operation};
use crate::tail_memo::Tail;

impl AdkPostgresStore {
    /// The rolling tail ([`compaction_core::rolling_tail_positions`]), the coordinator prompt
    /// tokens of the whole history and the user messages filed inside a scope, in one read
    /// transaction: the session's revision and state, then (unless this revision was read
    /// last) every row as an outline and the rows of the tail and the few scoped-user
    /// candidates whole, in one batched statement. Mirrors the SQLite `AdkStore`.
    async fn read_live_tail(
        &self,
        key: &SessionKey,
    ) -> Result<(Session, Option<u64>, ScopedUserMessages), SessionStoreError> {
        self.read(key, async |tx, revision, state| {
            Ok(self.tail_at(tx, key, revision).await?.into_session(state))
        })
        .await
    }

    /// The kept answer at `revision`, or a new read of it (then kept).
    async fn tail_at(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        revision: Revision,
    ) -> Result<Tail, SessionStoreError> {
        if let Some(tail) = self.tail.get(key, revision) {
            return Ok(tail);
        }
        let tail = self.read_tail(tx, key, revision).await?;
        self.tail.put(tail.clone());
        Ok(tail)
    }

    /// One outline read of the session and one batched read of the rows needed whole.
    async fn read_tail(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        revision: Revision,
    ) -> Result<Tail, SessionStoreError> {
        let op = || format!("reading the live tail of session {key}");
        let op: Operation<'_> = &op;
        let (outlines, rows, resume) = self.outline(tx, key, op).await?;
        let tail = outlines.rolling_tail();
        let candidates = outlines.scoped_candidates();
        let ids: Vec<String> = tail
            .iter()
            .chain(&candidates)
            .map(|&i| outlines.events[i].id.clone())
            .collect();
        let whole = self.rows_by_id(tx, key, &ids, op).await?;
        // A row deleted since the outline read cannot be: the transaction is repeatable-read.
        let events_at = |indexes: Vec<usize>| -> Result<Vec<Event>, SessionStoreError> {
            indexes
                .into_iter()
                .map(|i| {
                    let row = whole
                        .get(&outlines.events[i].id)
                        .cloned()
                        .ok_or_else(|| self.db.not_found(key))?;
                    self.parse_event(key, outlines.positions[i], row)
                })
                .collect()
        };
        let events = events_at(tail)?;
        let scoped = outlines.scoped(scoped_user_messages(&events_at(candidates)?));
        if let Some(resume) = resume
            && let Some(checkpoint) = outlines.checkpoint(rows, &scoped, resume)
        {
            self.keep_checkpoint(key, checkpoint);
        }
        Ok(Tail {
            key: key.clone(),
            revision,
            events,
            prompt_tokens: outlines.prompt_tokens(),
            scoped,
        })
    }

    /// The session's rows with these ids, whole, in one statement, by id.
    async fn rows_by_id(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        ids: &[String],
        op: Operation<'_>,
    ) -> Result<HashMap<String, EventRow>, SessionStoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let stmt = tx
            .prepare_cached(&format!(
                "SELECT id::text, invocation_id::text, {}, event_data::text FROM events \
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 \
                 AND id = ANY($4::text[])",
                crate::postgres::adk::time_text!("timestamp")
            ))
            .await
            .map_err(self.db.pg(op))?;
        let rows = tx
            .query(&stmt, &[&key.app_name, &key.user_id, &key.session_id, &ids])
            .await
            .map_err(self.db.pg(op))?;
        rows.iter()
            .map(|r| {
                let row = EventRow {
                    id: self.db.column(r, 0, op)?,
                    invocation_id: self.db.column(r, 1, op)?,
                    column_timestamp: self.db.column(r, 2, op)?,
                    data: self.db.column(r, 3, op)?,
                };
                Ok((row.id.clone(), row))
            })
            .collect()
    }

    /// Loads the session's state, revision and live tail (see
    /// [`compaction_core::SessionStore::load_live_tail`]) in one read transaction.
    pub async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        Ok(self.read_live_tail(key).await?.0)
    }

    /// The user messages ADK's Runner filed inside a pipeline scope no `finish_task` closed:
    /// known without a read after this store's own append (`crate::tail_memo`).
    pub async fn scoped_user_messages(
        &self,
        key: &SessionKey,
    ) -> Result<ScopedUserMessages, SessionStoreError> {
        self.read(key, async |tx, revision, _state| {
            match self.tail.scoped(key, revision) {
                Some(scoped) => Ok(scoped),
                None => Ok(self.tail_at(tx, key, revision).await?.scoped),
            }
        })
        .await
    }

    /// The gate's figures and their revision, from one read of the live tail (as the SQLite
    /// `AdkStore` computes them).
    pub async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, SessionStoreError> {
        let (tail, prompt_tokens, _) = self.read_live_tail(key).await?;
        let mut input = gate_input(&tail.events);
        input.coordinator_prompt_tokens = prompt_tokens;
        Ok(GateSnapshot::new(input, tail.revision))
    }
}
