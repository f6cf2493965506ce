//! The envelope gate (spec sections 3.1 and 7) and the figures it reads.

use crate::context::live_compaction_index;
use crate::event::Event;
use crate::history::coordinator_view;
use crate::settings::EffectiveSettings;

/// What the gate needs to know about a session: two numbers a store can keep in one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GateInput {
    /// Completed turns that began after the live compaction event was appended (all completed
    /// turns when there is none).
    pub completed_turns_since_compaction: usize,
    /// The prompt token count of the coordinator's latest event that reports one.
    pub coordinator_prompt_tokens: Option<u64>,
}

/// Why the gate let the turn go without any call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FastExitReason {
    /// `enable_adaptive_compaction` is false.
    Disabled,
    /// Fewer completed turns than effective_min_turns.
    TooFewTurns {
        /// Completed turns since the last compaction.
        completed: usize,
        /// effective_min_turns.
        required: usize,
    },
    /// No unscoped event reports a prompt token count.
    NoUsage,
    /// Coordinator prompt tokens below the floor.
    BelowFloor {
        /// Coordinator prompt tokens.
        tokens: u64,
        /// The floor.
        floor: u64,
    },
}

impl std::fmt::Display for FastExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FastExitReason::Disabled => write!(f, "adaptive compaction disabled"),
            FastExitReason::TooFewTurns {
                completed,
                required,
            } => {
                let turns = if *completed == 1 { "turn" } else { "turns" };
                write!(f, "{completed} completed {turns} < min_turns {required}")
            }
            FastExitReason::NoUsage => write!(f, "no coordinator prompt token count"),
            FastExitReason::BelowFloor { tokens, floor } => {
                write!(f, "{tokens} prompt tokens < floor {floor}")
            }
        }
    }
}

/// The gate's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum GateDecision {
    /// Exit with no call and no span.
    FastExit(FastExitReason),
    /// Ask the decision model.
    Probe,
    /// Tokens at or above the ceiling: compress without asking (hard backstop, 7.2).
    ForceCompress,
}

/// The envelope gate: `completed_turns_since_last_compaction >= effective_min_turns` and
/// `coordinator_prompt_tokens >= token_floor` open it; `>= token_ceiling` forces compaction.
pub fn envelope_gate(settings: &EffectiveSettings, input: GateInput) -> GateDecision {
    if !settings.enabled {
        return GateDecision::FastExit(FastExitReason::Disabled);
    }
    if input.completed_turns_since_compaction < settings.min_turns {
        return GateDecision::FastExit(FastExitReason::TooFewTurns {
            completed: input.completed_turns_since_compaction,
            required: settings.min_turns,
        });
    }
    let Some(tokens) = input.coordinator_prompt_tokens else {
        return GateDecision::FastExit(FastExitReason::NoUsage);
    };
    if tokens < settings.token_floor {
        return GateDecision::FastExit(FastExitReason::BelowFloor {
            tokens,
            floor: settings.token_floor,
        });
    }
    if tokens >= settings.token_ceiling {
        GateDecision::ForceCompress
    } else {
        GateDecision::Probe
    }
}

/// Spec 7.1: the prompt token count of the latest *unscoped* event that reports one, so that
/// sub-agent token spikes never open the envelope.
pub fn coordinator_prompt_tokens<'a>(
    events: impl DoubleEndedIterator<Item = &'a Event>,
) -> Option<u64> {
    events
        .rev()
        .filter(|e| e.is_unscoped())
        .find_map(Event::prompt_tokens)
}

/// Computes the gate's input from a whole history (rewinds applied, scoped events ignored).
pub fn gate_input(events: &[Event]) -> GateInput {
    let view = coordinator_view(events);
    let tracker = tracker_since_live(&view);
    GateInput {
        completed_turns_since_compaction: usize::try_from(tracker.completed())
            .unwrap_or(usize::MAX),
        coordinator_prompt_tokens: coordinator_prompt_tokens(view.iter().copied()),
    }
}

/// The turn tracker over the coordinator view `view` since its live compaction: what a
/// store's gate header holds.
pub(crate) fn tracker_since_live(view: &[&Event]) -> crate::history::TurnTracker {
    let since = match live_compaction_index(view) {
        Some(i) => &view[i + 1..],
        None => view,
    };
    let mut tracker = crate::history::TurnTracker::default();
    for event in since {
        tracker.observe(event);
    }
    tracker
}
