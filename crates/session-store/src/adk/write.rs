//! [`AdkStore`]'s writes: a new session as ADK's `create_session` makes it, and one event's
//! append in one `BEGIN IMMEDIATE` transaction (the rule is [`crate::adk_append`]'s).

use compaction_core::{Event, Revision, Session, SessionKey};
use rusqlite::{TransactionBehavior, params};
use serde_json::{Map, Value};

use super::schema::{self, AdkFlavor};
use super::store::AdkStore;
use crate::adk_append::AdkAppend;
use crate::error::SessionStoreError;

impl AdkStore {
    /// Encodes microseconds for a time column of this flavor.
    fn time_value(&self, micros: i64, seconds: f64) -> rusqlite::types::Value {
        match self.inner.flavor {
            AdkFlavor::Database => {
                rusqlite::types::Value::Text(schema::format_datetime_micros(micros))
            }
            AdkFlavor::Sqlite => rusqlite::types::Value::Real(seconds),
        }
    }

    /// Creates an empty session the way ADK's `create_session` does, including (for
    /// `DatabaseSessionService`) the `app_states` and `user_states` rows ADK's next append
    /// requires. Returns it at its revision.
    pub fn create_session(
        &self,
        key: &SessionKey,
        state: Map<String, Value>,
    ) -> Result<Session, SessionStoreError> {
        let op = || format!("creating session {key}");
        let json =
            serde_json::to_string(&state).map_err(|source| SessionStoreError::Serialize {
                path: self.inner.path.clone(),
                key: Box::new(key.clone()),
                what: "state".to_owned(),
                source,
            })?;
        let now = crate::row::now_seconds();
        let micros = schema::seconds_to_micros(now).unwrap_or(0);
        let time = self.time_value(micros, now);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite_error(op))?;
        if self.inner.flavor == AdkFlavor::Database {
            tx.execute(
                "INSERT OR IGNORE INTO app_states (app_name, state, update_time) VALUES (?1, '{}', ?2)",
                params![key.app_name, time],
            )
            .and_then(|_| {
                tx.execute(
                    "INSERT OR IGNORE INTO user_states (app_name, user_id, state, update_time) \
                     VALUES (?1, ?2, '{}', ?3)",
                    params![key.app_name, key.user_id, time],
                )
            })
            .map_err(self.sqlite_error(op))?;
        }
        let inserted = tx.execute(
            "INSERT INTO sessions (app_name, user_id, id, state, create_time, update_time) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
            params![key.app_name, key.user_id, key.session_id, json, time],
        );
        match inserted {
            Ok(_) => {}
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                return Err(SessionStoreError::AlreadyExists {
                    path: self.inner.path.clone(),
                    key: key.clone(),
                });
            }
            Err(e) => return Err(self.sqlite_error(op)(e)),
        }
        tx.commit().map_err(self.sqlite_error(op))?;
        Ok(Session {
            key: key.clone(),
            state,
            events: Vec::new(),
            revision: Revision(micros.unsigned_abs()),
        })
    }

    /// Appends `event` if the session's `update_time` is still `expected` (microseconds),
    /// then sets `update_time` to the event's timestamp, all in one `BEGIN IMMEDIATE`
    /// transaction. Returns the new revision. The event's timestamp must be later than the
    /// stored `update_time`, or ADK could not see that the session moved on.
    pub fn append_event(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: &Event,
    ) -> Result<Revision, SessionStoreError> {
        let plan = AdkAppend::new(self.inner.path.clone(), key, event)?;
        let op = || format!("appending event {:?} to session {key}", event.id);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite_error(op))?;
        plan.check(self.read_revision(&tx, key)?, expected)?;
        let time = self.time_value(plan.micros, event.timestamp.seconds());
        let inserted = tx.execute(
            "INSERT INTO events (id, app_name, user_id, session_id, invocation_id, timestamp, event_data) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                event.id,
                key.app_name,
                key.user_id,
                key.session_id,
                event.invocation_id,
                time,
                plan.body
            ],
        );
        match inserted {
            Ok(_) => {}
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                return Err(plan.duplicate());
            }
            Err(e) => return Err(self.sqlite_error(op)(e)),
        }
        tx.execute(
            "UPDATE sessions SET update_time = ?1 WHERE app_name = ?2 AND user_id = ?3 AND id = ?4",
            params![time, key.app_name, key.user_id, key.session_id],
        )
        .map_err(self.sqlite_error(op))?;
        tx.commit().map_err(self.sqlite_error(op))?;
        let to = plan.revision();
        self.inner.tail.advance(key, expected, to, event);
        Ok(to)
    }
}
