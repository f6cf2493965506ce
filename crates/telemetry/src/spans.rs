//! The adapter: compaction-core's [`Telemetry`] port on the OpenTelemetry API.
//!
//! Each span is started with the caller's current context as its parent: the context of the
//! current `tracing` span when a `tracing-opentelemetry` layer tracks it, else OpenTelemetry's
//! own current context. Both spans therefore nest under the turn that caused them and carry
//! its trace id. Every attribute key is set exactly once per span.

use std::sync::Arc;
use std::time::Instant;

use compaction_core::{
    CharsPerToken, DecisionAnswer, ProbeEnd, ProbeSpan, ProbeStart, SummarizeEnd, SummarizeSpan,
    SummarizeStart, Summary, Telemetry, TokenEstimator,
};
use opentelemetry::global::{BoxedSpan, BoxedTracer, ObjectSafeTracer};
use opentelemetry::trace::{Span as _, Status, TraceContextExt, Tracer};
use opentelemetry::{Array, Context, KeyValue, Value};
use serde_json::json;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::TelemetryConfig;
use crate::keys;
use crate::scrub::scrub;

/// Records `compaction_decision_probe` and `compact_session_history` as OpenInference spans.
///
/// Plug it into the engine with `EngineBuilder::telemetry`. The engine opens spans only after
/// the envelope gate opens, so a fast exit records nothing.
pub struct OpenInferenceTelemetry {
    tracer: BoxedTracer,
    config: TelemetryConfig,
    estimator: Arc<dyn TokenEstimator>,
}

impl std::fmt::Debug for OpenInferenceTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenInferenceTelemetry")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenInferenceTelemetry {
    /// Records spans with `tracer` (for instance `provider.tracer("adaptive-compaction")` or
    /// [`crate::TelemetryGuard::telemetry`]'s).
    pub fn new<T>(tracer: T, config: TelemetryConfig) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        let boxed: Box<dyn ObjectSafeTracer + Send + Sync> = Box::new(tracer);
        OpenInferenceTelemetry {
            tracer: BoxedTracer::new(boxed),
            config,
            estimator: Arc::new(CharsPerToken),
        }
    }

    /// Records spans with the globally installed tracer provider (a no-op until one is
    /// installed with `opentelemetry::global::set_tracer_provider`).
    pub fn global(config: TelemetryConfig) -> Self {
        OpenInferenceTelemetry {
            tracer: opentelemetry::global::tracer(keys::INSTRUMENTATION_SCOPE),
            config,
            estimator: Arc::new(CharsPerToken),
        }
    }

    /// Estimates the summarizer's token counts with `estimator` when the summarizer reports
    /// none (default: compaction-core's [`CharsPerToken`], the engine's default). Use the
    /// engine's estimator so that the span's estimates match its gate figures.
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// The configuration.
    pub fn config(&self) -> TelemetryConfig {
        self.config
    }

    fn start(&self, name: &'static str, attributes: Vec<KeyValue>) -> BoxedSpan {
        self.tracer
            .span_builder(name)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent_context())
    }

    /// `input.value` and `input.mime_type`, masked as configured.
    fn input(&self, value: &str, mime: &'static str, out: &mut Vec<KeyValue>) {
        io_attributes(
            self.config.hide_inputs,
            (keys::INPUT_VALUE, keys::INPUT_MIME_TYPE),
            value,
            mime,
            out,
        );
    }
}

/// The caller's context: its current `tracing` span when OpenTelemetry tracks it, else
/// OpenTelemetry's current context.
fn parent_context() -> Context {
    let from_tracing = tracing::Span::current().context();
    if from_tracing.span().span_context().is_valid() {
        from_tracing
    } else {
        Context::current()
    }
}

