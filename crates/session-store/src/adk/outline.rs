//! [`AdkStore`]'s outline read, incremental by SQLite's rowid (issue 29 item 2).
//!
//! ADK's `events` table is a rowid table that ADK only ever inserts into (a deleted session takes
//! all its rows), and SQLite numbers a new row one past the table's greatest rowid (at random
//! only once rowid `i64::MAX` is taken). So while a row a read saw is still there, every row
//! inserted since has a greater rowid. A read keeps two such rows in its [`Checkpoint`] (kept in
//! memory for `compaction serve`, and in the state directory for the one-shot `evaluate`): the
//! session's row with the greatest rowid, and the file's (the *frontier*: every row up to it was
//! in the read's snapshot, so the session's later rows lie above it). A read continues the
//! checkpoint when
//! - the session's row is still that session's event of that id (a vacuumed file renumbers
//!   rowids, a deleted and re-created session has other rows), and no rowid is `i64::MAX`;
//! - every new row sorts after the last known one in ADK's order (timestamp, then `id` or
//!   insertion), so the known rows keep their positions;
//! - no new row rewinds, and the checkpoint's whole read is younger than a day;
//!
//! and otherwise outlines the whole session, as before. The new rows are the session's rows above
//! the frontier when the frontier row is still the same row (its event id and session), else
//! (the file's newest rows were deleted since, so new rows may have taken their numbers) above
//! the session's own greatest rowid. They are read by the rowid range (`NOT INDEXED`: a seek on
//! the table's b-tree) when at most [`MAX_ROWID_RANGE`] rows of the file lie above that bound,
//! else through the session's index (ADK's `(app_name, user_id, session_id, …)` index or primary
//! key), which holds the rowid, so that the older entries are passed over in the index: the cost
//! is the smaller of the rows appended to the file since the session's last read and the
//! session's index entries, never the session's rows themselves (docs/BENCHMARKS.md).

use compaction_core::{Event, Revision, SessionKey, scoped_user_messages};
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::read::EventRow;
use super::schema::{self, AdkFlavor};
use super::store::AdkStore;
use crate::adk_outline::{Checkpoint, KEPT_IN_MEMORY, Outlines, fresh};
use crate::error::SessionStoreError;
use crate::tail_memo::Tail;

/// Up to this many rows appended to the file since the session's checkpoint (by rowid), the new
/// rows are read by the table's rowid range; beyond (a long session's evaluation after another
/// session's many turns), by the session's index, whose cost is its entries, not the file's.
const MAX_ROWID_RANGE: i64 = 4_096;

/// A `timestamp` column value as stored (TEXT for `DatabaseSessionService`, REAL for
/// `SqliteSessionService`), kept to compare new rows with in SQLite's own order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Column {
    Text(String),
    Real(f64),
    Integer(i64),
}

impl Column {
    fn of(value: ValueRef<'_>) -> Option<Self> {
        match value {
            ValueRef::Text(t) => Some(Column::Text(String::from_utf8_lossy(t).into_owned())),
            ValueRef::Real(x) => Some(Column::Real(x)),
            ValueRef::Integer(i) => Some(Column::Integer(i)),
            ValueRef::Null | ValueRef::Blob(_) => None,
        }
    }

    fn sql(&self) -> SqlValue {
        match self {
            Column::Text(t) => SqlValue::Text(t.clone()),
            Column::Real(x) => SqlValue::Real(*x),
            Column::Integer(i) => SqlValue::Integer(*i),
        }
    }
}

/// A column value as text, whatever it holds (another program's row need not hold text).
fn lossy_text(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(x) => x.to_string(),
        ValueRef::Null => String::new(),
    }
}

/// Where an SQLite read resumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Resume {
    /// The greatest rowid among the known rows, and that row's event id.
    max_rowid: i64,
    max_rowid_id: String,
    /// The last known row in ADK's order: its `timestamp` column and `id`.
    last_timestamp: Column,
    last_id: String,
    /// The file's row with the greatest rowid when the read ran (`None` in an empty file, and
    /// in a checkpoint an older build kept).
    #[serde(default)]
    frontier: Option<FileRow>,
}

/// One row of the `events` table, by rowid and what it holds: the same row as long as all of it
/// matches (ADK never updates an event; an event id is unique in its session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileRow {
    rowid: i64,
    id: String,
    app_name: String,
    user_id: String,
    session_id: String,
}

