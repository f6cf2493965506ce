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

use compaction_core::{
    AssembledContext, CompactionEntry, Event, LiveSummary, Revision, Session, SessionKey,
    assemble_around,
};
use rusqlite::{OptionalExtension, Transaction};

use crate::error::SessionStoreError;
use crate::store::{LiveRef, SessionRow, SqliteStore, read_body, session_row};

/// Rows `(seq, event_id, body)`.
type Rows = Vec<(i64, String, String)>;

/// Names the operation in errors: `loading the context of session app/user/id`.
type Operation<'a> = &'a dyn Fn() -> String;

impl SqliteStore {
    /// Runs `read` in one read transaction on the session row of `key`; errors name the
    /// operation as `{what} of session {key}`.
    pub(crate) fn read_session<T>(
        &self,
        key: &SessionKey,
        what: &str,
        read: impl FnOnce(&Transaction<'_>, SessionRow, Operation<'_>) -> Result<T, SessionStoreError>,
    ) -> Result<T, SessionStoreError> {
        let op = || format!("{what} of session {key}");
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(self.sqlite_error(op))?;
        let row = session_row(&tx, key)
            .map_err(self.sqlite_error(op))?
            .ok_or_else(|| self.not_found(key))?;
        let value = read(&tx, row, &op)?;
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(value)
    }

    /// The context the coordinator's next prompt is assembled from (one read transaction).
    pub fn load_context(&self, key: &SessionKey) -> Result<AssembledContext, SessionStoreError> {
        self.read_session(key, "loading the context", |tx, row, op| match row.live {
            None => {
                let rows = query_rows(
                    tx,
                    "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
                     AND in_view = 1 AND is_compaction = 0 ORDER BY seq",
                    (row.pk,),
                )
                .map_err(self.sqlite_error(op))?;
                let events = rows
                    .iter()
                    .map(|(seq, id, body)| self.parse_event(key, *seq, id, body))
                    .collect::<Result<Vec<Event>, SessionStoreError>>()?;
                Ok(assemble_around(None, events))
            }
            Some(live) => self.around_live(tx, key, row.pk, live, op),
        })
    }

    /// The session with only its live tail (`compaction_core::live_tail`): its state and
    /// revision, the live compaction event and the coordinator-view events after the live
    /// range, in append order — one read transaction over the same indexes as
    /// [`SqliteStore::load_context`], never the rest of the history. Without a live compaction
    /// it is the whole coordinator view.
    pub fn load_live_tail(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        self.read_session(key, "loading the live tail", |tx, row, op| {
            self.live_tail_of(tx, key, row, op)
        })
    }

    /// The newest part of the live tail (compaction-core's `SessionStore::load_live_tail_window`):
    /// the state, the revision, the live compaction event and the newest `max_events`
    /// non-compaction events of the view after its range, found by walking the primary key
    /// backwards, so the read costs the window, not the tail. The flag says whether the
    /// window is the whole live tail.
    pub fn load_live_tail_window(
        &self,
        key: &SessionKey,
        max_events: usize,
    ) -> Result<(Session, bool), SessionStoreError> {
        self.read_session(
            key,
            "loading the newest part of the live tail",
            |tx, row, op| {
                let state: String = tx
                    .prepare_cached("SELECT state FROM sessions WHERE pk = ?1")
                    .and_then(|mut stmt| stmt.query_row((row.pk,), |r| r.get(0)))
                    .map_err(self.sqlite_error(op))?;
                let state = self.parse_state(key, &state)?;
                let limit = i64::try_from(max_events.saturating_add(1)).unwrap_or(i64::MAX);
                // `+ts`: walk the primary key from the newest row and stop at the limit, instead
                // of collecting every later row through the timestamp index and sorting it.
                let mut rows = query_rows(
                    tx,
                    "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
                 AND in_view = 1 AND is_compaction = 0 AND +ts > ?2 \
                 ORDER BY seq DESC LIMIT ?3",
                    (row.pk, row.live.map_or(f64::NEG_INFINITY, |l| l.end), limit),
                )
                .map_err(self.sqlite_error(op))?;
                let whole = rows.len() <= max_events;
                rows.truncate(max_events);
                match row.live {
                Some(live) => rows.extend(
                    query_rows(
                        tx,
                        "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 AND seq = ?2",
                        (row.pk, live.seq),
                    )
                    .map_err(self.sqlite_error(op))?,
                ),
                // Without a live summary the tail is the whole view: its compactions too.
                None => rows.extend(
                    query_rows(
                        tx,
                        "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
                         AND in_view = 1 AND is_compaction = 1",
                        (row.pk,),
                    )
                    .map_err(self.sqlite_error(op))?,
                ),
            }
                rows.sort_unstable_by_key(|(seq, _, _)| *seq);
                let events = rows
                    .iter()
                    .map(|(seq, id, body)| self.parse_event(key, *seq, id, body))
                    .collect::<Result<_, _>>()?;
                let session = Session {
                    key: key.clone(),
                    state,
                    events,
                    revision: Revision(row.revision),
                };
                Ok((session, whole))
            },
        )
    }

