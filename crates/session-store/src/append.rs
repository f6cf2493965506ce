//! Appending an event: one immediate transaction that checks the expected revision, stores the
//! event with its indexed columns, and brings the gate header and the view flags up to date.
//!
//! The common append (a turn's event) costs one row read, one insert and one row update. Two
//! rarer appends do more:
//! - a compaction updates the `subsumed` flags of the view's compactions it contains and asks
//!   the `events_view_compactions` index for the live one (cost grows with the number of
//!   compactions, not events);
//! - a rewind recomputes every flag and the header from the whole history with
//!   compaction-core's own functions (cost grows with the history; rewinds are rare user edits).
//!
//! What each step does to the session is the driver-free [`append_plan`](crate::append_plan)'s,
//! shared with the PostgreSQL store; this module reads and writes the rows it names.

use compaction_core::store_support::CompactionRange;
use compaction_core::{Event, EventCompaction, Revision, SessionKey, Timestamp};
use rusqlite::{Transaction, TransactionBehavior};
use serde_json::Value;

use crate::append_plan::{self, AppendPlan, NextStep, StoredFlags};
use crate::error::SessionStoreError;
use crate::row::EventColumns;
use crate::store::{SessionRow, SqliteStore, now_seconds, read_body, session_row, tokens_to_sql};