impl FileRow {
    /// `key`'s event `id` at `rowid`.
    fn of(rowid: i64, id: &str, key: &SessionKey) -> Self {
        FileRow {
            rowid,
            id: id.to_owned(),
            app_name: key.app_name.clone(),
            user_id: key.user_id.clone(),
            session_id: key.session_id.clone(),
        }
    }
}

impl Resume {
    /// `row` read after what this resume knew.
    fn after(mut self, rowid: i64, id: &str, timestamp: Option<Column>) -> Self {
        if rowid > self.max_rowid {
            self.max_rowid = rowid;
            self.max_rowid_id = id.to_owned();
        }
        if let Some(timestamp) = timestamp {
            self.last_timestamp = timestamp;
            self.last_id = id.to_owned();
        }
        self
    }
}

/// The checkpoint of one session in one file.
pub(crate) type SqliteCheckpoint = Checkpoint<Resume>;

impl AdkStore {
    /// One outline read of the session (continuing its checkpoint when it still fits), then the
    /// rows of its rolling tail and scoped-user candidates whole.
    pub(super) fn read_tail(
        &self,
        conn: &Connection,
        key: &SessionKey,
        revision: Revision,
    ) -> Result<Tail, SessionStoreError> {
        let now = crate::row::now_seconds();
        let newest = self.newest_row(conn, key)?;
        // Once rowid `i64::MAX` is taken SQLite numbers new rows at random: no rowid bound holds.
        let in_order = newest.as_ref().is_none_or(|row| row.rowid < i64::MAX);
        let checkpoint = self
            .checkpoint(key)
            .filter(|c| in_order && fresh(c.whole_read_at, now));
        let continued = match checkpoint {
            Some(checkpoint) if self.still_fits(conn, key, &checkpoint)? => {
                self.outline_new_rows(conn, key, checkpoint, newest.as_ref())?
            }
            _ => None,
        };
        let (outlines, rows, resume) = match continued {
            Some(read) => read,
            None => self.outline_whole(conn, key, now)?,
        };
        // Every row up to the file's newest was in this read's snapshot.
        let resume = resume.map(|resume| Resume {
            frontier: newest.filter(|_| in_order),
            ..resume
        });
        let positions = |indexes: Vec<usize>| -> Vec<(usize, String)> {
            indexes
                .into_iter()
                .map(|i| (outlines.positions[i], outlines.events[i].id.clone()))
                .collect()
        };
        let events = self.read_whole(conn, key, positions(outlines.rolling_tail()))?;
        // Candidates are few (a user's message filed in a scope; ADK authors tool results
        // by the agent): only they are read whole to look at their content.
        let candidates = self.read_whole(conn, key, positions(outlines.scoped_candidates()))?;
        let scoped = outlines.scoped(scoped_user_messages(&candidates));
        if let Some(resume) = resume
            && let Some(checkpoint) = outlines.checkpoint(rows, &scoped, resume)
        {
            self.keep_checkpoint(key, checkpoint);
        }
        Ok(Tail {
            key: key.clone(),
            revision,
            events,
            prompt_tokens: outlines.prompt_tokens(),
            scoped,
        })
    }

    /// The state-directory entry of `key`'s checkpoint, and the key it is stored under.
    fn checkpoint_entry(&self, key: &SessionKey) -> Option<(std::path::PathBuf, String)> {
        let dir = self.inner.state_dir.as_deref()?;
        let file = std::fs::canonicalize(&self.inner.path).ok()?;
        let stored = format!(
            "{}\n{}\n{}\n{}",
            file.display(),
            key.app_name,
            key.user_id,
            key.session_id
        );
        Some((crate::state_dir::entry(dir, "adk-outline", &stored), stored))
    }

    /// The checkpoint of `key`: kept in memory, else in the state directory.
    fn checkpoint(&self, key: &SessionKey) -> Option<SqliteCheckpoint> {
        if let Some(kept) = self.checkpoints().get(key) {
            return Some(kept.clone());
        }
        let (entry, stored) = self.checkpoint_entry(key)?;
        crate::state_dir::read(&entry, &stored)
    }

