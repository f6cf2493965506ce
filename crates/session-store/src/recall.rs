//! Lossless recall on the native SQLite store: search through an FTS5 index, expansion
//! through the view indexes. The answers equal compaction-core's `recall::scan` of the whole
//! history (tests/recall.rs checks it on random histories), ranked by FTS5's bm25.
//!
//! # The index (migration 4)
//! - `recall_text (id INTEGER PRIMARY KEY, session_pk, seq, text)`: each searchable event's
//!   text (`compaction_core::store_support::searchable_text`; compactions, rewinds and events with
//!   no text get no row), written by the same transaction as the event's append and deleted
//!   with it (a foreign key on `events`, `ON DELETE CASCADE`). Its own integer key keeps the
//!   FTS rowids stable through `VACUUM` (the events table has no integer key).
//! - `recall_fts`: an FTS5 external-content table over `recall_text.text` (tokenizer
//!   `unicode61 remove_diacritics 0`, the words of `compaction_core::store_support::words`), kept by
//!   triggers on `recall_text`.
//! - `events.turn_start` (with the partial index `events_turn_starts`): the event opens a
//!   turn (`compaction_core::store_support::starts_turn`), so a hit's turn number is one indexed
//!   count and a turn range two indexed lookups.
//!
//! A file opened read-only at an older schema has no index: its calls scan the whole history
//! with compaction-core's rules (what `compaction recall` does on a file no writer has opened
//! since this build; a writing open migrates it).
//!
//! # What this module must never do
//! It never lets a query's text reach FTS5 as syntax (the query is compaction-core's list of
//! quoted words) and never shows an SQL error for a bad query (compaction-core refuses those
//! before a store is asked).

use compaction_core::ExpandError;
use compaction_core::store_support::CompactionRange;
use compaction_core::store_support::Coverage;
use compaction_core::store_support::scan;
use compaction_core::{RecallHit, RecallQuery, RecalledEvent};
use compaction_core::{SessionKey, Timestamp};
use rusqlite::{OptionalExtension, Transaction};

use crate::error::SessionStoreError;
use crate::recall_index::RECALL_VERSION;
use crate::store::{SessionRow, SqliteStore, read_body};

type Op<'a> = &'a dyn Fn() -> String;

impl SqliteStore {
    /// The file carries the recall index (a read-only open of an older file does not).
    fn has_recall_index(&self) -> Result<bool, SessionStoreError> {
        let conn = self.conn();
        crate::schema::user_version(&conn)
            .map(|v| v >= RECALL_VERSION)
            .map_err(self.sqlite_error(|| "reading the schema version".to_owned()))
    }

