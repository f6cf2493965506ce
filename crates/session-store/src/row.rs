//! What every backend shares, with no database driver: the gate header as a session row keeps
//! it, and the row's working state. The SQLite store (`store.rs`, feature `sqlite`) and the
//! PostgreSQL store (`postgres/`, feature `postgres`) both read and write it.

use std::time::{SystemTime, UNIX_EPOCH};

use compaction_core::store_support::TurnTracker;
use compaction_core::{Event, GateInput, Revision};

/// The gate header of a session: one row, current after every append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionHeader {
    /// The session's revision (the number of events appended).
    pub revision: Revision,
    /// The envelope gate's figures, equal to `compaction_core::gate_input` of the history.
    pub gate: GateInput,
    /// The revision at which the live compaction event was appended, if one is live.
    pub live_compaction: Option<Revision>,
}

/// The live compaction as the session row records it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LiveRef {
    pub(crate) seq: i64,
    pub(crate) start: f64,
    pub(crate) end: f64,
}

/// A session row: key, revision and the header's working state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SessionRow {
    pub(crate) pk: i64,
    pub(crate) revision: u64,
    pub(crate) tracker: TurnTracker,
    pub(crate) prompt_tokens: Option<u64>,
    pub(crate) live: Option<LiveRef>,
}

impl SessionRow {
    pub(crate) fn header(&self) -> SessionHeader {
        SessionHeader {
            revision: Revision(self.revision),
            gate: GateInput {
                completed_turns_since_compaction: usize::try_from(self.tracker.completed())
                    .unwrap_or(usize::MAX),
                coordinator_prompt_tokens: self.prompt_tokens,
            },
            live_compaction: self.live.map(|l| Revision(l.seq.unsigned_abs())),
        }
    }
}

/// Token counts are stored as the bit pattern of the `u64` (lossless both ways).
pub(crate) fn tokens_to_sql(tokens: Option<u64>) -> Option<i64> {
    tokens.map(|t| t as i64)
}

/// Epoch seconds now, for `created_at` / `updated_at`.
pub(crate) fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The indexed columns of an event row, as both backends store them: what compaction-core
/// says of the event (its time, scope, compaction range and rewind), never re-derived.
pub(crate) struct EventColumns<'a> {
    pub(crate) ts: f64,
    pub(crate) scope: &'a Option<String>,
    pub(crate) is_compaction: bool,
    pub(crate) comp_start: Option<f64>,
    pub(crate) comp_end: Option<f64>,
    pub(crate) is_rewind: bool,
}

impl<'a> EventColumns<'a> {
    pub(crate) fn of(event: &'a Event) -> Self {
        let compaction = event.compaction();
        EventColumns {
            ts: event.timestamp.seconds(),
            scope: &event.isolation_scope,
            is_compaction: compaction.is_some(),
            comp_start: compaction.map(|c| c.start_timestamp.seconds()),
            comp_end: compaction.map(|c| c.end_timestamp.seconds()),
            is_rewind: event.actions.rewind_before_invocation_id.is_some(),
        }
    }
}
