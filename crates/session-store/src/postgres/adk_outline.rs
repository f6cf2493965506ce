//! [`AdkPostgresStore`]'s outline read, incremental in ADK's own order (issue 29 item 2).
//!
//! ADK's `events` table on PostgreSQL has no row number, but it has ADK's index
//! `(app_name, user_id, session_id, timestamp DESC, id DESC)`: the rows after the last known one
//! in ADK's order are one index range, `(timestamp, id) > ($last_timestamp, $last_id)`. A row
//! another writer inserted with a timestamp *before* the last known one would not be in that
//! range, so the same statement also counts the session's rows and checks that the last known
//! row is still there: a read continues its [`Checkpoint`] only when the count is the known
//! rows plus the new ones (ADK never deletes a single event), no new row rewinds, and the
//! checkpoint's whole read is younger than a day; otherwise it outlines the whole session. The
//! count is the one part that still grows with the session (an aggregate over the session's
//! rows, without their JSON: a few milliseconds at 10,000 events, against the whole outline's
//! ~60); see docs/BENCHMARKS.md. Nothing is created in ADK's schema.

use compaction_core::SessionKey;
use deadpool_postgres::Transaction;
use serde::{Deserialize, Serialize};

use crate::adk_outline::{Checkpoint, KEPT_IN_MEMORY, Outlines, fresh};
use crate::error::SessionStoreError;
use crate::postgres::adk::{AdkPostgresStore, EventRow, Operation, column_seconds};

/// Where a PostgreSQL read resumes: the last known row in ADK's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Resume {
    /// Its `timestamp` column as `YYYY-MM-DD HH:MM:SS.ffffff` text.
    last_timestamp: String,
    last_id: String,
}

/// The checkpoint of one session in one database.
pub(crate) type PostgresCheckpoint = Checkpoint<Resume>;

/// The checkpoints a store (and its clones) keeps in memory.
pub(crate) type Kept =
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<SessionKey, PostgresCheckpoint>>>;

/// The outlined key-value text of `event_data` (the server drops `content`).
const OUTLINE_DATA: &str = "CASE WHEN jsonb_typeof(event_data) = 'object' \
     THEN (event_data - 'content')::text ELSE event_data::text END";

/// A read's outlines, how many rows it knows in all, and where the next one resumes.
pub(crate) type Read = (Outlines, usize, Option<Resume>);

impl AdkPostgresStore {
    /// Keeps the sessions' outline checkpoints in `state_dir` between processes (`None`:
    /// only in memory, so each new store outlines each session whole once). The default is the
    /// platform's cache directory; see ARCHITECTURE.md, "ADK files".
    pub fn with_state_dir(mut self, state_dir: Option<std::path::PathBuf>) -> Self {
        self.state_dir = state_dir;
        self
    }

    /// The session's outlines: continuing its checkpoint when it still fits, else whole.
    pub(crate) async fn outline(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        op: Operation<'_>,
    ) -> Result<Read, SessionStoreError> {
        let now = crate::row::now_seconds();
        if let Some(checkpoint) = self.checkpoint(key).filter(|c| fresh(c.whole_read_at, now))
            && let Some(read) = self.outline_new_rows(tx, key, checkpoint, op).await?
        {
            return Ok(read);
        }
        let rows = self.event_rows(tx, key, true, op).await?;
        let mut outlines = Outlines::whole(now);
        let known = rows.len();
        let resume = rows.last().map(|last| Resume {
            last_timestamp: last.column_timestamp.clone(),
            last_id: last.id.clone(),
        });
        for (position, row) in rows.into_iter().enumerate() {
            outlines.push(position, self.outline_row(key, position, row)?);
        }
        Ok((outlines, known, resume))
    }

    /// The outline of `row` at `position`.
    fn outline_row(
        &self,
        key: &SessionKey,
        position: usize,
        row: EventRow,
    ) -> Result<compaction_core::Event, SessionStoreError> {
        let id = row.id.clone();
        let column = row.column_timestamp;
        crate::adk_shape::outline_from_row(row.id, row.invocation_id, row.data.as_deref(), || {
            column_seconds(&column)
        })
        .map_err(|problem| self.row_problem(key, position, &id, problem))
    }