    /// The session's raw events `query` matches, best first (bm25), at most `limit`.
    pub fn search(
        &self,
        key: &SessionKey,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<RecallHit>, SessionStoreError> {
        if !self.has_recall_index()? {
            return Ok(scan::search_history(
                &self.get_session(key)?.events,
                query,
                limit,
            ));
        }
        let fallback = self.read_session(key, "searching", |tx, row, op| {
            if query.includes_pipeline() && self.has_rewind(tx, row.pk, op)? {
                // Whether a scoped event was rewound is not indexed: rare, so scanned.
                return Ok(None);
            }
            let coverage = self.coverage(tx, row.pk, op)?;
            let mut stmt = tx
                .prepare_cached(
                    "SELECT e.seq, e.event_id, e.body, t.text FROM recall_fts \
                     JOIN recall_text t ON t.id = recall_fts.rowid \
                     JOIN events e ON e.session_pk = t.session_pk AND e.seq = t.seq \
                     WHERE recall_fts MATCH ?1 AND t.session_pk = ?2 \
                     AND (e.in_view = 1 OR (?3 AND e.scope IS NOT NULL)) \
                     ORDER BY bm25(recall_fts), e.seq LIMIT ?4",
                )
                .map_err(self.sqlite_error(op))?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let params = (
                query.fts5_expression(),
                row.pk,
                query.includes_pipeline(),
                limit,
            );
            let mut rows = stmt.query(params).map_err(self.sqlite_error(op))?;
            let mut hits = Vec::new();
            while let Some(r) = rows.next().map_err(self.sqlite_error(op))? {
                let (seq, id, body) = read_body(r).map_err(self.sqlite_error(op))?;
                let text: String = r.get(3).map_err(self.sqlite_error(op))?;
                let event = self.parse_event(key, seq, &id, &body)?;
                let turn = self.turn_at(tx, row.pk, seq, op)?;
                let snippet = compaction_core::store_support::snippet(&text, query);
                let covered = coverage.covered_by(event.timestamp);
                hits.push(RecallHit::new(&event, turn, covered, snippet, text));
            }
            Ok(Some(hits))
        })?;
        match fallback {
            Some(hits) => Ok(hits),
            None => Ok(scan::search_history(
                &self.get_session(key)?.events,
                query,
                limit,
            )),
        }
    }

    /// The events the compaction `compaction_id` covers, verbatim and in order.
    pub fn expand(
        &self,
        key: &SessionKey,
        compaction_id: &str,
    ) -> Result<Vec<RecalledEvent>, SessionStoreError> {
        if !self.has_recall_index()? {
            let events = self.get_session(key)?.events;
            return scan::expand_compaction(&events, compaction_id)
                .map_err(|e| self.expand_error(key, e));
        }
        self.read_session(key, "expanding a compaction", |tx, row, op| {
            let range: Option<(f64, f64)> = tx
                .prepare_cached(
                    "SELECT comp_start, comp_end FROM events WHERE session_pk = ?1 \
                     AND event_id = ?2 AND in_view = 1 AND is_compaction = 1",
                )
                .and_then(|mut s| {
                    s.query_row((row.pk, compaction_id), |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(self.sqlite_error(op))?;
            let Some((start, end)) = range else {
                let unknown = ExpandError::UnknownCompaction(compaction_id.to_owned());
                return Err(self.expand_error(key, unknown));
            };
            self.view_events(
                tx,
                key,
                row,
                "AND ts >= ?2 AND ts <= ?3",
                rusqlite::params![row.pk, start, end],
                op,
            )
        })
    }

    /// The coordinator view's events of turns `first..=last`, verbatim and in order.
    pub fn expand_turns(
        &self,
        key: &SessionKey,
        first: usize,
        last: usize,
    ) -> Result<Vec<RecalledEvent>, SessionStoreError> {
        if !self.has_recall_index()? {
            let events = self.get_session(key)?.events;
            return scan::expand_turns(&events, first, last).map_err(|e| self.expand_error(key, e));
        }
        self.read_session(key, "expanding turns", |tx, row, op| {
            let turns: i64 = tx
                .prepare_cached(
                    "SELECT count(*) FROM events WHERE session_pk = ?1 AND in_view = 1 \
                     AND turn_start = 1",
                )
                .and_then(|mut s| s.query_row((row.pk,), |r| r.get(0)))
                .map_err(self.sqlite_error(op))?;
            let turns = usize::try_from(turns).unwrap_or(0);
            if first == 0 || first > last || last > turns {
                let out = ExpandError::TurnsOutOfRange { first, last, turns };
                return Err(self.expand_error(key, out));
            }
            let start = self
                .turn_start_seq(tx, row.pk, first, op)?
                .unwrap_or(i64::MAX);
            let end = self
                .turn_start_seq(tx, row.pk, last + 1, op)?
                .unwrap_or(i64::MAX);
            self.view_events(
                tx,
                key,
                row,
                "AND seq >= ?2 AND seq < ?3",
                rusqlite::params![row.pk, start, end],
                op,
            )
        })
    }

    /// How many turns of the view start before `ts` (one count over `events_turn_starts`);
    /// `None` on a read-only file without the index.
    pub fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<Option<usize>, SessionStoreError> {
        if !self.has_recall_index()? {
            return Ok(None);
        }
        self.read_session(key, "counting turns", |tx, row, op| {
            let count: i64 = tx
                .prepare_cached(
                    "SELECT count(*) FROM events WHERE session_pk = ?1 AND in_view = 1 \
                     AND turn_start = 1 AND ts < ?2",
                )
                .and_then(|mut s| s.query_row((row.pk, ts.seconds()), |r| r.get(0)))
                .map_err(self.sqlite_error(op))?;
            Ok(usize::try_from(count).ok())
        })
    }

    fn expand_error(&self, key: &SessionKey, error: ExpandError) -> SessionStoreError {
        SessionStoreError::Expand {
            path: self.path().to_path_buf(),
            key: Box::new(key.clone()),
            error,
        }
    }

    /// The view's non-compaction events matching `filter` (over `?2`, `?3`), in append order,
    /// numbered by turn and with their coverage.
    fn view_events(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: SessionRow,
        filter: &str,
        params: impl rusqlite::Params,
        op: Op<'_>,
    ) -> Result<Vec<RecalledEvent>, SessionStoreError> {
        let coverage = self.coverage(tx, row.pk, op)?;
        let sql = format!(
            "SELECT seq, event_id, body, turn_start FROM events WHERE session_pk = ?1 \
             AND in_view = 1 AND is_compaction = 0 {filter} ORDER BY seq"
        );
        let mut stmt = tx.prepare_cached(&sql).map_err(self.sqlite_error(op))?;
        let mut rows = stmt.query(params).map_err(self.sqlite_error(op))?;
        let mut out = Vec::new();
        let mut turn: Option<usize> = None;
        while let Some(r) = rows.next().map_err(self.sqlite_error(op))? {
            let (seq, id, body) = read_body(r).map_err(self.sqlite_error(op))?;
            let starts: bool = r.get(3).map_err(self.sqlite_error(op))?;
            turn = match (out.is_empty(), starts) {
                (true, _) => self.turn_at(tx, row.pk, seq, op)?,
                (false, true) => Some(turn.map_or(1, |t| t + 1)),
                (false, false) => turn,
            };
            let event = self.parse_event(key, seq, &id, &body)?;
            let covered = coverage.covered_by(event.timestamp);
            out.push(RecalledEvent::new(event, turn, covered));
        }
        Ok(out)
    }

    /// The turn of the event at `seq`: the view's turn starts at or before it.
    fn turn_at(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        seq: i64,
        op: Op<'_>,
    ) -> Result<Option<usize>, SessionStoreError> {
        let count: i64 = tx
            .prepare_cached(
                "SELECT count(*) FROM events WHERE session_pk = ?1 AND in_view = 1 \
                 AND turn_start = 1 AND seq <= ?2",
            )
            .and_then(|mut s| s.query_row((pk, seq), |r| r.get(0)))
            .map_err(self.sqlite_error(op))?;
        Ok(usize::try_from(count).ok().filter(|&n| n > 0))
    }

    /// The seq of the `n`-th (1-based) turn start of the view, when there is one.
    fn turn_start_seq(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        n: usize,
        op: Op<'_>,
    ) -> Result<Option<i64>, SessionStoreError> {
        let offset = i64::try_from(n.saturating_sub(1)).unwrap_or(i64::MAX);
        tx.prepare_cached(
            "SELECT seq FROM events WHERE session_pk = ?1 AND in_view = 1 AND turn_start = 1 \
             ORDER BY seq LIMIT 1 OFFSET ?2",
        )
        .and_then(|mut s| s.query_row((pk, offset), |r| r.get(0)).optional())
        .map_err(self.sqlite_error(op))
    }

    /// The view's rendered (non-subsumed) compactions.
    fn coverage(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        op: Op<'_>,
    ) -> Result<Coverage, SessionStoreError> {
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, event_id, comp_start, comp_end FROM events WHERE session_pk = ?1 \
                 AND in_view = 1 AND is_compaction = 1 AND subsumed = 0",
            )
            .map_err(self.sqlite_error(op))?;
        let mut rows = stmt.query((pk,)).map_err(self.sqlite_error(op))?;
        let mut rendered = Vec::new();
        while let Some(r) = rows.next().map_err(self.sqlite_error(op))? {
            let (seq, id, start, end): (i64, String, f64, f64) = (
                r.get(0).map_err(self.sqlite_error(op))?,
                r.get(1).map_err(self.sqlite_error(op))?,
                r.get(2).map_err(self.sqlite_error(op))?,
                r.get(3).map_err(self.sqlite_error(op))?,
            );
            // A stored range that is not a finite timestamp is SQLite data we cannot read.
            let unreadable = |column: usize, e: compaction_core::InvalidTimestamp| {
                self.sqlite_error(op)(rusqlite::Error::FromSqlConversionFailure(
                    column,
                    rusqlite::types::Type::Real,
                    Box::new(e),
                ))
            };
            let start = Timestamp::new(start).map_err(|e| unreadable(2, e))?;
            let end = Timestamp::new(end).map_err(|e| unreadable(3, e))?;
            rendered.push((
                id,
                CompactionRange {
                    position: seq,
                    start,
                    end,
                },
            ));
        }
        Ok(Coverage::new(rendered))
    }

    fn has_rewind(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        op: Op<'_>,
    ) -> Result<bool, SessionStoreError> {
        tx.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM events WHERE session_pk = ?1 AND is_rewind = 1)",
        )
        .and_then(|mut s| s.query_row((pk,), |r| r.get(0)))
        .map_err(self.sqlite_error(op))
    }
}
