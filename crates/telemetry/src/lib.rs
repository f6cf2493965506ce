//! OpenInference spans for adaptive compaction, on OpenTelemetry: what Arize Phoenix and any
//! OTLP backend show for every decision probe and every summarization (spec section 9).
//!
//! [`OpenInferenceTelemetry`] implements compaction-core's [`compaction_core::Telemetry`]
//! port. It records two spans, nested under the caller's current `tracing` span (the turn)
//! and carrying its trace id:
//!
//! - `compaction_decision_probe` (`openinference.span.kind = EVALUATOR`, or `DECISION` when
//!   configured): the probe's input (`earlier_discussion`, `latest_turn`, `rubric`) and output
//!   (`probability`, `verdict`); under `compaction.decision.*` the model that answered
//!   (`model`; the settings' slug in `configured_model`), the latency in whole milliseconds
//!   (`latency_ms`, an integer; `latency_ms_precise` a float), threshold and verdict;
//!   OpenInference's `decision.*` model attributes and token counts, and `metadata`
//!   (`completed_turns`, `prompt_tokens`). A failed probe ends with status ERROR and the
//!   fail-open verdict `CONTINUE`.
//! - `compact_session_history` (`LLM`): the summarizer prompt and summary, `llm.model_name`,
//!   `llm.token_count.*` (the estimator's figures when the summarizer reports none, with
//!   `compaction.summarize.token_counts_estimated = true`), `compaction.summarize.range`
//!   (`[t_1, t_{N-K}]`), the slice's turn count, K (`retained_turns`) and the forced flag.
//!
//! The host's own span around an evaluation comes from [`turn_span`]: a `CHAIN` span with
//! `session.id`, `user.id`, the turn number and the user's message and outcome as input and
//! output, so that Phoenix lists the turn, groups it under its session, and shows both
//! compaction spans beneath it.
//!
//! [`init_otlp`] sets up an OTLP/HTTP exporter (Phoenix's `http://localhost:6006/v1/traces`
//! unless told otherwise) with a batch processor; its guard flushes on drop. Its resource
//! carries `openinference.project.name` when a project is named ([`OtlpSetup::project_name`]
//! or `PHOENIX_PROJECT_NAME`), so that spans land in that Phoenix project instead of
//! `default`. The attribute keys are in [`keys`].
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
//! let model = compaction_core::ModelInfo::new("typesafe", "typesafe", "jev-latest");
//! let state = compaction_core::DecisionState { earlier_discussion: "…".into(), latest_turn: "…".into(), turns: Vec::new(), older: Vec::new() };
//! let request = compaction_core::ProbeRequest::new("jev-latest", state);
//! let span = telemetry.start_probe(&compaction_core::ProbeStart::new(&model, &request, 0.75, 4, 38_400));
//! span.finish(&compaction_core::ProbeEnd::new(
//!     compaction_core::Probability::new(0.82).ok(),
//!     compaction_core::Verdict::Compress,
//!     None,
//!     None,
//! ));
//!
//! let spans = exporter.get_finished_spans().unwrap();
//! assert_eq!(spans[0].name, "compaction_decision_probe");
//! ```
#![warn(missing_docs)]

mod config;
mod error;
pub mod keys;
#[cfg(feature = "otlp")]
mod otlp;
/// The key-shaped-token scrubber every recorded text passes through: compaction-core's, the
/// one the engine's own log lines use.
pub mod scrub {
    pub use compaction_core::{REDACTED, scrub};
}
mod spans;
mod turn;

pub use config::{HIDE_INPUTS_ENV, HIDE_OUTPUTS_ENV, ProbeSpanKind, TelemetryConfig};
pub use error::TelemetryError;
#[cfg(feature = "otlp")]
pub use otlp::{
    DEFAULT_SERVICE_NAME, ENDPOINT_ENV, OtlpSetup, PHOENIX_ENDPOINT, PROJECT_NAME_ENV,
    SERVICE_NAME_ENV, SHUTDOWN_TIMEOUT, TRACES_ENDPOINT_ENV, TelemetryGuard, WARNING_TARGET,
    init_otlp, shown_endpoint,
};
pub use spans::OpenInferenceTelemetry;
pub use turn::{record_turn_output, turn_span};
