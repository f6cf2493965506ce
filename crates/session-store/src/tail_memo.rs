//! The answer of an ADK store's last outline read, kept with the session's revision.
//!
//! ADK's layouts have no gate header, so the gate snapshot, the live tail and the scope
//! warning each need one outline read of the session (incremental since its checkpoint,
//! `crate::adk_outline`). A post-turn evaluation asks all
//! three about one revision; the store keeps the last answer with the revision it was read at
//! (ADK's `update_time`, which every append moves, ADK's own and this crate's), so the later
//! questions of a run cost one indexed row (revision and merged state) instead of the session.
//! The state is never kept: another session's append may change its `app:`/`user:` part.
//!
//! After the store's own append (the engine's compaction event) the revision moves, but the
//! scope warning the run asks next is still known: an appended event without a rewind drops
//! nothing, so the scoped user messages are the kept ones plus the event's own
//! ([`TailMemo::advance`]); the tail itself is not carried over (it is read again if asked).

use std::sync::{Mutex, PoisonError};

use compaction_core::{
    Event, Revision, ScopedUserMessages, Session, SessionKey, scoped_user_messages,
};
use serde_json::{Map, Value};

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

impl Tail {
    /// The session with this tail as its events and `state`, with the tail's prompt tokens and
    /// scope warning: what a live-tail read returns.
    pub(crate) fn into_session(
        self,
        state: Map<String, Value>,
    ) -> (Session, Option<u64>, ScopedUserMessages) {
        let session = Session {
            key: self.key,
            state,
            events: self.events,
            revision: self.revision,
        };
        (session, self.prompt_tokens, self.scoped)
    }
}

/// What the memo keeps: the last read's answer, and the revision its scope warning is
/// known at (the read's, or a later one of this store's own appends).
#[derive(Debug)]
struct Kept {
    tail: Tail,
    scoped_at: Revision,
}

/// The last [`Tail`] a store read (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct TailMemo(Mutex<Option<Kept>>);

impl TailMemo {
    fn kept(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept answer for `key` at `revision`, if it is the one kept.
    pub(crate) fn get(&self, key: &SessionKey, revision: Revision) -> Option<Tail> {
        self.kept()
            .as_ref()
            .map(|k| &k.tail)
            .filter(|t| t.revision == revision && &t.key == key)
            .cloned()
    }

    /// The scope warning for `key` at `revision`, if it is known.
    pub(crate) fn scoped(
        &self,
        key: &SessionKey,
        revision: Revision,
    ) -> Option<ScopedUserMessages> {
        self.kept()
            .as_ref()
            .filter(|k| k.scoped_at == revision && &k.tail.key == key)
            .map(|k| k.tail.scoped.clone())
    }

    /// Keeps `tail` (replacing the one kept).
    pub(crate) fn put(&self, tail: Tail) {
        let scoped_at = tail.revision;
        *self.kept() = Some(Kept { tail, scoped_at });
    }

    /// This store appended `event` to `key`, moving it from revision `from` to `to`: the scope
    /// warning known at `from` is carried to `to` with the event's own part, unless the event
    /// rewinds (which may drop earlier messages).
    pub(crate) fn advance(&self, key: &SessionKey, from: Revision, to: Revision, event: &Event) {
        let mut kept = self.kept();
        let Some(k) = kept.as_mut().filter(|k| &k.tail.key == key) else {
            return;
        };
        if k.scoped_at != from || event.actions.rewind_before_invocation_id.is_some() {
            return;
        }
        let own = scoped_user_messages(std::slice::from_ref(event));
        k.tail.scoped.count += own.count;
        for scope in own.scopes {
            if !k.tail.scoped.scopes.contains(&scope) {
                k.tail.scoped.scopes.push(scope);
            }
        }
        k.scoped_at = to;
    }
}