    /// The outlines continuing `checkpoint` with the rows after it, or `None` when the session
    /// is not the known rows plus those (see the module's documentation) or a new row rewinds.
    async fn outline_new_rows(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        checkpoint: PostgresCheckpoint,
        op: Operation<'_>,
    ) -> Result<Option<Read>, SessionStoreError> {
        let sql = format!(
            "WITH whole AS (SELECT count(*) AS n, \
               coalesce(bool_or(id = $5 AND timestamp = $4::text::timestamp), false) AS known \
               FROM events WHERE app_name = $1 AND user_id = $2 AND session_id = $3) \
             SELECT whole.n, whole.known, e.id, e.invocation_id, e.ts, e.data FROM whole \
             LEFT JOIN LATERAL (SELECT id::text AS id, invocation_id::text AS invocation_id, \
               {} AS ts, {OUTLINE_DATA} AS data FROM events \
               WHERE app_name = $1 AND user_id = $2 AND session_id = $3 \
               AND (timestamp, id) > ($4::text::timestamp, $5) ORDER BY timestamp ASC, id ASC) e ON true",
            crate::postgres::adk::time_text!("timestamp")
        );
        let stmt = tx.prepare_cached(&sql).await.map_err(self.db.pg(op))?;
        let resume = &checkpoint.resume;
        let rows = tx
            .query(
                &stmt,
                &[
                    &key.app_name,
                    &key.user_id,
                    &key.session_id,
                    &resume.last_timestamp,
                    &resume.last_id,
                ],
            )
            .await
            .map_err(self.db.pg(op))?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let (total, known): (i64, bool) = (first.get(0), first.get(1));
        let new: Vec<EventRow> = rows
            .iter()
            .filter_map(|r| {
                Some(EventRow {
                    id: r.get::<_, Option<String>>(2)?,
                    invocation_id: r.get(3),
                    column_timestamp: r.get(4),
                    data: r.get(5),
                })
            })
            .collect();
        let rows_now = checkpoint.rows + new.len();
        if !known || usize::try_from(total).ok() != Some(rows_now) {
            return Ok(None);
        }
        let mut outlines = Outlines::continuing(&checkpoint);
        let mut resume = checkpoint.resume;
        for (i, row) in new.into_iter().enumerate() {
            let position = checkpoint.rows + i;
            resume = Resume {
                last_timestamp: row.column_timestamp.clone(),
                last_id: row.id.clone(),
            };
            outlines.push(position, self.outline_row(key, position, row)?);
        }
        Ok((!outlines.new_rows_rewind()).then_some((outlines, rows_now, Some(resume))))
    }

    /// The state-directory entry of `key`'s checkpoint, and the key it is stored under.
    fn checkpoint_entry(&self, key: &SessionKey) -> Option<(std::path::PathBuf, String)> {
        let dir = self.state_dir.as_deref()?;
        let stored = format!(
            "{}\n{}\n{}\n{}",
            self.database(),
            key.app_name,
            key.user_id,
            key.session_id
        );
        Some((
            crate::state_dir::entry(dir, "adk-postgres-outline", &stored),
            stored,
        ))
    }

    /// The checkpoint of `key`: kept in memory, else in the state directory.
    fn checkpoint(&self, key: &SessionKey) -> Option<PostgresCheckpoint> {
        if let Some(kept) = self.kept().get(key) {
            return Some(kept.clone());
        }
        let (entry, stored) = self.checkpoint_entry(key)?;
        crate::state_dir::read(&entry, &stored)
    }

    fn kept(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<SessionKey, PostgresCheckpoint>> {
        self.checkpoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `checkpoint` in memory and in the state directory.
    pub(crate) fn keep_checkpoint(&self, key: &SessionKey, checkpoint: PostgresCheckpoint) {
        if let Some((entry, stored)) = self.checkpoint_entry(key) {
            crate::state_dir::write(&entry, &stored, &checkpoint);
        }
        let mut kept = self.kept();
        if kept.len() >= KEPT_IN_MEMORY && !kept.contains_key(key) {
            kept.clear();
        }
        kept.insert(key.clone(), checkpoint);
    }
}
