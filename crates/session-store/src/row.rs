//! What every backend shares, with no database driver: the gate header as a session row keeps
//! it, and the row's working state. The SQLite store (`store.rs`, feature `sqlite`) and the
//! PostgreSQL store (`postgres/`, feature `postgres`) both read and write it.

use std::time::{SystemTime, UNIX_EPOCH};

use compaction_core::history::TurnTracker;
use compaction_core::{GateInput, Revision};

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
