//! The ports: what the engine needs from the outside world, as traits adapters implement.
//!
//! Every port is object-safe so that a service can swap adapters at run time
//! (`Arc<dyn DecisionModel>`). Adapters return their own error types boxed as
//! [`AdapterError`]; the engine turns every failure into a fail-open [`crate::Outcome`] and
//! never passes an error to the caller.

//!
//! `models` holds the two model ports and what they exchange, `store` the session store's,
//! and `telemetry` the spans, the clock and the id source.

mod models;
mod store;
mod telemetry;

pub(crate) use crate::failure::StoreError;
pub use models::{
    DecisionAnswer, DecisionModel, ModelInfo, Summarizer, Summary, SummaryRequest, TokenUsage,
};
pub use store::{DecisionRecord, GateSnapshot, SessionStore, TailWindow};
pub use telemetry::{
    Clock, IdGenerator, NoTelemetry, ProbeEnd, ProbeSpan, ProbeStart, Sleep, SummarizeEnd,
    SummarizeSpan, SummarizeStart, Telemetry,
};
