//! Lossless recall on the PostgreSQL store: search through a `tsvector` column with a GIN
//! index, expansion through the view indexes. The answers equal compaction-core's
//! `recall::scan` of the whole history (tests/recall_postgres.rs checks it on random
//! histories); hits are ranked by `ts_rank` (ties: append order), not SQLite's bm25.
//!
//! # The index (migration 2)
//! - `events.recall tsvector`: the distinct words of the event's searchable text
//!   (`compaction_core::store_support::words` of `searchable_text`), computed in Rust at the append and
//!   passed as one space-separated parameter, turned into lexemes by `array_to_tsvector`, so
//!   PostgreSQL's parser and its text search configurations never touch them: no stemming, no
//!   stop words, no special tokens for URLs, paths or decimals, and the same words whatever the
//!   database's encoding or locale. NULL for what a search never looks at (compactions,
//!   rewinds, events without text). A GIN index (`events_recall`) answers `@@`.
//! - `events.turn_start` (partial index `events_turn_starts`): the event opens a turn
//!   (`compaction_core::store_support::starts_turn`), so a hit's turn number is one indexed count
//!   and a turn range two indexed lookups, as on SQLite.
//! - A query is compaction-core's list of words, each a quoted `tsquery` lexeme joined by `&`:
//!   a word holds only letters and digits, so nothing a user types is `tsquery` syntax.
//! - A vector is bounded ([`MAX_VECTOR_BYTES`] of lexemes; PostgreSQL refuses one over 1 MiB):
//!   an event with more distinct words keeps the first ones and the marker [`OVERFLOW`], and a
//!   search of a session holding such an event scans the session instead, so the append never
//!   fails and no hit is lost.
//!
//! Written by the append's transaction; migration 2 backfills the stored events from their
//! bodies in Rust, in batches, inside the migration's transaction.
//!
//! # What this module must never do
//! It never lets a query's text reach PostgreSQL as syntax and never shows an SQL error for a
//! bad query (compaction-core refuses those before a store is asked).

use compaction_core::ExpandError;
use compaction_core::store_support::CompactionRange;
use compaction_core::store_support::scan;
use compaction_core::store_support::starts_turn;
use compaction_core::store_support::{Coverage, searchable_text, snippet, words};
use compaction_core::{Event, SessionKey, Timestamp};
use compaction_core::{RecallHit, RecallQuery, RecalledEvent};
use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use crate::error::SessionStoreError;
use crate::postgres::PostgresStore;
use crate::row::SessionRow;

/// The schema version that brings the index.
pub(super) const RECALL_VERSION: i64 = 2;

/// Migration 2: the lexeme vector with its GIN index, and the turn-start flag.
pub(super) const MIGRATION: &str = r#"
    ALTER TABLE events ADD COLUMN turn_start BOOLEAN NOT NULL DEFAULT FALSE;
    ALTER TABLE events ADD COLUMN recall tsvector;
    CREATE INDEX events_recall ON events USING gin (recall);
    -- Turn numbers: the turn starts of the view, in append order.
    CREATE INDEX events_turn_starts ON events (session_pk, seq) WHERE in_view AND turn_start;
"#;

/// The SQL expression that turns the space-separated lexemes of a parameter into the vector.
pub(super) const VECTOR_OF: &str = "array_to_tsvector(string_to_array({}::text, ' '))";

/// The most bytes of lexemes one event's vector holds.
pub(super) const MAX_VECTOR_BYTES: usize = 512 * 1024;

/// The lexeme that marks a vector cut at [`MAX_VECTOR_BYTES`]: `#` is no letter or digit, so
/// no query word ever equals it.
pub(super) const OVERFLOW: &str = "#overflow";

/// The longest word kept as a lexeme (PostgreSQL's limit is 2,047 bytes). A query holds at
/// most 500 characters, so no query word is ever longer.
const MAX_LEXEME_BYTES: usize = 2_000;

/// Events a backfill batch reads and updates at once.
const BACKFILL_BATCH: i64 = 500;

