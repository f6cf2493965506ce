//! The SQLite recall index (migration 4): its schema, how one event is indexed in the append's
//! transaction, and the backfill of a file migrated to it. The search over it is
//! `recall.rs`; keeping the index apart lets the schema's migrations depend on it without
//! depending on the store.

use compaction_core::Event;
use compaction_core::store_support::{scan, searchable_text, starts_turn};
use rusqlite::Transaction;

/// The schema version that brings the index.
pub(crate) const RECALL_VERSION: i64 = 4;

/// Migration 4: the text table, its FTS5 index and triggers, and the turn-start flag.
pub(crate) const MIGRATION: &str = r#"
    ALTER TABLE events ADD COLUMN turn_start INTEGER NOT NULL DEFAULT 0;

    CREATE TABLE recall_text (
        id          INTEGER PRIMARY KEY,
        session_pk  INTEGER NOT NULL,
        seq         INTEGER NOT NULL,
        text        TEXT    NOT NULL,
        UNIQUE (session_pk, seq),
        FOREIGN KEY (session_pk, seq) REFERENCES events (session_pk, seq) ON DELETE CASCADE
    );

    CREATE VIRTUAL TABLE recall_fts USING fts5(
        text, content = 'recall_text', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 0'
    );

    CREATE TRIGGER recall_text_insert AFTER INSERT ON recall_text BEGIN
        INSERT INTO recall_fts (rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER recall_text_delete AFTER DELETE ON recall_text BEGIN
        INSERT INTO recall_fts (recall_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;

    -- Turn numbers: the turn starts of the view, in append order.
    CREATE INDEX events_turn_starts ON events (session_pk, seq)
        WHERE in_view = 1 AND turn_start = 1;
"#;

/// Indexes one appended event (inside the append's transaction): its turn-start flag and its
/// searchable text.
pub(crate) fn index_event(
    tx: &Transaction<'_>,
    pk: i64,
    seq: i64,
    event: &Event,
) -> rusqlite::Result<()> {
    if starts_turn(event) {
        tx.prepare_cached("UPDATE events SET turn_start = 1 WHERE session_pk = ?1 AND seq = ?2")?
            .execute((pk, seq))?;
    }
    if scan::searchable(event, true) {
        let text = searchable_text(event);
        if !text.is_empty() {
            tx.prepare_cached(
                "INSERT INTO recall_text (session_pk, seq, text) VALUES (?1, ?2, ?3)",
            )?
            .execute((pk, seq, text))?;
        }
    }
    Ok(())
}

/// Builds the index for every stored event (migration 4, in its transaction). A body that
/// does not parse fails the migration, naming the event; nothing is written then.
pub(crate) fn backfill(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let rows: Vec<(i64, i64, String, String)> = tx
        .prepare("SELECT session_pk, seq, event_id, body FROM events ORDER BY session_pk, seq")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (pk, seq, id, body) in rows {
        let event: Event = serde_json::from_str(&body).map_err(|e| {
            rusqlite::Error::ToSqlConversionFailure(
                format!("event {id:?} of session row {pk} does not parse: {e}").into(),
            )
        })?;
        index_event(tx, pk, seq, &event)?;
    }
    Ok(())
}
