//! The session store's port: durable sessions with optimistic concurrency, the gate snapshot,
//! the live tail and shadow decisions.

use async_trait::async_trait;

use crate::context::{AssembledContext, CompactionEntry, assemble_context, compaction_history};
use crate::event::Event;
use crate::failure::StoreError;
use crate::failure::{Failure, FailureKind};
use crate::gate::{GateInput, gate_input};
use crate::recall::scan;
use crate::recall::{RecallHit, RecallQuery, RecalledEvent};
use crate::session::{Revision, Session, SessionKey};
use crate::time::Timestamp;

/// The two gate figures plus the revision they were read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GateSnapshot {
    /// Gate figures.
    pub input: GateInput,
    /// Revision read.
    pub revision: Revision,
}

impl GateSnapshot {
    /// The gate figures read at `revision`.
    pub fn new(input: GateInput, revision: Revision) -> Self {
        GateSnapshot { input, revision }
    }
}

/// The newest part of a live tail ([`SessionStore::load_live_tail_window`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TailWindow {
    /// The session with the window's events.
    pub session: Session,
    /// True when the window is the whole live tail.
    pub whole: bool,
}

impl TailWindow {
    /// A window of `session`'s events; `whole` when nothing older was left out.
    pub fn new(session: Session, whole: bool) -> Self {
        TailWindow { session, whole }
    }
}

/// One decision recorded in shadow mode: what was asked, what came back, and the gate's
/// figures at the time. Recorded p is replayed by tuning, never re-queried (remote decision
/// hosts are not deterministic across batches).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct DecisionRecord {
    /// When the engine recorded it (its clock).
    pub recorded_at: Timestamp,
    /// The session's revision the decision was made on.
    pub revision: Revision,
    /// Turns in the coordinator view at the time (turn N).
    pub turn: usize,
    /// The gate's completed turns since the live compaction.
    pub completed_turns_since_compaction: usize,
    /// The gate's coordinator prompt tokens.
    pub coordinator_prompt_tokens: Option<u64>,
    /// True when the hard backstop would have forced compaction.
    pub backstop: bool,
    /// τ at the time.
    pub threshold: f64,
    /// p, when the model answered with a valid probability.
    pub probability: Option<f64>,
    /// `COMPRESS` or `CONTINUE`, when p is known.
    pub verdict: Option<String>,
    /// The configured decision model (`ModelInfo::model`).
    pub model: String,
    /// The model the host says served the call, with its version, when it says.
    pub served_model: Option<String>,
    /// A hash of the decision state sent (FNV-1a 64 of its JSON, in hex).
    pub state_hash: String,
    /// Why the probe failed, when it did.
    #[serde(with = "failure_record", default)]
    pub failure: Option<Failure>,
}

/// A recorded failure as `{kind, status?, message}`; read back as [`FailureKind::Other`] unless
/// its kind label is known.
mod failure_record {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::failure::{Failure, FailureKind};

    pub(super) fn serialize<S: Serializer>(f: &Option<Failure>, s: S) -> Result<S::Ok, S::Error> {
        f.serialize(s)
    }

