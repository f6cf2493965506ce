//! The host's per-turn span: the parent of both compaction spans, and what Phoenix lists as
//! the trace's root row.
//!
//! A host (the CLI's replay, a service) opens it with [`turn_span`] around
//! `Engine::evaluate_and_compact` and records the outcome with [`record_turn_output`]. It is an
//! ordinary `tracing` span, exported by a `tracing-opentelemetry` layer (for instance
//! [`crate::TelemetryGuard::layer`]), carrying OpenInference's attributes:
//! `openinference.span.kind = CHAIN`, `session.id` and `user.id` (Phoenix's Sessions view
//! groups by them), the turn number as an integer, the user's message as `input.value` and the
//! outcome as `output.value` — scrubbed, and masked as [`TelemetryConfig`] says.

use compaction_core::SessionKey;
use compaction_core::scrub;

use crate::config::TelemetryConfig;
use crate::keys;

/// Opens the span of turn `turn` (1-based) of session `key`, whose user message is
/// `user_message`. Instrument the evaluation with it (`.instrument(span.clone())`), then call
/// [`record_turn_output`].
///
/// The field names are the [`keys`] constants `openinference.span.kind`, `session.id`,
/// `user.id`, `compaction.app`, `compaction.turn`, `input.value`, `input.mime_type`,
/// `output.value` and `output.mime_type` (a `tracing` macro needs them as literals; a test
/// checks them against the constants).
pub fn turn_span(
    config: &TelemetryConfig,
    key: &SessionKey,
    turn: u64,
    user_message: &str,
) -> tracing::Span {
    let turn = i64::try_from(turn).unwrap_or(i64::MAX);
    let span = tracing::info_span!(
        "turn",
        "openinference.span.kind" = keys::SPAN_KIND_CHAIN,
        "session.id" = %key.session_id,
        "user.id" = %key.user_id,
        "compaction.app" = %key.app_name,
        "compaction.turn" = turn,
        "input.value" = tracing::field::Empty,
        "input.mime_type" = tracing::field::Empty,
        "output.value" = tracing::field::Empty,
        "output.mime_type" = tracing::field::Empty,
    );
    if config.hide_inputs {
        span.record(keys::INPUT_VALUE, keys::REDACTED);
    } else {
        span.record(keys::INPUT_VALUE, scrub(user_message).as_ref());
        span.record(keys::INPUT_MIME_TYPE, keys::MIME_TEXT);
    }
    span
}

/// Records the turn's outcome (`output_json`, a JSON object such as the replay's record) as
/// the span's `output.value`, scrubbed, or `__REDACTED__` when outputs are hidden.
pub fn record_turn_output(config: &TelemetryConfig, span: &tracing::Span, output_json: &str) {
    if config.hide_outputs {
        span.record(keys::OUTPUT_VALUE, keys::REDACTED);
    } else {
        span.record(keys::OUTPUT_VALUE, scrub(output_json).as_ref());
        span.record(keys::OUTPUT_MIME_TYPE, keys::MIME_JSON);
    }
}