impl SqliteStore {
    /// Appends `event` if the session is still at `expected`, in one transaction; returns the
    /// new revision (`expected + 1`).
    ///
    /// Fails with [`SessionStoreError::Stale`] when another writer moved the session on, and
    /// with [`SessionStoreError::DuplicateEvent`] when the session already holds the event's
    /// id; nothing is written then. An event whose actions carry ADK's `state_delta` also
    /// updates the session state (keys prefixed `temp:` are not persisted).
    pub fn append_event(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: &Event,
    ) -> Result<Revision, SessionStoreError> {
        let body = serde_json::to_string(event)
            .map_err(|e| self.serialize_error(key, format!("event {:?}", event.id), e))?;
        let op = || format!("appending event {:?} to session {key}", event.id);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite_error(op))?;
        let mut row = session_row(&tx, key)
            .map_err(self.sqlite_error(op))?
            .ok_or_else(|| self.not_found(key))?;
        if row.revision != expected.0 {
            return Err(SessionStoreError::Stale {
                path: self.path().to_path_buf(),
                key: key.clone(),
                expected,
                actual: Revision(row.revision),
            });
        }
        let latest: Option<f64> = tx
            .prepare_cached(
                "SELECT max(ts) FROM events WHERE session_pk = ?1 AND in_view = 1 \
                 AND is_compaction = 0",
            )
            .and_then(|mut stmt| stmt.query_row((row.pk,), |r| r.get(0)))
            .map_err(self.sqlite_error(op))?;
        let plan = AppendPlan::new(event, i64::try_from(row.revision + 1).unwrap_or(i64::MAX));
        self.insert_event(&tx, key, row.pk, plan.seq, event, &body, plan.in_view)?;
        plan.check_timestamp(latest, key, || self.path().to_path_buf())?;
        match plan.header_step(&mut row) {
            NextStep::Done => {}
            NextStep::Compaction(compaction) => {
                self.on_compaction(&tx, key, &mut row, plan.seq, compaction)?;
            }
            NextStep::Recompute => self.recompute(&tx, key, &mut row)?,
        }
        if let Some(persisted) = plan.persisted_state() {
            self.apply_state_delta(&tx, key, row.pk, &persisted)?;
        }
        tx.prepare_cached(
            "UPDATE sessions SET revision = ?2, updated_at = ?3, closed_turns = ?4, open_turn = ?5, \
             prompt_tokens = ?6, live_seq = ?7, live_start = ?8, live_end = ?9 WHERE pk = ?1",
        )
        .and_then(|mut stmt| {
            stmt.execute((
                row.pk,
                plan.seq,
                now_seconds(),
                i64::try_from(row.tracker.closed).unwrap_or(i64::MAX),
                row.tracker.open.code(),
                tokens_to_sql(row.prompt_tokens),
                row.live.map(|l| l.seq),
                row.live.map(|l| l.start),
                row.live.map(|l| l.end),
            ))
        })
        .map_err(self.sqlite_error(op))?;
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(Revision(plan.seq.unsigned_abs()))
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_event(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        seq: i64,
        event: &Event,
        body: &str,
        in_view: bool,
    ) -> Result<(), SessionStoreError> {
        let columns = EventColumns::of(event);
        let inserted = tx
            .prepare_cached(
                "INSERT INTO events (session_pk, seq, event_id, invocation_id, ts, scope, \
                 is_compaction, comp_start, comp_end, is_rewind, in_view, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![
                    pk,
                    seq,
                    event.id,
                    event.invocation_id,
                    columns.ts,
                    columns.scope,
                    columns.is_compaction,
                    columns.comp_start,
                    columns.comp_end,
                    columns.is_rewind,
                    in_view,
                    body,
                ])
            });
        match inserted.and_then(|_| crate::recall_index::index_event(tx, pk, seq, event)) {
            Ok(()) => Ok(()),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                Err(SessionStoreError::DuplicateEvent {
                    path: self.path().to_path_buf(),
                    key: key.clone(),
                    event_id: event.id.clone(),
                })
            }
            Err(e) => Err(self.sqlite_error(|| {
                format!("storing event {:?} of session {key}", event.id)
            })(e)),
        }
    }

    /// A compaction `compaction` joined the view at `seq`: reads the view's other
    /// non-subsumed compactions (through the `events_view_compactions` index) and writes what
    /// [`append_plan::on_compaction`] decides.
    fn on_compaction(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: &mut SessionRow,
        seq: i64,
        compaction: &EventCompaction,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("updating the compactions of session {key}");
        let others = self.view_compactions(tx, row.pk, seq, op)?;
        let step = append_plan::on_compaction(row, seq, compaction, &others);
        for &position in &step.newly_subsumed {
            tx.prepare_cached("UPDATE events SET subsumed = 1 WHERE session_pk = ?1 AND seq = ?2")
                .and_then(|mut stmt| stmt.execute((row.pk, position)))
                .map_err(self.sqlite_error(op))?;
        }
        if step.drifted {
            tracing::warn!(session = %key, "compaction flags drifted; recomputing the header");
            self.recompute(tx, key, row)?;
        }
        Ok(())
    }

    /// The view's non-subsumed compactions other than the one at `seq`.
    fn view_compactions(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        seq: i64,
        op: impl Fn() -> String + Copy,
    ) -> Result<Vec<CompactionRange>, SessionStoreError> {
        // A stored range that is not a finite timestamp is SQLite data we cannot read.
        let unreadable = |column: usize, e: compaction_core::InvalidTimestamp| {
            self.sqlite_error(op)(rusqlite::Error::FromSqlConversionFailure(
                column,
                rusqlite::types::Type::Real,
                Box::new(e),
            ))
        };
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, comp_start, comp_end FROM events WHERE session_pk = ?1 \
                 AND in_view = 1 AND is_compaction = 1 AND subsumed = 0 AND seq <> ?2",
            )
            .map_err(self.sqlite_error(op))?;
        let mut rows = stmt.query((pk, seq)).map_err(self.sqlite_error(op))?;
        let mut others = Vec::new();
        while let Some(r) = rows.next().map_err(self.sqlite_error(op))? {
            let (position, start, end): (i64, f64, f64) = (
                r.get(0).map_err(self.sqlite_error(op))?,
                r.get(1).map_err(self.sqlite_error(op))?,
                r.get(2).map_err(self.sqlite_error(op))?,
            );
            others.push(CompactionRange {
                position,
                start: Timestamp::new(start).map_err(|e| unreadable(1, e))?,
                end: Timestamp::new(end).map_err(|e| unreadable(2, e))?,
            });
        }
        Ok(others)
    }

    /// The slow path: recomputes every view and subsumption flag and the header from the whole
    /// history (after a rewind).
    fn recompute(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: &mut SessionRow,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("recomputing the header of session {key}");
        let mut stored: Vec<StoredFlags> = Vec::new();
        let mut events: Vec<Event> = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT seq, event_id, body, in_view, subsumed FROM events \
                     WHERE session_pk = ?1 ORDER BY seq",
                )
                .map_err(self.sqlite_error(op))?;
            let mut rows = stmt.query([row.pk]).map_err(self.sqlite_error(op))?;
            while let Some(r) = rows.next().map_err(self.sqlite_error(op))? {
                let (seq, id, body) = read_body(r).map_err(self.sqlite_error(op))?;
                let in_view: bool = r.get(3).map_err(self.sqlite_error(op))?;
                let subsumed: bool = r.get(4).map_err(self.sqlite_error(op))?;
                events.push(self.parse_event(key, seq, &id, &body)?);
                stored.push((seq, in_view, subsumed));
            }
        }
        let mut update = tx
            .prepare_cached(
                "UPDATE events SET in_view = ?3, subsumed = ?4 WHERE session_pk = ?1 AND seq = ?2",
            )
            .map_err(self.sqlite_error(op))?;
        for (seq, in_view, subsumed) in append_plan::recompute(row, &events, &stored) {
            update
                .execute((row.pk, seq, in_view, subsumed))
                .map_err(self.sqlite_error(op))?;
        }
        Ok(())
    }

    /// Merges the persisted part of ADK's `state_delta` into the session state.
    fn apply_state_delta(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        persisted: &[(&String, &Value)],
    ) -> Result<(), SessionStoreError> {
        let op = || format!("updating the state of session {key}");
        let stored: String = tx
            .prepare_cached("SELECT state FROM sessions WHERE pk = ?1")
            .and_then(|mut stmt| stmt.query_row([pk], |r| r.get(0)))
            .map_err(self.sqlite_error(op))?;
        let mut state = self.parse_state(key, &stored)?;
        append_plan::merge_state(&mut state, persisted);
        let json =
            serde_json::to_string(&state).map_err(|e| self.serialize_error(key, "state", e))?;
        tx.prepare_cached("UPDATE sessions SET state = ?2 WHERE pk = ?1")
            .and_then(|mut stmt| stmt.execute((pk, json)))
            .map_err(self.sqlite_error(op))?;
        Ok(())
    }
}