fn io_attributes(
    hide: bool,
    (value_key, mime_key): (&'static str, &'static str),
    value: &str,
    mime: &'static str,
    out: &mut Vec<KeyValue>,
) {
    if hide {
        // OpenInference replaces the value and drops its MIME type.
        out.push(KeyValue::new(value_key, keys::REDACTED));
    } else {
        out.push(KeyValue::new(value_key, scrub(value).into_owned()));
        out.push(KeyValue::new(mime_key, mime));
    }
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Ends `span` with status OK, or ERROR plus an `exception` event naming `failure`.
fn end(mut span: BoxedSpan, failure: Option<&str>) {
    match failure {
        None => span.set_status(Status::Ok),
        Some(failure) => {
            let message = scrub(failure).into_owned();
            span.add_event(
                keys::EXCEPTION_EVENT,
                vec![KeyValue::new(keys::EXCEPTION_MESSAGE, message.clone())],
            );
            span.set_status(Status::error(message));
        }
    }
    span.end();
}

impl Telemetry for OpenInferenceTelemetry {
    fn start_probe(&self, start: &ProbeStart<'_>) -> Box<dyn ProbeSpan> {
        let request = start.request;
        let input = json!({
            "earlier_discussion": request.state.earlier_discussion,
            "latest_turn": request.state.latest_turn,
            "rubric": request.questions.compaction_warranted.instructions,
        });
        let metadata = json!({
            "completed_turns": start.completed_turns,
            "prompt_tokens": start.prompt_tokens,
        });
        let mut attributes = vec![
            KeyValue::new(
                keys::OPENINFERENCE_SPAN_KIND,
                self.config.probe_kind.as_str(),
            ),
            KeyValue::new(keys::DECISION_SYSTEM, start.model.system.clone()),
            KeyValue::new(keys::DECISION_PROVIDER, start.model.provider.clone()),
            KeyValue::new(
                keys::COMPACTION_DECISION_CONFIGURED_MODEL,
                request.model.clone(),
            ),
            KeyValue::new(keys::COMPACTION_DECISION_THRESHOLD, start.threshold),
            KeyValue::new(keys::METADATA, metadata.to_string()),
        ];
        self.input(&input.to_string(), keys::MIME_JSON, &mut attributes);
        Box::new(OpenProbe {
            span: self.start(keys::PROBE_SPAN_NAME, attributes),
            started: Instant::now(),
            requested_model: start.model.model.clone(),
            hide_outputs: self.config.hide_outputs,
        })
    }

    fn start_summarize(&self, start: &SummarizeStart<'_>) -> Box<dyn SummarizeSpan> {
        let (first, last) = start.range;
        let metadata = json!({
            "slice_turns": start.slice_turns,
            "retained_turns": start.retained_turns,
            "forced": start.forced,
            "consolidates_previous_summary": start.request.previous_summary.is_some(),
        });
        let mut attributes = vec![
            KeyValue::new(keys::OPENINFERENCE_SPAN_KIND, keys::SPAN_KIND_LLM),
            KeyValue::new(keys::LLM_SYSTEM, start.model.system.clone()),
            KeyValue::new(keys::LLM_PROVIDER, start.model.provider.clone()),
            KeyValue::new(
                keys::COMPACTION_SUMMARIZE_RANGE,
                Value::Array(Array::F64(vec![first.seconds(), last.seconds()])),
            ),
            KeyValue::new(
                keys::COMPACTION_SUMMARIZE_SLICE_TURNS,
                count(start.slice_turns as u64),
            ),
            KeyValue::new(
                keys::COMPACTION_SUMMARIZE_RETAINED_TURNS,
                count(start.retained_turns as u64),
            ),
            KeyValue::new(keys::COMPACTION_SUMMARIZE_FORCED, start.forced),
            KeyValue::new(keys::METADATA, metadata.to_string()),
        ];
        self.input(&start.request.prompt, keys::MIME_TEXT, &mut attributes);
        Box::new(OpenSummarize {
            span: self.start(keys::SUMMARIZE_SPAN_NAME, attributes),
            requested_model: start.request.model.clone(),
            prompt_tokens_estimate: self.estimator.estimate(&start.request.prompt) as u64,
            estimator: Arc::clone(&self.estimator),
            hide_outputs: self.config.hide_outputs,
        })
    }
}

/// An open `compaction_decision_probe`.
struct OpenProbe {
    span: BoxedSpan,
    started: Instant,
    /// The adapter's own model (`ModelInfo::model`).
    requested_model: String,
    hide_outputs: bool,
}

impl OpenProbe {
    fn model_attributes(&self, answer: Option<&DecisionAnswer>, out: &mut Vec<KeyValue>) {
        let served = answer.and_then(|a| a.served_model.as_deref());
        // The model that answered: the served one, else the adapter's own.
        out.push(KeyValue::new(
            keys::COMPACTION_DECISION_MODEL,
            served.unwrap_or(&self.requested_model).to_owned(),
        ));
        match served {
            Some(served) if served != self.requested_model => {
                out.push(KeyValue::new(keys::DECISION_MODEL_NAME, served.to_owned()));
                out.push(KeyValue::new(
                    keys::DECISION_REQUEST_MODEL_NAME,
                    self.requested_model.clone(),
                ));
                out.push(KeyValue::new(
                    keys::DECISION_RESPONSE_MODEL_NAME,
                    served.to_owned(),
                ));
            }
            _ => out.push(KeyValue::new(
                keys::DECISION_MODEL_NAME,
                self.requested_model.clone(),
            )),
        }
        let usage = answer.and_then(|a| a.usage).unwrap_or_default();
        if let Some(n) = usage.input {
            out.push(KeyValue::new(keys::DECISION_TOKEN_COUNT_INPUT, count(n)));
        }
        if let Some(n) = usage.output {
            out.push(KeyValue::new(keys::DECISION_TOKEN_COUNT_OUTPUT, count(n)));
        }
    }
}

impl ProbeSpan for OpenProbe {
    fn finish(self: Box<Self>, end_: &ProbeEnd<'_>) {
        let latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let probability = end_.probability.map(|p| p.value());
        let mut attributes = vec![
            KeyValue::new(
                keys::COMPACTION_DECISION_LATENCY_MS,
                whole_milliseconds(latency_ms),
            ),
            KeyValue::new(keys::COMPACTION_DECISION_LATENCY_MS_PRECISE, latency_ms),
            KeyValue::new(keys::COMPACTION_DECISION_VERDICT, end_.verdict.as_str()),
        ];
        if let Some(p) = probability {
            attributes.push(KeyValue::new(keys::COMPACTION_DECISION_PROBABILITY, p));
        }
        self.model_attributes(end_.answer, &mut attributes);
        let output = json!({ "probability": probability, "verdict": end_.verdict.as_str() });
        io_attributes(
            self.hide_outputs,
            (keys::OUTPUT_VALUE, keys::OUTPUT_MIME_TYPE),
            &output.to_string(),
            keys::MIME_JSON,
            &mut attributes,
        );
        let mut span = self.span;
        span.set_attributes(attributes);
        end(span, end_.failure.map(compaction_core::Failure::message));
    }
}

/// Milliseconds rounded to a whole number, as an OTLP integer.
fn whole_milliseconds(ms: f64) -> i64 {
    // Saturating float-to-int conversion; a latency is never negative or NaN.
    ms.round() as i64
}

/// An open `compact_session_history`.
struct OpenSummarize {
    span: BoxedSpan,
    requested_model: String,
    /// The estimator's count of the prompt, for when the summarizer reports none.
    prompt_tokens_estimate: u64,
    estimator: Arc<dyn TokenEstimator>,
    hide_outputs: bool,
}

impl OpenSummarize {
    /// `llm.token_count.*`: the summarizer's own figures, each missing one estimated (and
    /// then [`keys::COMPACTION_SUMMARIZE_TOKEN_COUNTS_ESTIMATED`] set), so that Phoenix shows
    /// counts for every summary, the offline summarizer's included.
    fn token_counts(&self, summary: &Summary, out: &mut Vec<KeyValue>) {
        let usage = summary.usage.unwrap_or_default();
        let prompt = usage.input.unwrap_or(self.prompt_tokens_estimate);
        let completion = usage
            .output
            .unwrap_or_else(|| self.estimator.estimate(&summary.text) as u64);
        out.push(KeyValue::new(keys::LLM_TOKEN_COUNT_PROMPT, count(prompt)));
        out.push(KeyValue::new(
            keys::LLM_TOKEN_COUNT_COMPLETION,
            count(completion),
        ));
        out.push(KeyValue::new(
            keys::LLM_TOKEN_COUNT_TOTAL,
            count(prompt.saturating_add(completion)),
        ));
        if usage.input.is_none() || usage.output.is_none() {
            out.push(KeyValue::new(
                keys::COMPACTION_SUMMARIZE_TOKEN_COUNTS_ESTIMATED,
                true,
            ));
        }
    }
}

impl SummarizeSpan for OpenSummarize {
    fn finish(self: Box<Self>, end_: &SummarizeEnd<'_>) {
        let served = end_.summary.and_then(|s| s.served_model.as_deref());
        let model = served.unwrap_or(&self.requested_model).to_owned();
        let mut attributes = vec![KeyValue::new(keys::LLM_MODEL_NAME, model)];
        if let Some(summary) = end_.summary {
            self.token_counts(summary, &mut attributes);
            io_attributes(
                self.hide_outputs,
                (keys::OUTPUT_VALUE, keys::OUTPUT_MIME_TYPE),
                &summary.text,
                keys::MIME_TEXT,
                &mut attributes,
            );
        }
        let mut span = self.span;
        span.set_attributes(attributes);
        end(span, end_.failure.map(compaction_core::Failure::message));
    }
}
