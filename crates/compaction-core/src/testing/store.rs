//! The in-memory session store: the oracle every real store is proptested against.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use crate::event::Event;
use crate::ports::{SessionStore, StoreError};
use crate::session::{Revision, Session, SessionKey};
use crate::time::Timestamp;

use super::lock;

/// An in-memory store with revision counters. `race_next_append` makes another writer move
/// the session on just before the next append, to exercise the stale path.
///
/// `load_live_tail` answers with [`crate::live_tail`] (as an indexed store would);
/// [`InMemoryStore::serving_whole_histories`] makes it answer with the whole history instead
/// (the port's default), so that tests can check both give the same evaluations.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    sessions: Mutex<HashMap<SessionKey, Session>>,
    whole_histories: bool,
    window_cap: Option<usize>,
    race: Mutex<Option<Event>>,
    decisions: Mutex<HashMap<SessionKey, Vec<crate::ports::DecisionRecord>>>,
    loads: AtomicUsize,
    snapshots: AtomicUsize,
    appends: AtomicUsize,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose `load_live_tail` returns the whole history.
    pub fn serving_whole_histories() -> Self {
        Self {
            whole_histories: true,
            ..Self::default()
        }
    }

    /// An empty store whose live-tail windows are scaled down: a request for 256 events gets
    /// `cap`, for 1,024 gets `4 × cap`, and so on: for tests of the engine's windowed probe.
    pub fn with_window_cap(cap: usize) -> Self {
        Self {
            window_cap: Some(cap),
            ..Self::default()
        }
    }

    /// Stores `session` as is (revision included).
    pub fn insert(&self, session: Session) {
        lock(&self.sessions).insert(session.key.clone(), session);
    }

    /// The stored session.
    pub fn get(&self, key: &SessionKey) -> Option<Session> {
        lock(&self.sessions).get(key).cloned()
    }

    /// Before the next append, a concurrent writer appends `event` (bumping the revision).
    pub fn race_next_append(&self, event: Event) {
        *lock(&self.race) = Some(event);
    }

    /// Calls to `load`.
    pub fn loads(&self) -> usize {
        self.loads.load(Ordering::SeqCst)
    }

    /// Calls to `gate_snapshot`.
    pub fn snapshots(&self) -> usize {
        self.snapshots.load(Ordering::SeqCst)
    }

    /// Successful appends.
    pub fn appends(&self) -> usize {
        self.appends.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl SessionStore for InMemoryStore {
    async fn create_session(
        &self,
        key: &SessionKey,
        state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Session, StoreError> {
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(key) {
            return Err(StoreError::AlreadyExists(key.clone()));
        }
        let session = Session {
            key: key.clone(),
            state,
            events: Vec::new(),
            revision: Revision(0),
        };
        sessions.insert(key.clone(), session.clone());
        Ok(session)
    }

    async fn record_decision(
        &self,
        key: &SessionKey,
        record: crate::ports::DecisionRecord,
    ) -> Result<(), StoreError> {
        if !lock(&self.sessions).contains_key(key) {
            return Err(StoreError::NotFound(key.clone()));
        }
        lock(&self.decisions)
            .entry(key.clone())
            .or_default()
            .push(record);
        Ok(())
    }

    async fn decisions(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<crate::ports::DecisionRecord>, StoreError> {
        Ok(lock(&self.decisions).get(key).cloned().unwrap_or_default())
    }

    /// The oracle of the port's `open_turns`: the turn tracker over each session's view since
    /// its live compaction, and the newest event's timestamp for "nothing appended since".
    async fn open_turns(&self, before: Timestamp) -> Result<Option<Vec<SessionKey>>, StoreError> {
        let sessions = lock(&self.sessions);
        let mut open: Vec<SessionKey> = sessions
            .values()
            .filter(|session| {
                let view = crate::history::coordinator_view(&session.events);
                let tracker = crate::gate::tracker_since_live(&view);
                let quiet = session.events.last().is_some_and(|e| e.timestamp < before);
                tracker.open == crate::history::OpenTurn::Open && quiet
            })
            .map(|session| session.key.clone())
            .collect();
        open.sort_by_key(ToString::to_string);
        Ok(Some(open))
    }

    async fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<Option<usize>, StoreError> {
        let session = self
            .get(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        Ok(Some(crate::recall::scan::turns_before(&session.events, ts)))
    }

    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.get(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))
    }

    async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
        let mut session = self.load(key).await?;
        if !self.whole_histories {
            session.events = crate::context::live_tail(&session.events);
        }
        Ok(session)
    }

    async fn load_live_tail_window(
        &self,
        key: &SessionKey,
        max_events: usize,
    ) -> Result<crate::ports::TailWindow, StoreError> {
        let mut session = self.load_live_tail(key).await?;
        // The window counts the tail's events other than compactions; a capped store scales
        // the engine's request down (256 events become `cap`), keeping its growth factor.
        let others = session
            .events
            .iter()
            .filter(|e| e.compaction().is_none())
            .count();
        let limit = self.window_cap.map_or(max_events, |cap| {
            cap.saturating_mul((max_events / 256).max(1))
        });
        if others <= limit {
            return Ok(crate::ports::TailWindow::new(session, true));
        }
        let mut skip = others - limit;
        session.events.retain(|e| {
            if e.compaction().is_some() {
                return true;
            }
            if skip > 0 {
                skip -= 1;
                false
            } else {
                true
            }
        });
        Ok(crate::ports::TailWindow::new(session, false))
    }

    async fn gate_snapshot(
        &self,
        key: &SessionKey,
    ) -> Result<crate::ports::GateSnapshot, StoreError> {
        self.snapshots.fetch_add(1, Ordering::SeqCst);
        let session = self
            .get(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        Ok(crate::ports::GateSnapshot::new(
            crate::gate::gate_input(&session.events),
            session.revision,
        ))
    }

    async fn append(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: Event,
    ) -> Result<Revision, StoreError> {
        let mut sessions = lock(&self.sessions);
        let session = sessions
            .get_mut(key)
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        if let Some(racer) = lock(&self.race).take() {
            session.events.push(racer);
            session.revision = Revision(session.revision.0 + 1);
        }
        if session.revision != expected {
            return Err(StoreError::Stale {
                key: key.clone(),
                expected,
                actual: session.revision,
            });
        }
        let latest = crate::history::latest_view_timestamp(&session.events);
        if !crate::history::timestamp_may_follow(latest, &event) {
            return Err(StoreError::NonIncreasingTimestamp {
                key: key.clone(),
                event_id: event.id.clone(),
                latest: latest.unwrap_or(Timestamp::EPOCH),
                offered: event.timestamp,
            });
        }
        session.events.push(event);
        session.revision = Revision(session.revision.0 + 1);
        self.appends.fetch_add(1, Ordering::SeqCst);
        Ok(session.revision)
    }
}
