//! The pure core of adaptive compaction: every rule of the design spec, stated once.
//!
//! After each chat turn closes, [`Engine::evaluate_and_compact`] decides whether the earlier
//! turns should be folded into one rolling summary:
//!
//! 1. the **envelope gate** ([`gate`]) exits for free unless enough completed turns and
//!    coordinator prompt tokens have accumulated; the **hard backstop** forces compaction;
//! 2. the **decision probe** ([`probe`], [`state`]) asks a [`DecisionModel`] for a calibrated
//!    probability that compaction is warranted, failing open;
//! 3. the **plan** ([`plan`]) slices the turns after the live summary up to turn N-K, keeping
//!    the last K completed turns verbatim, and anchors the timestamps;
//! 4. the [`Summarizer`] runs **rolling consolidation**, and the compaction event is appended
//!    through the [`SessionStore`] with optimistic concurrency;
//! 5. **subsumption** ([`context`]) makes the new summary the only live one when the next
//!    prompt is assembled.
//!
//! # What this crate must never do
//! It never touches files, sockets or clocks and never depends on tokio, reqwest, rusqlite,
//! opentelemetry or hyper. Time and ids come in through [`Clock`] and [`IdGenerator`]; the
//! outside world plugs in through the async traits in [`ports`]. It never prints; it traces.
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

pub mod builder;
pub mod context;
pub mod engine;
pub mod estimate;
pub mod event;
pub mod failure;
pub mod gate;
pub mod history;
pub mod plan;
pub mod ports;
pub mod probe;
pub mod recall;
pub mod receipt;
pub mod scrub;
pub mod session;
pub mod settings;
pub mod state;
pub mod time;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;

/// The `async_trait` attribute the ports are declared with, re-exported so that an adapter
/// crate needs no dependency of its own to implement them.
pub use async_trait::async_trait;
pub use builder::EventBuilder;
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
pub use failure::{ClassifiedError, Failure, FailureKind, classified, failure_kind};
pub use gate::{
    FastExitReason, GateDecision, GateInput, coordinator_prompt_tokens, envelope_gate, gate_input,
};
pub use history::{
    ScopedUserMessages, Turn, apply_rewinds, completed_turns, coordinator_positions,
    coordinator_view, scoped_user_candidate_positions, scoped_user_messages, turns,
};
pub use plan::{
    CompactionPlan, MAX_TOOL_CONTENT_CHARS, PreviousCompaction, TurnDigest, plan_compaction,
};
pub use ports::{
    AdapterError, Clock, DecisionAnswer, DecisionModel, DecisionRecord, GateSnapshot, IdGenerator,
    ModelInfo, NoTelemetry, ProbeEnd, ProbeSpan, ProbeStart, SessionStore, Sleep, StoreError,
    SummarizeEnd, SummarizeSpan, SummarizeStart, Summarizer, Summary, SummaryRequest, TailWindow,
    Telemetry, TokenUsage,
};
pub use probe::{Probability, ProbeRequest, RUBRIC, Verdict, verdict};
pub use recall::scan::ExpandError;
pub use recall::{RecallHit, RecallQuery, RecallQueryError, RecalledEvent};
pub use receipt::{CorrectedClaim, DropReason, DroppedFinding, RECEIPT_KEY, Receipt};
pub use session::{Revision, Session, SessionKey};
pub use settings::{ClampWarning, EffectiveSettings, Settings, SettingsError};
pub use state::{DecisionState, extract_decision_state};
pub use time::Timestamp;
