//! ADK's append rule with no database driver, executed by both ADK stores (the SQLite file,
//! `adk::store`, and the PostgreSQL tables, `postgres::adk`) in their own transaction: which
//! events ADK would load, the revision check against `update_time`, and the refusal of an event
//! not strictly later than it. The stores own only how the row is locked, read and written.
//!
//! The plan, in the store's transaction:
//! 1. [`AdkAppend::new`] refuses, before any I/O, an event ADK would not load
//!    ([`crate::adk_shape::refusal`]) or whose timestamp is out of range, and encodes it;
//! 2. the store reads (on PostgreSQL: locks) the session's `update_time`, and
//!    [`AdkAppend::check`] refuses a missing session, a stale revision, or a timestamp that does
//!    not follow `update_time`;
//! 3. the store inserts the row ([`AdkAppend::duplicate`] names a taken event id), sets
//!    `update_time` to the event's timestamp, and commits: the new revision is
//!    [`AdkAppend::revision`].

use std::path::PathBuf;

use compaction_core::{Event, Revision, SessionKey, Timestamp};

use crate::adk_shape::{refusal, seconds_to_micros};
use crate::error::SessionStoreError;

/// One event's append to an ADK session.
pub(crate) struct AdkAppend<'a> {
    /// The database, as errors name it.
    path: PathBuf,
    key: &'a SessionKey,
    event: &'a Event,
    /// The event's timestamp in microseconds since the epoch: the new `update_time`.
    pub(crate) micros: i64,
    /// The event as ADK's `event_data` JSON.
    pub(crate) body: String,
}

impl<'a> AdkAppend<'a> {
    /// The append of `event` to `key`'s session in the database `path`, or why ADK would not
    /// load it.
    pub(crate) fn new(
        path: PathBuf,
        key: &'a SessionKey,
        event: &'a Event,
    ) -> Result<Self, SessionStoreError> {
        let unsupported = |reason: String| SessionStoreError::AdkUnsupportedEvent {
            path: path.clone(),
            key: Box::new(key.clone()),
            event_id: event.id.clone(),
            reason,
        };
        if let Some(reason) = refusal(event) {
            return Err(unsupported(reason));
        }
        let seconds = event.timestamp.seconds();
        let micros = seconds_to_micros(seconds)
            .ok_or_else(|| unsupported(format!("timestamp {seconds} is out of range")))?;
        let body = serde_json::to_string(event).map_err(|source| SessionStoreError::Serialize {
            path: path.clone(),
            key: Box::new(key.clone()),
            what: format!("event {:?}", event.id),
            source,
        })?;
        Ok(AdkAppend {
            path,
            key,
            event,
            micros,
            body,
        })
    }

    /// Refuses the append unless the session exists at revision `expected` (`actual`, its
    /// stored `update_time`) and the event is strictly later: ADK's `update_time` is its latest
    /// event's timestamp, so that an ADK process holding the old session sees it moved on.
    pub(crate) fn check(
        &self,
        actual: Option<Revision>,
        expected: Revision,
    ) -> Result<(), SessionStoreError> {
        let Some(actual) = actual else {
            return Err(SessionStoreError::NotFound {
                path: self.path.clone(),
                key: self.key.clone(),
            });
        };
        if actual != expected {
            return Err(SessionStoreError::Stale {
                path: self.path.clone(),
                key: self.key.clone(),
                expected,
                actual,
            });
        }
        if self.micros <= 0 || self.micros.unsigned_abs() <= actual.0 {
            return Err(SessionStoreError::NonIncreasingTimestamp {
                path: self.path.clone(),
                key: Box::new(self.key.clone()),
                event_id: self.event.id.clone(),
                latest: Timestamp::new(actual.0 as f64 / 1e6).unwrap_or(Timestamp::EPOCH),
                offered: self.event.timestamp,
            });
        }
        Ok(())
    }

    /// The session already holds an event with this id.
    pub(crate) fn duplicate(&self) -> SessionStoreError {
        SessionStoreError::DuplicateEvent {
            path: self.path.clone(),
            key: self.key.clone(),
            event_id: self.event.id.clone(),
        }
    }

    /// The session's revision once the append commits.
    pub(crate) fn revision(&self) -> Revision {
        Revision(self.micros.unsigned_abs())
    }
}