/// The event's lexemes, space-separated, for [`VECTOR_OF`]; `None` when a search never looks
/// at it (see the module docs).
pub(super) fn lexemes(event: &Event) -> Option<String> {
    if !scan::searchable(event, true) {
        return None;
    }
    let text = searchable_text(event);
    let mut seen = std::collections::HashSet::new();
    let (mut out, mut bytes) = (Vec::new(), 0);
    for word in words(&text).filter(|w| w.len() <= MAX_LEXEME_BYTES) {
        if seen.contains(&word) {
            continue;
        }
        if bytes + word.len() > MAX_VECTOR_BYTES {
            out.push(OVERFLOW.to_owned());
            break;
        }
        bytes += word.len();
        seen.insert(word.clone());
        out.push(word);
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// The query as a `tsquery` literal: each word quoted, all required.
fn tsquery(query: &RecallQuery) -> String {
    let quoted: Vec<String> = query.words().iter().map(|w| format!("'{w}'")).collect();
    quoted.join(" & ")
}

/// Builds the index for every stored event (migration 2, in its transaction), reading the
/// bodies in batches in key order. A body that does not parse fails the migration, naming
/// the event; nothing is written then.
pub(super) async fn backfill(
    store: &PostgresStore,
    tx: &Transaction<'_>,
    op: &(dyn Fn() -> String + Sync),
) -> Result<(), SessionStoreError> {
    let read = tx
        .prepare(
            "SELECT e.session_pk, e.seq, e.event_id, e.body, s.app_name, s.user_id, \
             s.session_id FROM events e JOIN sessions s ON s.pk = e.session_pk \
             WHERE (e.session_pk, e.seq) > ($1, $2) ORDER BY e.session_pk, e.seq LIMIT $3",
        )
        .await
        .map_err(store.pg(op))?;
    let write = tx
        .prepare(&format!(
            "UPDATE events e SET turn_start = f.turn_start, recall = {} \
             FROM unnest($1::bigint[], $2::bigint[], $3::boolean[], $4::text[]) \
             AS f(pk, seq, turn_start, words) WHERE e.session_pk = f.pk AND e.seq = f.seq",
            VECTOR_OF.replace("{}", "f.words")
        ))
        .await
        .map_err(store.pg(op))?;
    let mut after = (0_i64, 0_i64);
    loop {
        let rows = tx
            .query(&read, &[&after.0, &after.1, &BACKFILL_BATCH])
            .await
            .map_err(store.pg(op))?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = (store.column(last, 0, op)?, store.column(last, 1, op)?);
        let (mut pks, mut seqs, mut starts, mut lexes) = (vec![], vec![], vec![], vec![]);
        for r in &rows {
            let key = SessionKey::new(
                store.column::<String>(r, 4, op)?,
                store.column::<String>(r, 5, op)?,
                store.column::<String>(r, 6, op)?,
            );
            let (pk, seq): (i64, i64) = (store.column(r, 0, op)?, store.column(r, 1, op)?);
            let (id, body) = (store.column(r, 2, op)?, store.column(r, 3, op)?);
            let event = store.parse_event(&key, seq, id, body)?;
            pks.push(pk);
            seqs.push(seq);
            starts.push(starts_turn(&event));
            lexes.push(lexemes(&event));
        }
        tx.execute(&write, &[&pks, &seqs, &starts, &lexes])
            .await
            .map_err(store.pg(op))?;
    }
}

impl PostgresStore {
    /// The session's raw events `query` matches, best first (`ts_rank`, then append order),
    /// at most `limit`.
    pub(crate) async fn search(
        &self,
        key: &SessionKey,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<RecallHit>, SessionStoreError> {
        let indexed = self
            .read_session(key, "searching", async |tx, row, op| {
                if self.must_scan(tx, row.pk, query, op).await? {
                    return Ok(None);
                }
                let hits = self.indexed_hits(tx, key, &row, query, limit, op).await?;
                Ok(Some(hits))
            })
            .await?;
        match indexed {
            Some(hits) => Ok(hits),
            None => Ok(scan::search_history(
                &self.load_session(key).await?.events,
                query,
                limit,
            )),
        }
    }

    /// True when the index cannot answer `query` for the session: an event's vector was cut
    /// ([`OVERFLOW`]), or pipeline events are asked for on a session with a rewind (whether a
    /// scoped event was rewound is not indexed; rare).
    async fn must_scan(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        query: &RecallQuery,
        op: &str,
    ) -> Result<bool, SessionStoreError> {
        let stmt = tx
            .prepare_cached(&format!(
                "SELECT EXISTS (SELECT 1 FROM events WHERE session_pk = $1 \
                 AND recall @@ '''{OVERFLOW}'''::tsquery) \
                 OR ($2 AND EXISTS (SELECT 1 FROM events WHERE session_pk = $1 AND is_rewind))"
            ))
            .await
            .map_err(self.pg_named(op))?;
        let pipeline = query.includes_pipeline();
        let found = tx
            .query_one(&stmt, &[&pk, &pipeline])
            .await
            .map_err(self.pg_named(op))?;
        self.column(&found, 0, op)
    }

    async fn indexed_hits(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: &SessionRow,
        query: &RecallQuery,
        limit: usize,
        op: &str,
    ) -> Result<Vec<RecallHit>, SessionStoreError> {
        let stmt = tx
            .prepare_cached(
                "SELECT seq, event_id, body FROM events \
                 WHERE session_pk = $1 AND recall @@ $2::text::tsquery \
                 AND (in_view OR ($3 AND scope IS NOT NULL)) \
                 ORDER BY ts_rank(recall, $2::text::tsquery, 1) DESC, seq LIMIT $4",
            )
            .await
            .map_err(self.pg_named(op))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (q, pipeline) = (tsquery(query), query.includes_pipeline());
        let rows = tx
            .query(&stmt, &[&row.pk, &q, &pipeline, &limit])
            .await
            .map_err(self.pg_named(op))?;
        let seqs = rows
            .iter()
            .map(|r| self.column(r, 0, op))
            .collect::<Result<Vec<i64>, _>>()?;
        let turns = self.turns_at(tx, row.pk, &seqs, op).await?;
        let coverage = self.coverage(tx, key, row.pk, op).await?;
        let mut hits = Vec::with_capacity(rows.len());
        for ((r, turn), seq) in rows.iter().zip(turns).zip(seqs) {
            let (id, body) = (self.column(r, 1, op)?, self.column(r, 2, op)?);
            let event = self.parse_event(key, seq, id, body)?;
            let text = searchable_text(&event);
            let covered = coverage.covered_by(event.timestamp);
            hits.push(RecallHit::new(
                &event,
                turn,
                covered,
                snippet(&text, query),
                text,
            ));
        }
        Ok(hits)
    }

    /// The events the compaction `compaction_id` covers, verbatim and in order.
    pub(crate) async fn expand(
        &self,
        key: &SessionKey,
        compaction_id: &str,
    ) -> Result<Vec<RecalledEvent>, SessionStoreError> {
        self.read_session(key, "expanding a compaction", async |tx, row, op| {
            let stmt = tx
                .prepare_cached(
                    "SELECT comp_start, comp_end FROM events WHERE session_pk = $1 \
                     AND event_id = $2 AND in_view AND is_compaction",
                )
                .await
                .map_err(self.pg_named(op))?;
            let found = tx
                .query_opt(&stmt, &[&row.pk, &compaction_id])
                .await
                .map_err(self.pg_named(op))?;
            let Some(found) = found else {
                let unknown = ExpandError::UnknownCompaction(compaction_id.to_owned());
                return Err(self.expand_error(key, unknown));
            };
            let (start, end): (f64, f64) =
                (self.column(&found, 0, op)?, self.column(&found, 1, op)?);
            let filter = "AND ts >= $2 AND ts <= $3";
            self.view_events(tx, key, &row, filter, (&start, &end), op)
                .await
        })
        .await
    }

    /// The coordinator view's events of turns `first..=last`, verbatim and in order.
    pub(crate) async fn expand_turns(
        &self,
        key: &SessionKey,
        first: usize,
        last: usize,
    ) -> Result<Vec<RecalledEvent>, SessionStoreError> {
        self.read_session(key, "expanding turns", async |tx, row, op| {
            let stmt = tx
                .prepare_cached(
                    "SELECT count(*) FROM events WHERE session_pk = $1 AND in_view \
                     AND turn_start",
                )
                .await
                .map_err(self.pg_named(op))?;
            let turns = tx
                .query_one(&stmt, &[&row.pk])
                .await
                .map_err(self.pg_named(op))?;
            let turns: i64 = self.column(&turns, 0, op)?;
            let turns = usize::try_from(turns).unwrap_or(0);
            if first == 0 || first > last || last > turns {
                let out = ExpandError::TurnsOutOfRange { first, last, turns };
                return Err(self.expand_error(key, out));
            }
            let start = self.turn_start_seq(tx, row.pk, first, op).await?;
            let end = self.turn_start_seq(tx, row.pk, last + 1, op).await?;
            let (start, end) = (start.unwrap_or(i64::MAX), end.unwrap_or(i64::MAX));
            let filter = "AND seq >= $2 AND seq < $3";
            self.view_events(tx, key, &row, filter, (&start, &end), op)
                .await
        })
        .await
    }

    /// How many turns of the view start before `ts` (one count over `events_turn_starts`).
    pub(crate) async fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<usize, SessionStoreError> {
        self.read_session(key, "counting turns", async |tx, row, op| {
            let stmt = tx
                .prepare_cached(
                    "SELECT count(*) FROM events WHERE session_pk = $1 AND in_view \
                     AND turn_start AND ts < $2",
                )
                .await
                .map_err(self.pg_named(op))?;
            let count = tx
                .query_one(&stmt, &[&row.pk, &ts.seconds()])
                .await
                .map_err(self.pg_named(op))?;
            let count: i64 = self.column(&count, 0, op)?;
            Ok(usize::try_from(count).unwrap_or(0))
        })
        .await
    }

    fn expand_error(&self, key: &SessionKey, error: ExpandError) -> SessionStoreError {
        SessionStoreError::Expand {
            path: self.path(),
            key: Box::new(key.clone()),
            error,
        }
    }

    /// The view's non-compaction events matching `filter` (over `$2`, `$3`), in append order,
    /// numbered by turn and with their coverage.
    async fn view_events<T: ToSql + Sync>(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        row: &SessionRow,
        filter: &str,
        (a, b): (&T, &T),
        op: &str,
    ) -> Result<Vec<RecalledEvent>, SessionStoreError> {
        let coverage = self.coverage(tx, key, row.pk, op).await?;
        let stmt = tx
            .prepare_cached(&format!(
                "SELECT seq, event_id, body, turn_start FROM events WHERE session_pk = $1 \
                 AND in_view AND NOT is_compaction {filter} ORDER BY seq"
            ))
            .await
            .map_err(self.pg_named(op))?;
        let rows = tx
            .query(&stmt, &[&row.pk, a, b])
            .await
            .map_err(self.pg_named(op))?;
        let mut out = Vec::with_capacity(rows.len());
        let mut turn: Option<usize> = match rows.first() {
            Some(r) => {
                self.turns_at(tx, row.pk, &[self.column(r, 0, op)?], op)
                    .await?[0]
            }
            None => None,
        };
        for (i, r) in rows.iter().enumerate() {
            if i > 0 && self.column::<bool>(r, 3, op)? {
                turn = Some(turn.map_or(1, |t| t + 1));
            }
            let (seq, id, body) = (
                self.column(r, 0, op)?,
                self.column(r, 1, op)?,
                self.column(r, 2, op)?,
            );
            let event = self.parse_event(key, seq, id, body)?;
            let covered = coverage.covered_by(event.timestamp);
            out.push(RecalledEvent::new(event, turn, covered));
        }
        Ok(out)
    }

    /// The turn of each event at `seqs`: the view's turn starts at or before it (one indexed
    /// count each, in one statement).
    async fn turns_at(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        seqs: &[i64],
        op: &str,
    ) -> Result<Vec<Option<usize>>, SessionStoreError> {
        let stmt = tx
            .prepare_cached(
                "SELECT (SELECT count(*) FROM events WHERE session_pk = $1 AND in_view \
                 AND turn_start AND seq <= s.seq) FROM unnest($2::bigint[]) \
                 WITH ORDINALITY AS s(seq, n) ORDER BY s.n",
            )
            .await
            .map_err(self.pg_named(op))?;
        let rows = tx
            .query(&stmt, &[&pk, &seqs])
            .await
            .map_err(self.pg_named(op))?;
        rows.iter()
            .map(|r| {
                let count: i64 = self.column(r, 0, op)?;
                Ok(usize::try_from(count).ok().filter(|&n| n > 0))
            })
            .collect()
    }

    /// The seq of the `n`-th (1-based) turn start of the view, when there is one.
    async fn turn_start_seq(
        &self,
        tx: &Transaction<'_>,
        pk: i64,
        n: usize,
        op: &str,
    ) -> Result<Option<i64>, SessionStoreError> {
        let offset = i64::try_from(n.saturating_sub(1)).unwrap_or(i64::MAX);
        let stmt = tx
            .prepare_cached(
                "SELECT seq FROM events WHERE session_pk = $1 AND in_view AND turn_start \
                 ORDER BY seq LIMIT 1 OFFSET $2",
            )
            .await
            .map_err(self.pg_named(op))?;
        tx.query_opt(&stmt, &[&pk, &offset])
            .await
            .map_err(self.pg_named(op))?
            .map(|r| self.column(&r, 0, op))
            .transpose()
    }

    /// The view's rendered (non-subsumed) compactions.
    async fn coverage(
        &self,
        tx: &Transaction<'_>,
        key: &SessionKey,
        pk: i64,
        op: &str,
    ) -> Result<Coverage, SessionStoreError> {
        let stmt = tx
            .prepare_cached(
                "SELECT seq, event_id, comp_start, comp_end FROM events WHERE session_pk = $1 \
                 AND in_view AND is_compaction AND NOT subsumed",
            )
            .await
            .map_err(self.pg_named(op))?;
        let rows = tx.query(&stmt, &[&pk]).await.map_err(self.pg_named(op))?;
        let mut rendered = Vec::with_capacity(rows.len());
        for r in &rows {
            let seq: i64 = self.column(r, 0, op)?;
            let time = |column: usize| {
                Timestamp::new(self.column::<f64>(r, column, op)?).map_err(|e| {
                    self.corrupt_row(
                        key,
                        seq,
                        &format!("its compaction range is not a time: {e}"),
                    )
                })
            };
            let range = CompactionRange {
                position: seq,
                start: time(2)?,
                end: time(3)?,
            };
            rendered.push((self.column::<String>(r, 1, op)?, range));
        }
        Ok(Coverage::new(rendered))
    }
}
