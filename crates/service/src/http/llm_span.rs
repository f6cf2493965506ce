//! The coordinator's model call as an OpenInference LLM span (`coordinator_llm`, a child of
//! `coordinator_turn`): the model, the prompt's messages (`llm.input_messages.{i}.message.*`),
//! the reply (`llm.output_messages.0.message.*`) and the token counts — the provider's usage
//! when it sends it, else the core's estimate with `compaction.coordinator.token_counts_estimated = true` — so the
//! tokens the user pays for reach Phoenix. `OPENINFERENCE_HIDE_INPUTS`/`_OUTPUTS` hide the
//! messages; text is scrubbed of credentials either way.
//!
//! Message attributes are flattened with indices, which `tracing` fields cannot name, so they
//! are set through `tracing-opentelemetry`'s span extension (a no-op without its layer).

use compaction_core::ModelInfo;
use compaction_core::scrub;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::coordinator::CoordinatorRequest;

/// What a hidden message shows (OpenInference's convention).
const REDACTED: &str = "__REDACTED__";

/// One coordinator call's span; ended when dropped.
pub(super) struct LlmSpan {
    span: tracing::Span,
    hide_outputs: bool,
}

impl LlmSpan {
    /// Starts the span under `parent` for `request` to `model`.
    pub(super) fn start(
        parent: &tracing::Span,
        model: &ModelInfo,
        request: &CoordinatorRequest,
        hide: (bool, bool),
    ) -> Self {
        let span = tracing::info_span!(
            parent: parent,
            "coordinator_llm",
            otel.name = "coordinator_llm",
            openinference.span.kind = "LLM",
            llm.model_name = %model.model,
            llm.system = %model.system,
            llm.provider = %model.provider,
            llm.token_count.prompt = tracing::field::Empty,
            llm.token_count.completion = tracing::field::Empty,
            llm.token_count.total = tracing::field::Empty,
            compaction.coordinator.token_counts_estimated = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
        );
        let (hide_inputs, hide_outputs) = hide;
        for (i, message) in request.messages.iter().enumerate() {
            let prefix = format!("llm.input_messages.{i}.message");
            span.set_attribute(format!("{prefix}.role"), message.role.clone());
            let content = if hide_inputs {
                REDACTED.to_owned()
            } else {
                scrub(&message.content).into_owned()
            };
            span.set_attribute(format!("{prefix}.content"), content);
        }
        LlmSpan { span, hide_outputs }
    }

    /// The reply arrived whole: its text and the token counts (`reported`: from the
    /// provider's usage; else `estimated`).
    pub(super) fn answered(&self, text: &str, reported: Option<(u64, u64)>, estimated: (u64, u64)) {
        self.output(text);
        let ((prompt, completion), estimate) = match reported {
            Some(usage) => (usage, false),
            None => (estimated, true),
        };
        self.span.record("llm.token_count.prompt", prompt);
        self.span.record("llm.token_count.completion", completion);
        self.span
            .record("llm.token_count.total", prompt + completion);
        if estimate {
            self.span
                .record("compaction.coordinator.token_counts_estimated", true);
        }
        self.span.record("otel.status_code", "OK");
    }

    /// The call failed, or ended before the reply did (`text`: what streamed).
    pub(super) fn failed(&self, text: &str, message: &str) {
        if !text.is_empty() {
            self.output(text);
        }
        self.span.record("otel.status_code", "ERROR");
        self.span
            .record("otel.status_description", scrub(message).as_ref());
    }

    fn output(&self, text: &str) {
        let prefix = "llm.output_messages.0.message";
        self.span
            .set_attribute(format!("{prefix}.role"), "assistant".to_owned());
        let content = if self.hide_outputs {
            REDACTED.to_owned()
        } else {
            scrub(text).into_owned()
        };
        self.span
            .set_attribute(format!("{prefix}.content"), content);
    }
}