    fn checkpoints(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<SessionKey, SqliteCheckpoint>> {
        self.inner
            .checkpoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `checkpoint` in memory and in the state directory.
    fn keep_checkpoint(&self, key: &SessionKey, checkpoint: SqliteCheckpoint) {
        if let Some((entry, stored)) = self.checkpoint_entry(key) {
            crate::state_dir::write(&entry, &stored, &checkpoint);
        }
        let mut kept = self.checkpoints();
        if kept.len() >= KEPT_IN_MEMORY && !kept.contains_key(key) {
            kept.clear();
        }
        kept.insert(key.clone(), checkpoint);
    }

    /// True when the row with the checkpoint's greatest rowid is still `key`'s event of that id.
    fn still_fits(
        &self,
        conn: &Connection,
        key: &SessionKey,
        checkpoint: &SqliteCheckpoint,
    ) -> Result<bool, SessionStoreError> {
        let resume = &checkpoint.resume;
        self.is_there(
            conn,
            key,
            &FileRow::of(resume.max_rowid, &resume.max_rowid_id, key),
        )
    }

    /// True when `row` is still in the file, all of it at its rowid.
    fn is_there(
        &self,
        conn: &Connection,
        key: &SessionKey,
        row: &FileRow,
    ) -> Result<bool, SessionStoreError> {
        let op = || format!("checking what is known of session {key}");
        conn.prepare_cached(
            "SELECT 1 FROM events WHERE rowid = ?1 AND id = ?2 \
             AND app_name = ?3 AND user_id = ?4 AND session_id = ?5",
        )
        .and_then(|mut stmt| {
            stmt.query_row(
                params![row.rowid, row.id, row.app_name, row.user_id, row.session_id],
                |_| Ok(()),
            )
            .optional()
        })
        .map(|found| found.is_some())
        .map_err(self.sqlite_error(op))
    }

    /// The file's row with the greatest rowid (a seek to the end of the table's b-tree).
    fn newest_row(
        &self,
        conn: &Connection,
        key: &SessionKey,
    ) -> Result<Option<FileRow>, SessionStoreError> {
        let op = || format!("reading the newest row of the file for session {key}");
        conn.prepare_cached(
            "SELECT rowid, id, app_name, user_id, session_id FROM events \
             ORDER BY rowid DESC LIMIT 1",
        )
        .and_then(|mut stmt| {
            stmt.query_row([], |row| {
                // A value that is not text is kept as text: it then only fails `is_there`, and
                // the read falls back to the session's own greatest rowid.
                let text = |i| row.get_ref(i).map(lossy_text);
                Ok(FileRow {
                    rowid: row.get(0)?,
                    id: text(1)?,
                    app_name: text(2)?,
                    user_id: text(3)?,
                    session_id: text(4)?,
                })
            })
            .optional()
        })
        .map_err(self.sqlite_error(op))
    }

    /// The rowid above which the session's rows are new: the checkpoint's frontier while that
    /// row is still there (no row was numbered below it since), else the session's own greatest.
    fn new_rows_above(
        &self,
        conn: &Connection,
        key: &SessionKey,
        resume: &Resume,
    ) -> Result<i64, SessionStoreError> {
        match &resume.frontier {
            Some(frontier)
                if frontier.rowid > resume.max_rowid && self.is_there(conn, key, frontier)? =>
            {
                Ok(frontier.rowid)
            }
            _ => Ok(resume.max_rowid),
        }
    }

    /// The outlines continuing `checkpoint` with the rows appended since, or `None` when they do
    /// not simply follow it (a row sorting before the last known one, a rewind).
    fn outline_new_rows(
        &self,
        conn: &Connection,
        key: &SessionKey,
        checkpoint: SqliteCheckpoint,
        newest: Option<&FileRow>,
    ) -> Result<Option<(Outlines, usize, Option<Resume>)>, SessionStoreError> {
        let op = || format!("reading the new events of session {key}");
        let resume = &checkpoint.resume;
        let above = self.new_rows_above(conn, key, resume)?;
        let mut bound: Vec<SqlValue> = vec![
            SqlValue::Text(key.app_name.clone()),
            SqlValue::Text(key.user_id.clone()),
            SqlValue::Text(key.session_id.clone()),
            SqlValue::Integer(above),
            resume.last_timestamp.sql(),
        ];
        // A new row sorting before the last known one would move the known rows' positions.
        let (order, before) = match self.inner.flavor {
            AdkFlavor::Database => {
                bound.push(SqlValue::Text(resume.last_id.clone()));
                (
                    "timestamp ASC, id ASC",
                    "(timestamp < ?5 OR (timestamp = ?5 AND id <= ?6))",
                )
            }
            // Ties go by insertion: a new row with the same timestamp sorts after.
            AdkFlavor::Sqlite => ("timestamp ASC, rowid ASC", "(timestamp < ?5)"),
        };
        // The rows after the known ones: by the table's rowid range when few rows were
        // appended to the file since (other sessions' included), else by the session's index
        // (`+rowid` keeps the planner off the rowid range; the index holds the rowid, so rows
        // before the range are passed over in the index without reading them).
        let appended = newest.map_or(0, |row| row.rowid).saturating_sub(above);
        let (table, rowid) = if appended <= MAX_ROWID_RANGE {
            ("events NOT INDEXED", "rowid")
        } else {
            ("events", "+rowid")
        };
        let sql = format!(
            "SELECT id, invocation_id, timestamp, event_data, rowid, {before} FROM {table} \
             WHERE {rowid} > ?4 AND app_name = ?1 AND user_id = ?2 \
             AND session_id = ?3 ORDER BY {order}"
        );
        let mut stmt = conn.prepare_cached(&sql).map_err(self.sqlite_error(op))?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(bound))
            .map_err(self.sqlite_error(op))?;
        let mut outlines = Outlines::continuing(&checkpoint);
        let mut position = checkpoint.rows;
        let mut resume = checkpoint.resume;
        while let Some(row) = rows.next().map_err(self.sqlite_error(op))? {
            let sorts_before: bool = row.get(5).map_err(self.sqlite_error(op))?;
            if sorts_before {
                return Ok(None);
            }
            let row = EventRow::read(row, position).map_err(self.sqlite_error(op))?;
            resume = resume.after(row.rowid, &row.id, Column::of(row.column_timestamp));
            outlines.push(position, self.outline(key, row)?);
            position += 1;
        }
        Ok((!outlines.new_rows_rewind()).then_some((outlines, position, Some(resume))))
    }

    /// The outlines of every row of the session.
    fn outline_whole(
        &self,
        conn: &Connection,
        key: &SessionKey,
        now: f64,
    ) -> Result<(Outlines, usize, Option<Resume>), SessionStoreError> {
        let mut outlines = Outlines::whole(now);
        let mut resume: Option<Resume> = None;
        let mut rows = 0;
        self.for_each_event_row(conn, key, |row| {
            let (rowid, id) = (row.rowid, row.id.clone());
            let timestamp = Column::of(row.column_timestamp);
            resume = match (resume.take(), timestamp) {
                (Some(known), timestamp) => Some(known.after(rowid, &id, timestamp)),
                (None, Some(timestamp)) => Some(Resume {
                    max_rowid: rowid,
                    max_rowid_id: id.clone(),
                    last_timestamp: timestamp,
                    last_id: id.clone(),
                    frontier: None,
                }),
                (None, None) => None,
            };
            outlines.push(row.position, self.outline(key, row)?);
            rows += 1;
            Ok(())
        })?;
        Ok((outlines, rows, resume))
    }

    /// The outline of `row` ([`crate::adk_shape::outline_from_row`]).
    fn outline(&self, key: &SessionKey, row: EventRow<'_>) -> Result<Event, SessionStoreError> {
        let id = row.id.clone();
        crate::adk_shape::outline_from_row(row.id, row.invocation_id, row.data, || {
            schema::column_seconds(row.column_timestamp)
        })
        .map_err(|problem| self.row_problem(key, row.position, &id, problem))
    }

    /// The rows of `wanted` (position, event id) whole, by primary key.
    fn read_whole(
        &self,
        conn: &Connection,
        key: &SessionKey,
        wanted: Vec<(usize, String)>,
    ) -> Result<Vec<Event>, SessionStoreError> {
        let op = || format!("reading the live tail of session {key}");
        let mut stmt = conn
            .prepare_cached(
                "SELECT invocation_id, timestamp, event_data FROM events \
                 WHERE app_name = ?1 AND user_id = ?2 AND session_id = ?3 AND id = ?4",
            )
            .map_err(self.sqlite_error(op))?;
        let mut events = Vec::with_capacity(wanted.len());
        for (position, id) in wanted {
            let (invocation, column_ts, data) = stmt
                .query_row(
                    params![key.app_name, key.user_id, key.session_id, id],
                    |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            schema::column_seconds(row.get_ref(1)?),
                            row.get::<_, Option<String>>(2)?,
                        ))
                    },
                )
                .map_err(self.sqlite_error(op))?;
            events.push(self.parse_event(
                key,
                position,
                id,
                invocation,
                column_ts,
                data.as_deref(),
            )?);
        }
        Ok(events)
    }
}