    fn live_tail_of(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: SessionRow,
        op: Operation<'_>,
    ) -> Result<Session, SessionStoreError> {
        let state: String = tx
            .prepare_cached("SELECT state FROM sessions WHERE pk = ?1")
            .and_then(|mut stmt| stmt.query_row((row.pk,), |r| r.get(0)))
            .map_err(self.sqlite_error(op))?;
        let state = self.parse_state(key, &state)?;
        let rows = match row.live {
            None => query_rows(
                tx,
                "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
                 AND in_view = 1 ORDER BY seq",
                (row.pk,),
            ),
            // Two index searches (a disjunction would make SQLite walk the whole session).
            Some(live) => query_rows(
                tx,
                "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 \
                 AND in_view = 1 AND is_compaction = 0 AND ts > ?2 \
                 UNION ALL \
                 SELECT seq, event_id, body FROM events WHERE session_pk = ?1 AND seq = ?3 \
                 ORDER BY seq",
                (row.pk, live.end, live.seq),
            ),
        }
        .map_err(self.sqlite_error(op))?;
        let events = rows
            .iter()
            .map(|(seq, id, body)| self.parse_event(key, *seq, id, body))
            .collect::<Result<_, _>>()?;
        Ok(Session {
            key: key.clone(),
            state,
            events,
            revision: Revision(row.revision),
        })
    }

    /// The compaction history of the coordinator view (`compaction_core::compaction_history`)
    /// through the `events_view_compactions` index, one event parsed at a time: memory stays
    /// at one summary however long the history. (`+seq` keeps SQLite from walking the primary
    /// key instead of the index.)
    pub fn compaction_history(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<CompactionEntry>, SessionStoreError> {
        self.read_session(key, "loading the compaction history", |tx, row, op| {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT seq, event_id, body, subsumed FROM events WHERE session_pk = ?1 \
                     AND in_view = 1 AND is_compaction = 1 ORDER BY +seq",
                )
                .map_err(self.sqlite_error(op))?;
            let mut rows = stmt.query((row.pk,)).map_err(self.sqlite_error(op))?;
            let mut entries = Vec::new();
            while let Some(r) = rows.next().map_err(self.sqlite_error(op))? {
                let (seq, id, body) = read_body(r).map_err(self.sqlite_error(op))?;
                let subsumed: bool = r.get(3).map_err(self.sqlite_error(op))?;
                let event = self.parse_event(key, seq, &id, &body)?;
                let entry = CompactionEntry::new(&event, subsumed).ok_or_else(|| {
                    self.not_a_compaction(key, seq, "the event carries no compaction")
                })?;
                entries.push(entry);
            }
            Ok(entries)
        })
    }

    fn around_live(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        live: LiveRef,
        op: Operation<'_>,
    ) -> Result<AssembledContext, SessionStoreError> {
        let (seq, id, body) = tx
            .prepare_cached(
                "SELECT seq, event_id, body FROM events WHERE session_pk = ?1 AND seq = ?2",
            )
            .and_then(|mut stmt| stmt.query_row((pk, live.seq), read_body).optional())
            .map_err(self.sqlite_error(op))?
            .ok_or_else(|| {
                self.not_a_compaction(
                    key,
                    live.seq,
                    "the session's live compaction row is missing",
                )
            })?;
        let event = self.parse_event(key, seq, &id, &body)?;
        let Some(compaction) = event.compaction().cloned() else {
            return Err(self.not_a_compaction(
                key,
                seq,
                "the live compaction event carries no compaction",
            ));
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
        let events = rows
            .iter()
            .map(|(seq, id, body)| self.parse_event(key, *seq, id, body))
            .collect::<Result<Vec<Event>, _>>()?;
        // The placement is the core's: the store only found the events outside the range.
        Ok(assemble_around(Some(summary), events))
    }

    /// A row the indexes name as a compaction that is not one (`why` says how).
    fn not_a_compaction(&self, key: &SessionKey, seq: i64, why: &str) -> SessionStoreError {
        SessionStoreError::CorruptEvent {
            path: self.path().to_path_buf(),
            key: Box::new(key.clone()),
            revision: seq.unsigned_abs(),
            event_id: String::new(),
            source: <serde_json::Error as serde::de::Error>::custom(format!(
                "the row indexed as a compaction is unusable: {why}"
            )),
        }
    }
}

pub(crate) fn query_rows(
    tx: &Transaction<'_>,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Rows> {
    let mut stmt = tx.prepare_cached(sql)?;
    let rows = stmt.query_map(params, read_body)?;
    rows.collect()
}
