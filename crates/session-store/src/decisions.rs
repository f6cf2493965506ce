//! Shadow-mode decisions (compaction-core's `DecisionRecord`), kept in their own table beside
//! the session: recording one never touches the session's events, revision or header.

use compaction_core::{DecisionRecord, SessionKey};
use rusqlite::TransactionBehavior;

use crate::context::query_rows;
use crate::error::SessionStoreError;
use crate::store::{SqliteStore, session_row};

impl SqliteStore {
    /// Records a shadow-mode decision for the session (one immediate transaction).
    pub fn record_decision(
        &self,
        key: &SessionKey,
        record: &DecisionRecord,
    ) -> Result<(), SessionStoreError> {
        let body = serde_json::to_string(record)
            .map_err(|e| self.serialize_error(key, "a shadow decision", e))?;
        let op = || format!("recording a shadow decision for session {key}");
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite_error(op))?;
        let row = session_row(&tx, key)
            .map_err(self.sqlite_error(op))?
            .ok_or_else(|| self.not_found(key))?;
        tx.prepare_cached(
            "INSERT INTO decisions (session_pk, seq, body) VALUES (?1, \
             (SELECT coalesce(max(seq), 0) + 1 FROM decisions WHERE session_pk = ?1), ?2)",
        )
        .and_then(|mut stmt| stmt.execute((row.pk, &body)))
        .map_err(self.sqlite_error(op))?;
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(())
    }

    /// The session's shadow-mode decisions, oldest first.
    pub fn decisions(&self, key: &SessionKey) -> Result<Vec<DecisionRecord>, SessionStoreError> {
        self.read_session(key, "reading the shadow decisions", |tx, row, op| {
            let rows = query_rows(
                tx,
                "SELECT seq, '', body FROM decisions WHERE session_pk = ?1 ORDER BY seq",
                (row.pk,),
            )
            .map_err(self.sqlite_error(op))?;
            rows.iter()
                .map(|(seq, _, body)| {
                    serde_json::from_str(body).map_err(|source| SessionStoreError::CorruptEvent {
                        path: self.path().to_path_buf(),
                        key: Box::new(key.clone()),
                        revision: seq.unsigned_abs(),
                        event_id: format!("shadow decision {seq}"),
                        source,
                    })
                })
                .collect()
        })
    }
}
