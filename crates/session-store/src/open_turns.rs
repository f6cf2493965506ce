//! Sessions a crash may have left with an open turn (the port's `open_turns`): the gate header
//! already says whether a session's newest turn is open, so the answer is one read of the
//! sessions table, never of their events.

use compaction_core::{SessionKey, Timestamp};

use crate::error::SessionStoreError;
use crate::store::SqliteStore;

/// Sessions whose header says "open, not completed" (code 1)
/// and whose last append is older than the bound.
pub(crate) const OPEN_TURNS_SQL: &str = "SELECT app_name, user_id, session_id FROM sessions \
     WHERE open_turn = 1 AND updated_at < ?1 ORDER BY app_name, user_id, session_id";

impl SqliteStore {
    /// Sessions whose newest turn is open and that nothing was appended to before `before`
    /// (the store's clock: `updated_at`).
    pub fn open_turns(&self, before: Timestamp) -> Result<Vec<SessionKey>, SessionStoreError> {
        let op = || "listing the sessions with an open turn".to_owned();
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(OPEN_TURNS_SQL)
            .map_err(self.sqlite_error(op))?;
        let rows = stmt
            .query_map((before.seconds(),), |r| {
                Ok(SessionKey::new(
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
            .map_err(self.sqlite_error(op))?;
        Ok(rows)
    }
}
