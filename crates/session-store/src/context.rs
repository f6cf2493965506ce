//! `load_context`: the next prompt's context from the live compaction and the events around
//! its range, found through indexes, without reading the rest of the history.
//!
//! The result equals `compaction_core::assemble_context` of the whole history:
//! - the live compaction comes from the session row (`live_seq`), kept current on append;
//! - the verbatim events are the coordinator-view, non-compaction events whose timestamp lies
//!   outside the live range — before its start (normally none: rolling consolidation starts at
//!   the first turn) or after its end — read with two range scans of the partial index
//!   `events_view_ts` and merged in append order;
//! - the summary goes before the first of them (in append order) that is later than its end,
//!   or last when none is.
//!
//! Rewinds are honoured through the `in_view` column: an event dropped by a rewind (and every
//! scoped event) has `in_view = 0`, and appending a rewind recomputes the column for the whole
//! session (see [`crate::append`]). Without a live compaction the context is the whole view,
//! which is what the coordinator sees anyway.

use compaction_core::{AssembledContext, ContextEntry, Event, LiveSummary, SessionKey};
use rusqlite::{OptionalExtension, Transaction};

use crate::error::SessionStoreError;
use crate::store::{LiveRef, SqliteStore, read_body, session_row};

/// Rows `(seq, event_id, body)`.
type Rows = Vec<(i64, String, String)>;

impl SqliteStore {
    /// The context the coordinator's next prompt is assembled from (one read transaction).
    pub fn load_context(&self, key: &SessionKey) -> Result<AssembledContext, SessionStoreError> {
        let op = || format!("loading the context of session {key}");
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(self.sqlite_error(op))?;
        let row = session_row(&tx, key)
            .map_err(self.sqlite_error(op))?
            .ok_or_else(|| self.not_found(key))?;
        let context = match row.live {
            None => {
                let rows = query_rows(
                    &tx,
                    "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
                     AND in_view = 1 AND is_compaction = 0 ORDER BY seq",
                    (row.pk,),
                )
                .map_err(self.sqlite_error(op))?;
                let entries = rows
                    .iter()
                    .map(|(seq, id, body)| {
                        Ok(ContextEntry::Event(Box::new(
                            self.parse_event(key, *seq, id, body)?,
                        )))
                    })
                    .collect::<Result<_, SessionStoreError>>()?;
                AssembledContext { entries }
            }
            Some(live) => self.around_live(&tx, key, row.pk, live)?,
        };
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(context)
    }

    fn around_live(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        live: LiveRef,
    ) -> Result<AssembledContext, SessionStoreError> {
        let op = || format!("loading the context of session {key}");
        let (seq, id, body) = tx
            .prepare_cached(
                "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 AND seq = ?2",
            )
            .and_then(|mut stmt| stmt.query_row((pk, live.seq), read_body).optional())
            .map_err(self.sqlite_error(op))?
            .ok_or_else(|| self.live_row_missing(key, live.seq, "no row"))?;
        let event = self.parse_event(key, seq, &id, &body)?;
        let Some(compaction) = event.compaction().cloned() else {
            return Err(self.live_row_missing(key, seq, "the event carries no compaction"));
        };
        let summary = LiveSummary {
            event_id: event.id,
            compaction,
        };
        let mut rows = query_rows(
            tx,
            "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
             AND in_view = 1 AND is_compaction = 0 AND ts < ?2",
            (pk, live.start),
        )
        .map_err(self.sqlite_error(op))?;
        rows.extend(
            query_rows(
                tx,
                "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
                 AND in_view = 1 AND is_compaction = 0 AND ts > ?2",
                (pk, live.end),
            )
            .map_err(self.sqlite_error(op))?,
        );
        rows.sort_unstable_by_key(|(seq, _, _)| *seq);
        let end = summary.compaction.end_timestamp;
        let mut summary = Some(summary);
        let mut entries = Vec::with_capacity(rows.len() + 1);
        for (seq, id, body) in &rows {
            let event: Event = self.parse_event(key, *seq, id, body)?;
            if event.timestamp > end
                && let Some(s) = summary.take()
            {
                entries.push(ContextEntry::Summary(s));
            }
            entries.push(ContextEntry::Event(Box::new(event)));
        }
        if let Some(s) = summary {
            entries.push(ContextEntry::Summary(s));
        }
        Ok(AssembledContext { entries })
    }

    /// The session row names a live compaction the events table does not hold as one.
    fn live_row_missing(&self, key: &SessionKey, seq: i64, why: &str) -> SessionStoreError {
        SessionStoreError::CorruptEvent {
            path: self.path().to_path_buf(),
            key: Box::new(key.clone()),
            revision: seq.unsigned_abs(),
            event_id: String::new(),
            source: <serde_json::Error as serde::de::Error>::custom(format!(
                "the session's live compaction row is unusable: {why}"
            )),
        }
    }
}

fn query_rows(
    tx: &Transaction<'_>,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Rows> {
    let mut stmt = tx.prepare_cached(sql)?;
    let rows = stmt.query_map(params, read_body)?;
    rows.collect()
}
