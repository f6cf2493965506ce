//! The answer of an ADK store's last outline read, kept with the session's revision.
//!
//! ADK's layouts have no gate header, so the gate snapshot, the live tail and the scope
//! warning each need one outline read of the whole session. A post-turn evaluation asks all
//! three about one revision; the store keeps the last answer with the revision it was read at
//! (ADK's `update_time`, which every append moves, ADK's own and this crate's), so the later
//! questions of a run cost one indexed row (revision and merged state) instead of the session.
//! The state is never kept: another session's append may change its `app:`/`user:` part.

use std::sync::{Mutex, PoisonError};

use compaction_core::{Event, Revision, ScopedUserMessages, SessionKey};

/// What one outline read found, for one revision of one session.
#[derive(Debug, Clone)]
pub(crate) struct Tail {
    pub(crate) key: SessionKey,
    pub(crate) revision: Revision,
    /// The rolling tail's events, whole.
    pub(crate) events: Vec<Event>,
    /// The coordinator prompt tokens of the whole history.
    pub(crate) prompt_tokens: Option<u64>,
    /// The user messages filed inside a scope.
    pub(crate) scoped: ScopedUserMessages,
}

/// The last [`Tail`] a store read (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct TailMemo(Mutex<Option<Tail>>);

impl TailMemo {
    /// The kept answer for `key` at `revision`, if it is the one kept.
    pub(crate) fn get(&self, key: &SessionKey, revision: Revision) -> Option<Tail> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.as_ref()
            .filter(|t| t.revision == revision && &t.key == key)
            .cloned()
    }

    /// Keeps `tail` (replacing the one kept).
    pub(crate) fn put(&self, tail: Tail) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(tail);
    }
}
