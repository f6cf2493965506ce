//! Appending an event: one transaction whose first statement checks and bumps the revision
//! (`UPDATE sessions SET revision = revision + 1 … WHERE revision = $read RETURNING` the
//! header), then stores the event with its indexed columns and brings the header and the view
//! flags up to date — the SQLite store's append, statement for statement.
//!
//! The compare-and-set statement takes the session row's lock until the transaction ends, so
//! appenders that read the same revision queue on it; when the winner commits, PostgreSQL
//! re-checks `revision = $read` for each of them (READ COMMITTED), finds it false, and they are
//! refused as stale. Any failure after the compare-and-set returns before `COMMIT`, and the
//! dropped transaction is rolled back: nothing is half-written, the revision included.

use compaction_core::store_support::{CompactionRange, subsumption_on_append};
use compaction_core::store_support::{starts_turn, timestamp_may_follow};
use compaction_core::{Event, EventCompaction, Revision, SessionKey, Timestamp};
use deadpool_postgres::{Object, Transaction};
use serde_json::{Map, Value};
use tokio_postgres::error::SqlState;

use crate::error::SessionStoreError;
use crate::header::Recomputed;
use crate::postgres::{HEADER_COLUMNS, PostgresStore, recall, session_row};
use crate::row::{EventColumns, LiveRef, SessionRow, now_seconds, tokens_to_sql};

/// ADK's state-delta action keys (snake_case and the camelCase alias).
const STATE_DELTA_KEYS: [&str; 2] = ["state_delta", "stateDelta"];

/// State keys ADK never persists.
const TEMP_PREFIX: &str = "temp:";

type Operation<'a> = &'a (dyn Fn() -> String + Sync);

impl PostgresStore {
    /// Appends `event` if the session is still at `expected`; returns `expected + 1`.
    pub(crate) async fn append_event(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: &Event,
    ) -> Result<Revision, SessionStoreError> {
        let op = || format!("appending event {:?} to session {key}", event.id);
        let mut client = self.client(&op).await?;
        let result = self.append_on(&mut client, key, expected, event).await;
        self.release(client, &result);
        result
    }

    async fn append_on(
        &self,
        client: &mut Object,
        key: &SessionKey,
        expected: Revision,
        event: &Event,
    ) -> Result<Revision, SessionStoreError> {
        let body = serde_json::to_string(event)
            .map_err(|e| self.serialize_error(key, format!("event {:?}", event.id), e))?;
        let op = || format!("appending event {:?} to session {key}", event.id);
        let op: Operation<'_> = &op;
        let read = i64::try_from(expected.0).unwrap_or(i64::MAX);
        let tx = client.transaction().await.map_err(self.pg(op))?;
        let cas = tx
            .prepare_cached(&format!(
                "UPDATE sessions SET revision = revision + 1, updated_at = $5 \
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3 AND revision = $4 \
                 RETURNING {HEADER_COLUMNS}"
            ))
            .await
            .map_err(self.pg(op))?;
        let won = tx
            .query_opt(
                &cas,
                &[
                    &key.app_name,
                    &key.user_id,
                    &key.session_id,
                    &read,
                    &now_seconds(),
                ],
            )
            .await
            .map_err(self.pg(op))?;
        let Some(won) = won else {
            return Err(self.refused(&tx, key, expected, op).await);
        };
        let mut row = session_row(&won);
        // RETURNING gives the bumped revision.
        let seq = i64::try_from(row.revision).unwrap_or(i64::MAX);

        // Statements on the hot path are prepared once per connection (`prepare_cached`): a
        // statement given as text costs a second round trip to prepare on every call.
        let latest_stmt = tx
            .prepare_cached(
                "SELECT max(ts) FROM events WHERE session_pk = $1 AND in_view \
                 AND NOT is_compaction",
            )
            .await
            .map_err(self.pg(op))?;
        let latest: Option<f64> = tx
            .query_one(&latest_stmt, &[&row.pk])
            .await
            .map_err(self.pg(op))?
            .get(0);
        let latest = latest.and_then(|s| Timestamp::new(s).ok());
        let is_rewind = event.actions.rewind_before_invocation_id.is_some();
        let in_view = !is_rewind && event.is_unscoped();
        self.insert_event(&tx, key, row.pk, seq, event, &body, in_view)
            .await?;
        // Checked after the insert so that a duplicate is named as one (as the SQLite store
        // does); returning drops the transaction, so nothing is written either way.
        if !timestamp_may_follow(latest, event) {
            return Err(SessionStoreError::NonIncreasingTimestamp {
                path: self.path(),
                key: Box::new(key.clone()),
                event_id: event.id.clone(),
                latest: latest.unwrap_or(Timestamp::EPOCH),
                offered: event.timestamp,
            });
        }

        if is_rewind {
            self.recompute(&tx, key, &mut row).await?;
        } else if in_view {
            if let Some(tokens) = event.prompt_tokens() {
                row.prompt_tokens = Some(tokens);
            }
            match event.compaction() {
                Some(compaction) => {
                    self.on_compaction(&tx, key, &mut row, seq, compaction)
                        .await?;
                }
                None => row.tracker.observe(event),
            }
        }
        if let Some(delta) = state_delta(event) {
            self.apply_state_delta(&tx, key, row.pk, delta).await?;
        }
        let closed = i64::try_from(row.tracker.closed).unwrap_or(i64::MAX);
        let header_stmt = tx
            .prepare_cached(
                "UPDATE sessions SET closed_turns = $2, open_turn = $3, prompt_tokens = $4, \
                 live_seq = $5, live_start = $6, live_end = $7 WHERE pk = $1",
            )
            .await
            .map_err(self.pg(op))?;
        tx.execute(
            &header_stmt,
            &[
                &row.pk,
                &closed,
                &row.tracker.open.code(),
                &tokens_to_sql(row.prompt_tokens),
                &row.live.map(|l| l.seq),
                &row.live.map(|l| l.start),
                &row.live.map(|l| l.end),
            ],
        )
        .await
        .map_err(self.pg(op))?;
        tx.commit().await.map_err(self.pg(op))?;
        Ok(Revision(row.revision))
    }

