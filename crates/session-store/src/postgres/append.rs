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
//!
//! What each step does to the session is the driver-free [`append_plan`](crate::append_plan)'s,
//! shared with the SQLite store; this module reads and writes the rows it names.

use compaction_core::store_support::CompactionRange;
use compaction_core::store_support::starts_turn;
use compaction_core::{Event, EventCompaction, Revision, SessionKey, Timestamp};
use deadpool_postgres::{Object, Transaction};
use serde_json::Value;
use tokio_postgres::error::SqlState;

use crate::append_plan::{self, AppendPlan, NextStep, StoredFlags};
use crate::error::SessionStoreError;
use crate::postgres::column::Operation;
use crate::postgres::{HEADER_COLUMNS, PostgresStore, recall};
use crate::row::{EventColumns, SessionRow, now_seconds, tokens_to_sql};

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
        let mut row = self.session_row(&won, op)?;
        // RETURNING gives the bumped revision.
        let plan = AppendPlan::new(event, i64::try_from(row.revision).unwrap_or(i64::MAX));
        let latest = self.latest_in_view(&tx, row.pk, op).await?;
        self.insert_event(&tx, key, row.pk, plan.seq, event, &body, plan.in_view)
            .await?;
        plan.check_timestamp(latest, key, || self.path())?;
        match plan.header_step(&mut row) {
            NextStep::Done => {}
            NextStep::Compaction(compaction) => {
                self.on_compaction(&tx, key, &mut row, plan.seq, compaction)
                    .await?;
            }
            NextStep::Recompute => self.recompute(&tx, key, &mut row).await?,
        }
        if let Some(persisted) = plan.persisted_state() {
            self.apply_state_delta(&tx, key, row.pk, &persisted).await?;
        }
        self.write_header(&tx, &row, op).await?;
        tx.commit().await.map_err(self.pg(op))?;
        Ok(Revision(row.revision))
    }

    /// The latest timestamp of the view's non-compaction events.
    async fn latest_in_view(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        op: Operation<'_>,
    ) -> Result<Option<f64>, SessionStoreError> {
        // Statements on the hot path are prepared once per connection (`prepare_cached`): a
        // statement given as text costs a second round trip to prepare on every call.
        let stmt = tx
            .prepare_cached(
                "SELECT max(ts) FROM events WHERE session_pk = $1 AND in_view \
                 AND NOT is_compaction",
            )
            .await
            .map_err(self.pg(op))?;
        let latest = tx.query_one(&stmt, &[&pk]).await.map_err(self.pg(op))?;
        self.column(&latest, 0, op)
    }

    /// Writes the header the plan left in `row` (the revision was bumped by the
    /// compare-and-set).
    async fn write_header(
        &self,
        tx: &Transaction<'_>,
        row: &SessionRow,
        op: Operation<'_>,
    ) -> Result<(), SessionStoreError> {
        let closed = i64::try_from(row.tracker.closed).unwrap_or(i64::MAX);
        let stmt = tx
            .prepare_cached(
                "UPDATE sessions SET closed_turns = $2, open_turn = $3, prompt_tokens = $4, \
                 live_seq = $5, live_start = $6, live_end = $7 WHERE pk = $1",
            )
            .await
            .map_err(self.pg(op))?;
        tx.execute(
            &stmt,
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
        Ok(())
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
        let revision = match found {
            Ok(Some(row)) => self.column::<i64>(&row, 0, op),
            Ok(None) => return self.not_found(key),
            Err(e) => return self.pg(op)(e),
        };
        match revision {
            Ok(revision) => SessionStoreError::Stale {
                path: self.path(),
                key: key.clone(),
                expected,
                actual: Revision(revision.unsigned_abs()),
            },
            Err(e) => e,
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

    /// A compaction joined the view at `seq`: reads the view's other non-subsumed
    /// compactions and writes what [`append_plan::on_compaction`] decides.
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
        let others = self.view_compactions(tx, key, row.pk, seq, op).await?;
        let step = append_plan::on_compaction(row, seq, compaction, &others);
        if !step.newly_subsumed.is_empty() {
            tx.execute(
                "UPDATE events SET subsumed = TRUE WHERE session_pk = $1 AND seq = ANY($2)",
                &[&row.pk, &step.newly_subsumed],
            )
            .await
            .map_err(self.pg(op))?;
        }
        if step.drifted {
            tracing::warn!(session = %key, database = %self.database, "compaction flags drifted; recomputing the header");
            self.recompute(tx, key, row).await?;
        }
        Ok(())
    }

    /// The view's non-subsumed compactions other than the one at `seq`.
    async fn view_compactions(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        seq: i64,
        op: Operation<'_>,
    ) -> Result<Vec<CompactionRange>, SessionStoreError> {
        let rows = tx
            .query(
                "SELECT seq, comp_start, comp_end FROM events WHERE session_pk = $1 \
                 AND in_view AND is_compaction AND NOT subsumed AND seq <> $2",
                &[&pk, &seq],
            )
            .await
            .map_err(self.pg(op))?;
        let mut others = Vec::with_capacity(rows.len());
        for r in &rows {
            let position: i64 = self.column(r, 0, op)?;
            let range = |column: usize| {
                Timestamp::new(self.column::<f64>(r, column, op)?).map_err(|e| {
                    self.corrupt_row(
                        key,
                        position,
                        &format!("its compaction range is not a time: {e}"),
                    )
                })
            };
            others.push(CompactionRange {
                position,
                start: range(1)?,
                end: range(2)?,
            });
        }
        Ok(others)
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
        let mut stored: Vec<StoredFlags> = Vec::with_capacity(rows.len());
        let mut events: Vec<Event> = Vec::with_capacity(rows.len());
        for r in &rows {
            let seq: i64 = self.column(r, 0, op)?;
            events.push(self.parse_event(
                key,
                seq,
                self.column(r, 1, op)?,
                self.column(r, 2, op)?,
            )?);
            stored.push((seq, self.column(r, 3, op)?, self.column(r, 4, op)?));
        }
        let changed = append_plan::recompute(row, &events, &stored);
        if !changed.is_empty() {
            let seqs: Vec<i64> = changed.iter().map(|c| c.0).collect();
            let views: Vec<bool> = changed.iter().map(|c| c.1).collect();
            let subs: Vec<bool> = changed.iter().map(|c| c.2).collect();
            tx.execute(
                "UPDATE events e SET in_view = f.in_view, subsumed = f.subsumed \
                 FROM unnest($2::bigint[], $3::boolean[], $4::boolean[]) AS f(seq, in_view, subsumed) \
                 WHERE e.session_pk = $1 AND e.seq = f.seq",
                &[&row.pk, &seqs, &views, &subs],
            )
            .await
            .map_err(self.pg(op))?;
        }
        Ok(())
    }

    /// Merges the persisted part of ADK's `state_delta` into the session state.
    async fn apply_state_delta(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        persisted: &[(&String, &Value)],
    ) -> Result<(), SessionStoreError> {
        let op = || format!("updating the state of session {key}");
        let op: Operation<'_> = &op;
        let stored = tx
            .query_one("SELECT state FROM sessions WHERE pk = $1", &[&pk])
            .await
            .map_err(self.pg(op))?;
        let mut state = self.parse_state(key, self.column(&stored, 0, op)?)?;
        append_plan::merge_state(&mut state, persisted);
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
