//! A session: its key, state, history and optimistic-concurrency revision.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event::Event;

/// Identifies a session the way ADK does: app, user, session id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionKey {
    /// Application name.
    pub app_name: String,
    /// User id.
    pub user_id: String,
    /// Session id.
    pub session_id: String,
}

impl SessionKey {
    /// Builds a key.
    pub fn new(
        app_name: impl Into<String>,
        user_id: impl Into<String>,
        session_id: impl Into<String>,
    ) -> Self {
        SessionKey {
            app_name: app_name.into(),
            user_id: user_id.into(),
            session_id: session_id.into(),
        }
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.app_name, self.user_id, self.session_id)
    }
}

/// The optimistic-concurrency marker of a session. A store bumps it on every append and
/// refuses an append whose expected revision is no longer current.
///
/// Stores choose the meaning: a counter for the native store, ADK's `update_time` in
/// microseconds for an ADK database.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Revision(pub u64);

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A session with its whole history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Which session this is.
    pub key: SessionKey,
    /// Session state (ADK's `state` map); `RESEARCH_TURN_HISTORY` lives here.
    #[serde(default)]
    pub state: Map<String, Value>,
    /// Every event, in append order.
    #[serde(default)]
    pub events: Vec<Event>,
    /// The revision the history was read at.
    #[serde(default)]
    pub revision: Revision,
}

impl Session {
    /// An empty session at revision 0.
    pub fn new(key: SessionKey) -> Self {
        Session {
            key,
            state: Map::new(),
            events: Vec::new(),
            revision: Revision(0),
        }
    }
}