    /// Why the compare-and-set matched no row: the session moved on, or does not exist.
    async fn refused(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        expected: Revision,
        op: Operation<'_>,
    ) -> SessionStoreError {
        let found = tx
            .query_opt(
                "SELECT revision FROM sessions \
                 WHERE app_name = $1 AND user_id = $2 AND session_id = $3",
                &[&key.app_name, &key.user_id, &key.session_id],
            )
            .await;
        match found {
            Ok(Some(row)) => SessionStoreError::Stale {
                path: self.path(),
                key: key.clone(),
                expected,
                actual: Revision(row.get::<_, i64>(0).unsigned_abs()),
            },
            Ok(None) => self.not_found(key),
            Err(e) => self.pg(op)(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn insert_event(
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
        let stmt = tx
            .prepare_cached(&format!(
                "INSERT INTO events (session_pk, seq, event_id, invocation_id, ts, scope, \
                 is_compaction, comp_start, comp_end, is_rewind, in_view, body, turn_start, \
                 recall) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, {})",
                recall::VECTOR_OF.replace("{}", "$14")
            ))
            .await;
        // Lossless recall's index, in the append's transaction (see `recall`).
        let (turn_start, lexemes) = (starts_turn(event), recall::lexemes(event));
        let op = || format!("storing event {:?} of session {key}", event.id);
        let stmt = stmt.map_err(self.pg(&op))?;
        let inserted = tx
            .execute(
                &stmt,
                &[
                    &pk,
                    &seq,
                    &event.id,
                    &event.invocation_id,
                    &columns.ts,
                    columns.scope,
                    &columns.is_compaction,
                    &columns.comp_start,
                    &columns.comp_end,
                    &columns.is_rewind,
                    &in_view,
                    &body,
                    &turn_start,
                    &lexemes,
                ],
            )
            .await;
        match inserted {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                Err(SessionStoreError::DuplicateEvent {
                    path: self.path(),
                    key: key.clone(),
                    event_id: event.id.clone(),
                })
            }
            Err(e) => Err(self.pg(&op)(e)),
        }
    }

    /// A compaction joined the view at `seq`: subsumption and the live compaction as
    /// compaction-core decides them (see the SQLite store's `on_compaction`).
    async fn on_compaction(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: &mut SessionRow,
        seq: i64,
        compaction: &EventCompaction,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("updating the compactions of session {key}");
        let op: Operation<'_> = &op;
        let rows = tx
            .query(
                "SELECT seq, comp_start, comp_end FROM events WHERE session_pk = $1 \
                 AND in_view AND is_compaction AND NOT subsumed AND seq <> $2",
                &[&row.pk, &seq],
            )
            .await
            .map_err(self.pg(op))?;
        let mut candidates: Vec<CompactionRange> = Vec::with_capacity(rows.len());
        for r in &rows {
            let position: i64 = r.get(0);
            let range = |column: usize| {
                Timestamp::new(r.get::<_, f64>(column)).map_err(|e| {
                    self.corrupt_row(
                        key,
                        position,
                        &format!("its compaction range is not a time: {e}"),
                    )
                })
            };
            candidates.push(CompactionRange {
                position,
                start: range(1)?,
                end: range(2)?,
            });
        }
        let new = CompactionRange {
            position: seq,
            start: compaction.start_timestamp,
            end: compaction.end_timestamp,
        };
        let appended = subsumption_on_append(&candidates, new);
        if !appended.newly_subsumed.is_empty() {
            tx.execute(
                "UPDATE events SET subsumed = TRUE WHERE session_pk = $1 AND seq = ANY($2)",
                &[&row.pk, &appended.newly_subsumed],
            )
            .await
            .map_err(self.pg(op))?;
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
                tracing::warn!(session = %key, database = %self.database, "compaction flags drifted; recomputing the header");
                self.recompute(tx, key, row).await?;
            }
        }
        Ok(())
    }

    /// The slow path (after a rewind): every view and subsumption flag and the header from
    /// the whole history, with compaction-core's own functions.
    async fn recompute(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: &mut SessionRow,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("recomputing the header of session {key}");
        let op: Operation<'_> = &op;
        let rows = tx
            .query(
                "SELECT seq, event_id, body, in_view, subsumed FROM events \
                 WHERE session_pk = $1 ORDER BY seq",
                &[&row.pk],
            )
            .await
            .map_err(self.pg(op))?;
        let mut stored: Vec<(i64, bool, bool)> = Vec::with_capacity(rows.len());
        let mut events: Vec<Event> = Vec::with_capacity(rows.len());
        for r in &rows {
            let seq: i64 = r.get(0);
            events.push(self.parse_event(key, seq, r.get(1), r.get(2))?);
            stored.push((seq, r.get(3), r.get(4)));
        }
        let fresh = Recomputed::from_history(&events);
        let mut seqs = Vec::new();
        let mut views = Vec::new();
        let mut subs = Vec::new();
        for (i, (seq, in_view, subsumed)) in stored.iter().enumerate() {
            let (v, s) = (fresh.in_view[i], fresh.subsumed[i]);
            if (v, s) != (*in_view, *subsumed) {
                seqs.push(*seq);
                views.push(v);
                subs.push(s);
            }
        }
        if !seqs.is_empty() {
            tx.execute(
                "UPDATE events e SET in_view = f.in_view, subsumed = f.subsumed \
                 FROM unnest($2::bigint[], $3::boolean[], $4::boolean[]) AS f(seq, in_view, subsumed) \
                 WHERE e.session_pk = $1 AND e.seq = f.seq",
                &[&row.pk, &seqs, &views, &subs],
            )
            .await
            .map_err(self.pg(op))?;
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

    /// Merges ADK's `state_delta` into the session state (keys prefixed `temp:` are dropped).
    async fn apply_state_delta(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        delta: &Map<String, Value>,
    ) -> Result<(), SessionStoreError> {
        let op = || format!("updating the state of session {key}");
        let op: Operation<'_> = &op;
        let persisted: Vec<(&String, &Value)> = delta
            .iter()
            .filter(|(k, _)| !k.starts_with(TEMP_PREFIX))
            .collect();
        if persisted.is_empty() {
            return Ok(());
        }
        let stored: String = tx
            .query_one("SELECT state FROM sessions WHERE pk = $1", &[&pk])
            .await
            .map_err(self.pg(op))?
            .get(0);
        let mut state = self.parse_state(key, &stored)?;
        for (k, v) in persisted {
            state.insert(k.clone(), v.clone());
        }
        let json =
            serde_json::to_string(&state).map_err(|e| self.serialize_error(key, "state", e))?;
        tx.execute(
            "UPDATE sessions SET state = $2 WHERE pk = $1",
            &[&pk, &json],
        )
        .await
        .map_err(self.pg(op))?;
        Ok(())
    }

    /// A row the indexes name as a compaction that is not a usable one (`why` says how).
    pub(crate) fn corrupt_row(&self, key: &SessionKey, seq: i64, why: &str) -> SessionStoreError {
        SessionStoreError::CorruptEvent {
            path: self.path(),
            key: Box::new(key.clone()),
            revision: seq.unsigned_abs(),
            event_id: String::new(),
            source: <serde_json::Error as serde::de::Error>::custom(format!(
                "the row indexed as a compaction is unusable: {why}"
            )),
        }
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
