//! The reads: the whole session, the context around the live compaction, the live tail, the
//! compaction history and the shadow decisions — each in one read-only transaction
//! (`REPEATABLE READ`, so the header row and the event rows belong to one snapshot), through
//! the same partial indexes as the SQLite store (see `crate::context` for why the results equal
//! compaction-core's functions of the whole history).

use compaction_core::{
    AssembledContext, CompactionEntry, DecisionRecord, Event, LiveSummary, Revision, Session,
    SessionKey, assemble_around,
};
use deadpool_postgres::{Object, Transaction};
use serde_json::Map;
use tokio_postgres::IsolationLevel;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use crate::error::SessionStoreError;
use crate::postgres::{PostgresStore, SESSION_ROW};
use crate::row::{LiveRef, SessionRow, now_seconds};

type Operation<'a> = &'a (dyn Fn() -> String + Sync);

/// Rows `(seq, event_id, body)`.
type Rows = Vec<(i64, String, String)>;

impl PostgresStore {
    /// Creates an empty session at revision 0 with `state`.
    pub(crate) async fn create(
        &self,
        key: &SessionKey,
        state: Map<String, serde_json::Value>,
    ) -> Result<Session, SessionStoreError> {
        let json =
            serde_json::to_string(&state).map_err(|e| self.serialize_error(key, "state", e))?;
        let op = || format!("creating session {key}");
        let client = self.client(&op).await?;
        let now = now_seconds();
        let inserted = client
            .execute(
                "INSERT INTO sessions (app_name, user_id, session_id, state, revision, \
                 created_at, updated_at) VALUES ($1, $2, $3, $4, 0, $5, $5)",
                &[&key.app_name, &key.user_id, &key.session_id, &json, &now],
            )
            .await;
        let result = match inserted {
            Ok(_) => Ok(Session {
                key: key.clone(),
                state,
                events: Vec::new(),
                revision: Revision(0),
            }),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                Err(SessionStoreError::AlreadyExists {
                    path: self.path(),
                    key: key.clone(),
                })
            }
            Err(e) => Err(self.pg(&op)(e)),
        };
        self.release(client, &result);
        result
    }

    /// Runs `read` in one read-only snapshot on the session row of `key`; errors name the
    /// operation as `{what} of session {key}`.
    pub(super) async fn read_session<T>(
        &self,
        key: &SessionKey,
        what: &str,
        read: impl AsyncFnOnce(&Transaction<'_>, SessionRow, &str) -> Result<T, SessionStoreError>,
    ) -> Result<T, SessionStoreError> {
        let op = || format!("{what} of session {key}");
        let op: Operation<'_> = &op;
        let mut client = self.client(op).await?;
        let result = self.read_on(&mut client, key, op, read).await;
        self.release(client, &result);
        result
    }

    async fn read_on<T>(
        &self,
        client: &mut Object,
        key: &SessionKey,
        op: Operation<'_>,
        read: impl AsyncFnOnce(&Transaction<'_>, SessionRow, &str) -> Result<T, SessionStoreError>,
    ) -> Result<T, SessionStoreError> {
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(self.pg(op))?;
        // Prepared once per connection: a statement given as text costs a round trip more.
        let stmt = tx.prepare_cached(SESSION_ROW).await.map_err(self.pg(op))?;
        let row = tx
            .query_opt(&stmt, &[&key.app_name, &key.user_id, &key.session_id])
            .await
            .map_err(self.pg(op))?
            .ok_or_else(|| self.not_found(key))?;
        let name = op();
        let value = read(&tx, self.session_row(&row, op)?, &name).await?;
        tx.commit().await.map_err(self.pg(op))?;
        Ok(value)
    }

    /// `(seq, event_id, body)` rows of `sql`.
    async fn rows(
        &self,
        tx: &Transaction<'_>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        op: &str,
    ) -> Result<Rows, SessionStoreError> {
        let stmt = tx.prepare_cached(sql).await.map_err(self.pg_named(op))?;
        tx.query(&stmt, params)
            .await
            .map_err(self.pg_named(op))?
            .iter()
            .map(|r| {
                Ok((
                    self.column(r, 0, op)?,
                    self.column(r, 1, op)?,
                    self.column(r, 2, op)?,
                ))
            })
            .collect()
    }

    fn parse_rows(&self, key: &SessionKey, rows: &Rows) -> Result<Vec<Event>, SessionStoreError> {
        rows.iter()
            .map(|(seq, id, body)| self.parse_event(key, *seq, id, body))
            .collect()
    }

    async fn state_of(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        op: &str,
    ) -> Result<Map<String, serde_json::Value>, SessionStoreError> {
        let stmt = tx
            .prepare_cached("SELECT state FROM sessions WHERE pk = $1")
            .await
            .map_err(self.pg_named(op))?;
        let row = tx
            .query_one(&stmt, &[&pk])
            .await
            .map_err(self.pg_named(op))?;
        self.parse_state(key, self.column(&row, 0, op)?)
    }

    /// The session with its whole history, in append order.
    pub(crate) async fn load_session(
        &self,
        key: &SessionKey,
    ) -> Result<Session, SessionStoreError> {
        self.read_session(key, "loading", async |tx, row, op| {
            let state = self.state_of(tx, key, row.pk, op).await?;
            let rows = self
                .rows(
                    tx,
                    "SELECT seq, event_id, body FROM events WHERE session_pk = $1 ORDER BY seq",
                    &[&row.pk],
                    op,
                )
                .await?;
            Ok(Session {
                key: key.clone(),
                state,
                events: self.parse_rows(key, &rows)?,
                revision: Revision(row.revision),
            })
        })
        .await
    }

    /// The next prompt's context: `compaction_core::assemble_context` of the whole history.
    pub(crate) async fn context(
        &self,
        key: &SessionKey,
    ) -> Result<AssembledContext, SessionStoreError> {
        self.read_session(key, "loading the context", async |tx, row, op| {
            match row.live {
                None => {
                    let rows = self
                        .rows(
                            tx,
                            "SELECT seq, event_id, body FROM events WHERE session_pk = $1 \
                         AND in_view AND NOT is_compaction ORDER BY seq",
                            &[&row.pk],
                            op,
                        )
                        .await?;
                    Ok(assemble_around(None, self.parse_rows(key, &rows)?))
                }
                Some(live) => self.around_live(tx, key, row.pk, live, op).await,
            }
        })
        .await
    }

    async fn around_live(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        live: LiveRef,
        op: &str,
    ) -> Result<AssembledContext, SessionStoreError> {
        let found = self
            .rows(
                tx,
                "SELECT seq, event_id, body FROM events WHERE session_pk = $1 AND seq = $2",
                &[&pk, &live.seq],
                op,
            )
            .await?;
        let Some((seq, id, body)) = found.into_iter().next() else {
            return Err(self.corrupt_row(
                key,
                live.seq,
                "the session's live compaction row is missing",
            ));
        };
        let event = self.parse_event(key, seq, &id, &body)?;
        let Some(compaction) = event.compaction().cloned() else {
            return Err(self.corrupt_row(
                key,
                seq,
                "the live compaction event carries no compaction",
            ));
        };
        let summary = LiveSummary {
            event_id: event.id,
            compaction,
        };
        // Two range scans of `events_view_ts`: before the live range and after it.
        let rows = self
            .rows(
                tx,
                "SELECT seq, event_id, body FROM events WHERE session_pk = $1 \
                 AND in_view AND NOT is_compaction AND ts < $2 \
                 UNION ALL \
                 SELECT seq, event_id, body FROM events WHERE session_pk = $1 \
                 AND in_view AND NOT is_compaction AND ts > $3 \
                 ORDER BY 1",
                &[&pk, &live.start, &live.end],
                op,
            )
            .await?;
        // The placement is the core's: the store only found the events outside the range.
        Ok(assemble_around(Some(summary), self.parse_rows(key, &rows)?))
    }

    /// The session with only its live tail (`compaction_core::live_tail`).
    pub(crate) async fn live_tail(&self, key: &SessionKey) -> Result<Session, SessionStoreError> {
        self.read_session(key, "loading the live tail", async |tx, row, op| {
            let state = self.state_of(tx, key, row.pk, op).await?;
            let rows = match row.live {
                None => {
                    self.rows(
                        tx,
                        "SELECT seq, event_id, body FROM events WHERE session_pk = $1 \
                         AND in_view ORDER BY seq",
                        &[&row.pk],
                        op,
                    )
                    .await?
                }
                Some(live) => {
                    self.rows(
                        tx,
                        "SELECT seq, event_id, body FROM events WHERE session_pk = $1 \
                         AND in_view AND NOT is_compaction AND ts > $2 \
                         UNION ALL \
                         SELECT seq, event_id, body FROM events WHERE session_pk = $1 AND seq = $3 \
                         ORDER BY 1",
                        &[&row.pk, &live.end, &live.seq],
                        op,
                    )
                    .await?
                }
            };
            Ok(Session {
                key: key.clone(),
                state,
                events: self.parse_rows(key, &rows)?,
                revision: Revision(row.revision),
            })
        })
        .await
    }

    /// The compaction history of the coordinator view (`compaction_core::compaction_history`).
    pub(crate) async fn compactions(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<CompactionEntry>, SessionStoreError> {
        self.read_session(
            key,
            "loading the compaction history",
            async |tx, row, op| {
                let stmt = tx
                    .prepare_cached(
                        "SELECT seq, event_id, body, subsumed FROM events WHERE session_pk = $1 \
                     AND in_view AND is_compaction ORDER BY seq",
                    )
                    .await
                    .map_err(self.pg_named(op))?;
                let rows = tx
                    .query(&stmt, &[&row.pk])
                    .await
                    .map_err(self.pg_named(op))?;
                let mut entries = Vec::with_capacity(rows.len());
                for r in &rows {
                    let seq: i64 = self.column(r, 0, op)?;
                    let (id, body) = (self.column(r, 1, op)?, self.column(r, 2, op)?);
                    let event = self.parse_event(key, seq, id, body)?;
                    let subsumed = self.column(r, 3, op)?;
                    let entry = CompactionEntry::new(&event, subsumed).ok_or_else(|| {
                        self.corrupt_row(key, seq, "the event carries no compaction")
                    })?;
                    entries.push(entry);
                }
                Ok(entries)
            },
        )
        .await
    }

    /// Records a shadow-mode decision beside the session. The session row is locked
    /// (`FOR UPDATE`) so that concurrent recorders number their decisions one after another.
    pub(crate) async fn record(
        &self,
        key: &SessionKey,
        record: &DecisionRecord,
    ) -> Result<(), SessionStoreError> {
        let body = serde_json::to_string(record)
            .map_err(|e| self.serialize_error(key, "a shadow decision", e))?;
        let op = || format!("recording a shadow decision for session {key}");
        let op: Operation<'_> = &op;
        let mut client = self.client(op).await?;
        let result = self.record_on(&mut client, key, &body, op).await;
        self.release(client, &result);
        result
    }

    async fn record_on(
        &self,
        client: &mut Object,
        key: &SessionKey,
        body: &str,
        op: Operation<'_>,
    ) -> Result<(), SessionStoreError> {
        let tx = client.transaction().await.map_err(self.pg(op))?;
        let row = tx
            .query_opt(
                "SELECT pk FROM sessions WHERE app_name = $1 AND user_id = $2 \
                 AND session_id = $3 FOR UPDATE",
                &[&key.app_name, &key.user_id, &key.session_id],
            )
            .await
            .map_err(self.pg(op))?
            .ok_or_else(|| self.not_found(key))?;
        let pk: i64 = self.column(&row, 0, op)?;
        tx.execute(
            "INSERT INTO decisions (session_pk, seq, body) VALUES ($1, \
             (SELECT coalesce(max(seq), 0) + 1 FROM decisions WHERE session_pk = $1), $2)",
            &[&pk, &body],
        )
        .await
        .map_err(self.pg(op))?;
        tx.commit().await.map_err(self.pg(op))?;
        Ok(())
    }

    /// The session's shadow-mode decisions, oldest first.
    pub(crate) async fn recorded(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<DecisionRecord>, SessionStoreError> {
        self.read_session(key, "reading the shadow decisions", async |tx, row, op| {
            let rows = tx
                .query(
                    "SELECT seq, body FROM decisions WHERE session_pk = $1 ORDER BY seq",
                    &[&row.pk],
                )
                .await
                .map_err(self.pg_named(op))?;
            rows.iter()
                .map(|r| {
                    let seq: i64 = self.column(r, 0, op)?;
                    serde_json::from_str(self.column(r, 1, op)?).map_err(|source| {
                        SessionStoreError::CorruptEvent {
                            path: self.path(),
                            key: Box::new(key.clone()),
                            revision: seq.unsigned_abs(),
                            event_id: format!("shadow decision {seq}"),
                            source,
                        }
                    })
                })
                .collect()
        })
        .await
    }

    /// Sessions whose newest turn is open and that nothing was appended to before `before`
    /// (the port's `open_turns`; one read of the sessions table).
    pub(crate) async fn open_turns(
        &self,
        before: compaction_core::Timestamp,
    ) -> Result<Vec<SessionKey>, SessionStoreError> {
        let op = || "listing the sessions with an open turn".to_owned();
        let op: &(dyn Fn() -> String + Sync) = &op;
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT app_name, user_id, session_id FROM sessions \
                 WHERE open_turn = 1 AND updated_at < $1 ORDER BY app_name, user_id, session_id",
                &[&before.seconds()],
            )
            .await
            .map_err(self.pg(op))?;
        rows.iter()
            .map(|r| {
                Ok(SessionKey::new(
                    self.column::<String>(r, 0, op)?,
                    self.column::<String>(r, 1, op)?,
                    self.column::<String>(r, 2, op)?,
                ))
            })
            .collect()
    }
}
