//! OpenInference spans for adaptive compaction, on OpenTelemetry: what Arize Phoenix and any
//! OTLP backend show for every decision probe and every summarization (spec section 9).
//!
//! [`OpenInferenceTelemetry`] implements compaction-core's [`compaction_core::Telemetry`]
//! port. It records two spans, nested under the caller's current `tracing` span (the turn)
//! and carrying its trace id:
//!
//! - `compaction_decision_probe` (`openinference.span.kind = EVALUATOR`, or `DECISION` when
//!   configured): the probe's input (`earlier_discussion`, `latest_turn`, `rubric`) and output
//!   (`probability`, `verdict`), the model, latency, threshold and verdict under
//!   `compaction.decision.*`, OpenInference's `decision.*` model attributes and token counts,
//!   and `metadata` (`completed_turns`, `prompt_tokens`). A failed probe ends with status
//!   ERROR and the fail-open verdict `CONTINUE`.
//! - `compact_session_history` (`LLM`): the summarizer prompt and summary, `llm.model_name`,
//!   `llm.token_count.*`, `compaction.summarize.range` (`[t_1, t_{N-K}]`), the slice's turn
//!   count and the forced flag.
//!
//! [`init_otlp`] sets up an OTLP/HTTP exporter (Phoenix's `http://localhost:6006/v1/traces`
//! unless told otherwise) with a batch processor; its guard flushes on drop. The attribute
//! keys are in [`keys`].
//!
//! # What this crate must never do
//! It never records an API key: it reads no credentials, and every free-text value it records
//! passes through [`scrub`](scrub::scrub); the bridge for the program's own `tracing` spans
//! ([`TelemetryGuard::layer`]) exports INFO-level spans only, never log events, so log text
//! does not reach the collector. It never opens a span on a fast exit (the engine
//! calls it only once the gate opens) and never sends anything over the network unless the
//! program called [`init_otlp`]. It honours `OPENINFERENCE_HIDE_INPUTS` and
//! `OPENINFERENCE_HIDE_OUTPUTS` ([`TelemetryConfig::from_env`]). It never prints.
//!
//! # Example
//! ```
//! use compaction_core::Telemetry as _;
//! use opentelemetry::trace::TracerProvider as _;
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
//! use telemetry::{OpenInferenceTelemetry, TelemetryConfig};
//!
//! let exporter = InMemorySpanExporter::default();
//! let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
//! let telemetry = OpenInferenceTelemetry::new(provider.tracer("example"), TelemetryConfig::default());
//!
//! // The engine drives the port; here by hand.
//! let model = compaction_core::ModelInfo { system: "typesafe".into(), provider: "typesafe".into(), model: "jev-latest".into() };
//! let state = compaction_core::DecisionState { earlier_discussion: "…".into(), latest_turn: "…".into() };
//! let request = compaction_core::ProbeRequest::new("jev-latest", state);
//! let span = telemetry.start_probe(&compaction_core::ProbeStart {
//!     model: &model, request: &request, threshold: 0.75, completed_turns: 4, prompt_tokens: 38_400,
//! });
//! span.finish(&compaction_core::ProbeEnd {
//!     probability: compaction_core::Probability::new(0.82).ok(),
//!     verdict: compaction_core::Verdict::Compress, answer: None, failure: None,
//! });
//!
//! let spans = exporter.get_finished_spans().unwrap();
//! assert_eq!(spans[0].name, "compaction_decision_probe");
//! ```
#![warn(missing_docs)]

mod config;
mod error;
pub mod keys;
mod otlp;
pub mod scrub;
mod spans;

pub use config::{HIDE_INPUTS_ENV, HIDE_OUTPUTS_ENV, ProbeSpanKind, TelemetryConfig};
pub use error::TelemetryError;
pub use otlp::{
    DEFAULT_SERVICE_NAME, ENDPOINT_ENV, OtlpSetup, PHOENIX_ENDPOINT, SERVICE_NAME_ENV,
    SHUTDOWN_TIMEOUT, TRACES_ENDPOINT_ENV, TelemetryGuard, WARNING_TARGET, init_otlp,
    shown_endpoint,
};
pub use spans::OpenInferenceTelemetry;
