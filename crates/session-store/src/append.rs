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

use compaction_core::store_support::timestamp_may_follow;
use compaction_core::store_support::{CompactionRange, subsumption_on_append};
use compaction_core::{Event, EventCompaction, Revision, SessionKey, Timestamp};
use rusqlite::{Transaction, TransactionBehavior};
use serde_json::{Map, Value};

use crate::error::SessionStoreError;
use crate::header::Recomputed;
use crate::row::EventColumns;
use crate::store::{
    LiveRef, SessionRow, SqliteStore, now_seconds, read_body, session_row, tokens_to_sql,
};

/// ADK's state-delta action keys (snake_case and the camelCase alias).
const STATE_DELTA_KEYS: [&str; 2] = ["state_delta", "stateDelta"];

/// State keys ADK never persists.
const TEMP_PREFIX: &str = "temp:";

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
        let latest = latest.and_then(|s| Timestamp::new(s).ok());
        let seq = i64::try_from(row.revision + 1).unwrap_or(i64::MAX);
        let is_rewind = event.actions.rewind_before_invocation_id.is_some();
        let in_view = !is_rewind && event.is_unscoped();
        self.insert_event(&tx, key, row.pk, seq, event, &body, in_view)?;
        // Checked after the insert so that a duplicate is named as one; returning drops the
        // transaction, so nothing is written either way.
        if !timestamp_may_follow(latest, event) {
            return Err(SessionStoreError::NonIncreasingTimestamp {
                path: self.path().to_path_buf(),
                key: Box::new(key.clone()),
                event_id: event.id.clone(),
                latest: latest.unwrap_or(Timestamp::EPOCH),
                offered: event.timestamp,
            });
        }

        if is_rewind {
            self.recompute(&tx, key, &mut row)?;
        } else if in_view {
            if let Some(tokens) = event.prompt_tokens() {
                row.prompt_tokens = Some(tokens);
            }
            match event.compaction() {
                Some(compaction) => self.on_compaction(&tx, key, &mut row, seq, compaction)?,
                None => row.tracker.observe(event),
            }
        }
        if let Some(delta) = state_delta(event) {
            self.apply_state_delta(&tx, key, row.pk, delta)?;
        }

        tx.prepare_cached(
            "UPDATE sessions SET revision = ?2, updated_at = ?3, closed_turns = ?4, open_turn = ?5, \
             prompt_tokens = ?6, live_seq = ?7, live_start = ?8, live_end = ?9 WHERE pk = ?1",
        )
        .and_then(|mut stmt| {
            stmt.execute((
                row.pk,
                seq,
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
        Ok(Revision(seq.unsigned_abs()))
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
        match inserted.and_then(|_| crate::recall::index_event(tx, pk, seq, event)) {
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

    /// A compaction `compaction` joined the view at `seq`: updates subsumption, then the live
    /// compaction and the turn count, as compaction-core decides them
    /// ([`subsumption_on_append`]) from the view's non-subsumed compactions
    /// (read through the `events_view_compactions` index; with rolling consolidation there is
    /// one). The live compaction is either the new one (the count restarts) or unchanged;
    /// anything else would mean the flags drifted, and the header is recomputed.
    fn on_compaction(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: &mut SessionRow,
        seq: i64,
        compaction: &EventCompaction,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("updating the compactions of session {key}");
        // A stored range that is not a finite timestamp is SQLite data we cannot read.
        let unreadable = |column: usize, e: compaction_core::InvalidTimestamp| {
            self.sqlite_error(op)(rusqlite::Error::FromSqlConversionFailure(
                column,
                rusqlite::types::Type::Real,
                Box::new(e),
            ))
        };
        let mut candidates: Vec<CompactionRange> = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT seq, comp_start, comp_end FROM events WHERE session_pk = ?1 \
                     AND in_view = 1 AND is_compaction = 1 AND subsumed = 0 AND seq <> ?2",
                )
                .map_err(self.sqlite_error(op))?;
            let mut rows = stmt.query((row.pk, seq)).map_err(self.sqlite_error(op))?;
            while let Some(r) = rows.next().map_err(self.sqlite_error(op))? {
                let (position, start, end): (i64, f64, f64) = (
                    r.get(0).map_err(self.sqlite_error(op))?,
                    r.get(1).map_err(self.sqlite_error(op))?,
                    r.get(2).map_err(self.sqlite_error(op))?,
                );
                candidates.push(CompactionRange {
                    position,
                    start: Timestamp::new(start).map_err(|e| unreadable(1, e))?,
                    end: Timestamp::new(end).map_err(|e| unreadable(2, e))?,
                });
            }
        }
        let new = CompactionRange {
            position: seq,
            start: compaction.start_timestamp,
            end: compaction.end_timestamp,
        };
        let appended = subsumption_on_append(&candidates, new);
        for &position in &appended.newly_subsumed {
            tx.prepare_cached("UPDATE events SET subsumed = 1 WHERE session_pk = ?1 AND seq = ?2")
                .and_then(|mut stmt| stmt.execute((row.pk, position)))
                .map_err(self.sqlite_error(op))?;
        }
        let live = appended.live.map(|l| LiveRef {
            seq: l.position,
            start: l.start.seconds(),
            end: l.end.seconds(),
        });
        match live {
            Some(live) if live.seq == seq => {
                row.live = Some(live);
                row.tracker.reset();
            }
            Some(live) if row.live.is_some_and(|old| old.seq == live.seq) => {}
            _ => {
                tracing::warn!(session = %key, "compaction flags drifted; recomputing the header");
                self.recompute(tx, key, row)?;
            }
        }
        Ok(())
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
        let mut stored: Vec<(i64, bool, bool)> = Vec::new();
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
        let fresh = Recomputed::from_history(&events);
        let mut update = tx
            .prepare_cached(
                "UPDATE events SET in_view = ?3, subsumed = ?4 WHERE session_pk = ?1 AND seq = ?2",
            )
            .map_err(self.sqlite_error(op))?;
        for (i, (seq, in_view, subsumed)) in stored.iter().enumerate() {
            let (v, s) = (fresh.in_view[i], fresh.subsumed[i]);
            if (v, s) != (*in_view, *subsumed) {
                update
                    .execute((row.pk, seq, v, s))
                    .map_err(self.sqlite_error(op))?;
            }
        }
        row.tracker = fresh.tracker;
        row.prompt_tokens = fresh.prompt_tokens;
        row.live = fresh.live.and_then(|i| {
            let c = events[i].compaction()?;
            Some(LiveRef {
                seq: stored[i].0,
                start: c.start_timestamp.seconds(),
                end: c.end_timestamp.seconds(),
            })
        });
        Ok(())
    }

    /// Merges ADK's `state_delta` into the session state.
    fn apply_state_delta(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        delta: &Map<String, Value>,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("updating the state of session {key}");
        let persisted: Vec<(&String, &Value)> = delta
            .iter()
            .filter(|(k, _)| !k.starts_with(TEMP_PREFIX))
            .collect();
        if persisted.is_empty() {
            return Ok(());
        }
        let stored: String = tx
            .prepare_cached("SELECT state FROM sessions WHERE pk = ?1")
            .and_then(|mut stmt| stmt.query_row([pk], |r| r.get(0)))
            .map_err(self.sqlite_error(op))?;
        let mut state = self.parse_state(key, &stored)?;
        for (k, v) in persisted {
            state.insert(k.clone(), v.clone());
        }
        let json =
            serde_json::to_string(&state).map_err(|e| self.serialize_error(key, "state", e))?;
        tx.prepare_cached("UPDATE sessions SET state = ?2 WHERE pk = ?1")
            .and_then(|mut stmt| stmt.execute((pk, json)))
            .map_err(self.sqlite_error(op))?;
        Ok(())
    }
}

/// The event's `state_delta` action, when it carries a non-empty one.
fn state_delta(event: &Event) -> Option<&Map<String, Value>> {
    STATE_DELTA_KEYS
        .iter()
        .find_map(|k| event.actions.extra.get(*k))
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
}