    #[derive(Deserialize)]
    struct Stored {
        kind: String,
        status: Option<u16>,
        message: String,
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Failure>, D::Error> {
        let stored: Option<Stored> = Option::deserialize(d)?;
        Ok(stored.map(|s| {
            let kind = match (s.kind.as_str(), s.status) {
                ("http_status", Some(status)) => FailureKind::HttpStatus(status),
                (label, _) => FailureKind::from_label(label).unwrap_or(FailureKind::Other),
            };
            Failure::new(kind, s.message)
        }))
    }
}

/// Durable sessions with optimistic concurrency: everything a service needs, async.
///
/// A store refuses an in-view (unscoped) event whose timestamp does not strictly increase
/// over the session's latest in-view event ([`StoreError::NonIncreasingTimestamp`]), so that
/// no host clock can make a retained turn fall inside a compaction's range.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates an empty session with `state` at its first revision;
    /// [`StoreError::AlreadyExists`] when the key is taken.
    async fn create_session(
        &self,
        key: &SessionKey,
        state: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Session, StoreError>;

    /// Loads a session with its whole history.
    async fn load(&self, key: &SessionKey) -> Result<Session, StoreError>;

    /// The next prompt's context: [`assemble_context`] of the whole history. The default
    /// loads the whole session; a store with indexes answers from the live summary's
    /// neighbourhood.
    async fn load_context(&self, key: &SessionKey) -> Result<AssembledContext, StoreError> {
        Ok(assemble_context(&self.load(key).await?.events))
    }

    /// Every compaction of the coordinator view, subsumed ones marked:
    /// [`compaction_history`] of the whole history.
    async fn compaction_history(
        &self,
        key: &SessionKey,
    ) -> Result<Vec<CompactionEntry>, StoreError> {
        Ok(compaction_history(&self.load(key).await?.events))
    }

    /// The gate's figures. The default loads the whole session; stores should answer from a
    /// header kept current on append.
    async fn gate_snapshot(&self, key: &SessionKey) -> Result<GateSnapshot, StoreError> {
        let session = self.load(key).await?;
        Ok(GateSnapshot::new(
            gate_input(&session.events),
            session.revision,
        ))
    }

    /// The part of the session a post-turn evaluation needs once the gate has opened: the
    /// session's state and revision, and its events from the live compaction on. The default
    /// loads the whole session; a store with indexes should answer without reading the rest
    /// of the history.
    ///
    /// Contract: `events` keeps append order and holds at least what
    /// [`crate::live_tail`] returns for the whole history — with rewinds applied, the live
    /// compaction event and every unscoped non-compaction event whose timestamp is after the
    /// live compaction's end (every event when there is no compaction). It may hold more
    /// (the default holds everything). The engine gates on [`SessionStore::gate_snapshot`],
    /// never on these events, and the plan and the probe's decision state read nothing
    /// inside the live summary's range, so they come out the same either way.
    async fn load_live_tail(&self, key: &SessionKey) -> Result<Session, StoreError> {
        self.load(key).await
    }

    /// The newest part of [`SessionStore::load_live_tail`]: the session's state and revision,
    /// the live compaction event, and the newest `max_events` (at least) of the live tail's
    /// other events in append order, with `whole` saying whether that is all of them. The
    /// engine's probe reads this (a longer window when the decision state needs more), so a
    /// long uncompacted tail costs the probe no more than a short one. The default is the
    /// whole live tail.
    async fn load_live_tail_window(
        &self,
        key: &SessionKey,
        max_events: usize,
    ) -> Result<TailWindow, StoreError> {
        let _ = max_events;
        Ok(TailWindow::new(self.load_live_tail(key).await?, true))
    }

    /// Records a shadow-mode decision beside the session (never in its event history). The
    /// default says the store cannot.
    async fn record_decision(
        &self,
        key: &SessionKey,
        record: DecisionRecord,
    ) -> Result<(), StoreError> {
        let _ = (key, record);
        Err(StoreError::Backend(crate::failure::classified(
            FailureKind::Other,
            "this store does not record shadow decisions",
        )))
    }

    /// The shadow-mode decisions recorded for the session, oldest first.
    async fn decisions(&self, key: &SessionKey) -> Result<Vec<DecisionRecord>, StoreError> {
        let _ = key;
        Ok(Vec::new())
    }

    /// Lossless recall: the session's raw events `query` matches (see lossless recall (`recall`) for
    /// what is searched), best first, at most `limit`. The default scans the whole history
    /// ([`scan::search_history`]); a store with a text index answers from it.
    async fn search(
        &self,
        key: &SessionKey,
        query: &RecallQuery,
        limit: usize,
    ) -> Result<Vec<RecallHit>, StoreError> {
        let session = self.load(key).await?;
        Ok(scan::search_history(&session.events, query, limit))
    }

    /// The events the compaction event `compaction_id` covers, verbatim and in order
    /// ([`scan::expand_compaction`]); [`StoreError::Expand`] when the view has no such
    /// compaction.
    async fn expand(
        &self,
        key: &SessionKey,
        compaction_id: &str,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        let session = self.load(key).await?;
        scan::expand_compaction(&session.events, compaction_id).map_err(|error| {
            StoreError::Expand {
                key: key.clone(),
                error,
            }
        })
    }

    /// The coordinator view's events of turns `first..=last` (1-based), verbatim and in
    /// order ([`scan::expand_turns`]); [`StoreError::Expand`] when the range is empty or
    /// reaches past the session's turns.
    async fn expand_turns(
        &self,
        key: &SessionKey,
        first: usize,
        last: usize,
    ) -> Result<Vec<RecalledEvent>, StoreError> {
        let session = self.load(key).await?;
        scan::expand_turns(&session.events, first, last).map_err(|error| StoreError::Expand {
            key: key.clone(),
            error,
        })
    }

    /// How many turns of the coordinator view start before `ts` (see lossless recall (`recall`) for
    /// turn numbers), so that a summary can name its turns; `None` when the store cannot
    /// count them cheaply (the default). The engine asks once per compaction.
    async fn turns_before(
        &self,
        key: &SessionKey,
        ts: Timestamp,
    ) -> Result<Option<usize>, StoreError> {
        let _ = (key, ts);
        Ok(None)
    }

    /// Sessions whose newest turn is open (a query whose reply has not completed it, the gate
    /// header's `OpenTurn::Open`) and to which nothing was appended before `before`:
    /// what a crash may have left open, for a service to close at start. The answer may hold
    /// more than that (an errored turn is open too): the caller checks each session's context.
    /// `None` when the store cannot list its sessions (the default).
    async fn open_turns(&self, before: Timestamp) -> Result<Option<Vec<SessionKey>>, StoreError> {
        let _ = before;
        Ok(None)
    }

    /// Appends `event` if the session is still at `expected`; returns the new revision, or
    /// [`StoreError::Stale`] when another writer moved it on. Atomic: all or nothing.
    async fn append(
        &self,
        key: &SessionKey,
        expected: Revision,
        event: Event,
    ) -> Result<Revision, StoreError>;
}
