//! The pure core of adaptive compaction: every rule of the design spec, stated once.
//!
//! After each chat turn closes, [`Engine::evaluate_and_compact`] decides whether the earlier
//! turns should be folded into one rolling summary:
//!
//! 1. the **envelope gate** ([`envelope_gate`]) exits for free unless enough completed turns and
//!    coordinator prompt tokens have accumulated; the **hard backstop** forces compaction;
//! 2. the **decision probe** ([`ProbeRequest`], [`extract_decision_state`]) asks a [`DecisionModel`] for a calibrated
//!    probability that compaction is warranted, failing open;
//! 3. the **plan** ([`plan_compaction`]) slices the turns after the live summary up to turn N-K, keeping
//!    the last K completed turns verbatim, and anchors the timestamps;
//! 4. the [`Summarizer`] runs **rolling consolidation**, and the compaction event is appended
//!    through the [`SessionStore`] with optimistic concurrency;
//! 5. **subsumption** ([`assemble_context`]) makes the new summary the only live one when the next
//!    prompt is assembled.
//!
//! # What this crate must never do
//! It never touches files, sockets or clocks and never depends on tokio, reqwest, rusqlite,
//! opentelemetry or hyper. Time and ids come in through [`Clock`] and [`IdGenerator`]; the
//! outside world plugs in through the async port traits ([`DecisionModel`], [`Summarizer`], [`SessionStore`], [`Telemetry`]). It never prints; it traces.
//!
//! # Example
//! ```
//! use compaction_core::{envelope_gate, GateDecision, GateInput, Settings};
//!
//! let settings = Settings::default().effective().unwrap();
//! let input = GateInput { completed_turns_since_compaction: 3, coordinator_prompt_tokens: Some(50_000) };
//! assert!(matches!(envelope_gate(&settings, input), GateDecision::FastExit(_)));
//! let input = GateInput { completed_turns_since_compaction: 4, coordinator_prompt_tokens: Some(120_000) };
//! assert_eq!(envelope_gate(&settings, input), GateDecision::ForceCompress);
//! ```
#![warn(missing_docs)]

mod builder;
mod context;
mod engine;
mod estimate;
mod event;
mod failure;
mod gate;
mod history;
mod outcome;
mod plan;
mod ports;
mod probe;
mod recall;
mod receipt;
mod render;
mod scrub;
mod session;
mod settings;
mod state;
mod time;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;

/// What this workspace's own session stores and service share with the core beyond its public
/// API: the tracker and coverage rules a store maintains incrementally, and recall's word list
/// and scan oracle. Unstable: outside semver, not for other consumers.
#[doc(hidden)]
pub mod store_support {
    pub use crate::context::{CompactionRange, live_compaction_index, subsumption_on_append};
    pub use crate::history::{
        OpenTurn, TurnTracker, latest_view_timestamp, starts_turn, timestamp_may_follow,
    };
    pub use crate::recall::scan;
    pub use crate::recall::{Coverage, check_limit, searchable_text, snippet, words};
}

/// The `async_trait` attribute the ports are declared with, re-exported so that an adapter
/// crate needs no dependency of its own to implement them.
pub use async_trait::async_trait;
pub use builder::{EventBuilder, INTERRUPTED_CODE, ScriptedTool, ScriptedTurn};
pub use context::{
    AssembledContext, CompactionEntry, ContextEntry, LiveSummary, adk_prompt_context,
    assemble_around, assemble_context, compaction_history, live_tail, live_tail_positions,
    rendered_compaction_indexes, rolling_tail_positions, subsumed_compaction_ids, uncovered_events,
};
pub use engine::{
    Compaction, ContinueReason, DEFAULT_PROBE_DEADLINE, DEFAULT_SUMMARIZE_DEADLINE, Engine,
    EngineBuilder, Outcome,
};
pub use estimate::{CharsPerToken, TokenEstimator};
pub use event::{
    Actions, Content, Event, EventCompaction, EventOutline, FunctionCall, FunctionResponse, Part,
    UsageMetadata,
};
pub use failure::{
    AdapterError, ClassifiedError, Failure, FailureKind, StoreError, classified, failure_kind,
    unclassified,
};
pub use gate::{
    FastExitReason, GateDecision, GateInput, coordinator_prompt_tokens, envelope_gate, gate_input,
};
pub use history::{
    ScopedUserMessages, Turn, apply_rewinds, completed_turns, coordinator_positions,
    coordinator_view, scoped_user_candidate_positions, scoped_user_messages, turns,
};
pub use plan::{CompactionPlan, PreviousCompaction, TurnDigest, plan_compaction};
pub use ports::{
    Clock, DecisionAnswer, DecisionModel, DecisionRecord, GateSnapshot, IdGenerator, ModelInfo,
    NoTelemetry, ProbeEnd, ProbeSpan, ProbeStart, SessionStore, Sleep, SummarizeEnd, SummarizeSpan,
    SummarizeStart, Summarizer, Summary, SummaryRequest, TailWindow, Telemetry, TokenUsage,
};
pub use probe::{Probability, ProbeRequest, QUESTION_ID, RUBRIC, Verdict, verdict};
pub use recall::scan::ExpandError;
pub use recall::{RECALL_TOOL_NAME, RecallHit, RecallQuery, RecallQueryError, RecalledEvent};
pub use receipt::{CorrectedClaim, DropReason, DroppedFinding, RECEIPT_KEY, Receipt};
pub use render::render_event_body;
pub use scrub::{REDACTED, scrub};
pub use session::{Revision, Session, SessionKey};
pub use settings::{
    ClampWarning, EXTENSION_KEYS, EffectiveSettings, KEY_SHADOW, KEYS, Settings, SettingsError,
    key_hint, shadow_from,
};
pub use state::{
    DECISION_HISTORY_TURNS, DEFAULT_STATE_BUDGET_TOKENS, DecisionState, RESEARCH_TURN_HISTORY,
    StateTurn, extract_decision_state, extract_decision_state_from_view,
};
pub use time::{InvalidTimestamp, Timestamp, civil_from_days};
