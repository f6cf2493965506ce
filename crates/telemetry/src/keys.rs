//! Attribute keys and values: OpenInference's semantic conventions plus this project's
//! `compaction.*` namespace, spelled once.
//!
//! There is no OpenInference crate for opentelemetry 0.33, so the keys live here as
//! `&'static str` constants. Names follow OpenInference's `spec/semantic_conventions.md`,
//! `spec/llm_spans.md` and `spec/decision_spans.md`.

/// The name of the decision-probe span.
pub const PROBE_SPAN_NAME: &str = "compaction_decision_probe";
/// The name of the summarization span.
pub const SUMMARIZE_SPAN_NAME: &str = "compact_session_history";

/// The instrumentation scope every span of this crate is recorded under.
pub const INSTRUMENTATION_SCOPE: &str = "adaptive-compaction";

/// OpenInference's required span-kind attribute.
pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
/// The operation's input (JSON or text).
pub const INPUT_VALUE: &str = "input.value";
/// The MIME type of [`INPUT_VALUE`].
pub const INPUT_MIME_TYPE: &str = "input.mime_type";
/// The operation's output (JSON or text).
pub const OUTPUT_VALUE: &str = "output.value";
/// The MIME type of [`OUTPUT_VALUE`].
pub const OUTPUT_MIME_TYPE: &str = "output.mime_type";
/// Free-form metadata as a JSON string.
pub const METADATA: &str = "metadata";

/// The LLM that served the call.
pub const LLM_MODEL_NAME: &str = "llm.model_name";
/// The LLM API family (`openai`, `openrouter`, …).
pub const LLM_SYSTEM: &str = "llm.system";
/// Who hosts the LLM.
pub const LLM_PROVIDER: &str = "llm.provider";
/// Prompt tokens.
pub const LLM_TOKEN_COUNT_PROMPT: &str = "llm.token_count.prompt";
/// Completion tokens.
pub const LLM_TOKEN_COUNT_COMPLETION: &str = "llm.token_count.completion";
/// Prompt plus completion tokens.
pub const LLM_TOKEN_COUNT_TOTAL: &str = "llm.token_count.total";

/// The decision API ecosystem the call conforms to.
pub const DECISION_SYSTEM: &str = "decision.system";
/// Who hosts the decision model.
pub const DECISION_PROVIDER: &str = "decision.provider";
/// The most specific decision-model id known: the served model, else the requested one.
pub const DECISION_MODEL_NAME: &str = "decision.model_name";
/// The requested decision model, set only when the served one differs.
pub const DECISION_REQUEST_MODEL_NAME: &str = "decision.request.model_name";
/// The served decision model, set only when it differs from the requested one.
pub const DECISION_RESPONSE_MODEL_NAME: &str = "decision.response.model_name";
/// Input tokens the decision model reported.
pub const DECISION_TOKEN_COUNT_INPUT: &str = "decision.token_count.input";
/// Output tokens the decision model reported.
pub const DECISION_TOKEN_COUNT_OUTPUT: &str = "decision.token_count.output";

/// The decision model that answered: the model the host reported serving the call, else the
/// adapter's own model (`ModelInfo::model`: the offline model names itself).
pub const COMPACTION_DECISION_MODEL: &str = "compaction.decision.model";
/// The decision-model slug of the settings (`decision_model`), whoever answered.
pub const COMPACTION_DECISION_CONFIGURED_MODEL: &str = "compaction.decision.configured_model";
/// The probe's round-trip latency in whole milliseconds (an integer, as the spec shows it),
/// measured by this crate.
pub const COMPACTION_DECISION_LATENCY_MS: &str = "compaction.decision.latency_ms";
/// The same latency in milliseconds as a float, for sub-millisecond (offline) probes.
pub const COMPACTION_DECISION_LATENCY_MS_PRECISE: &str = "compaction.decision.latency_ms_precise";
/// τ.
pub const COMPACTION_DECISION_THRESHOLD: &str = "compaction.decision.threshold";
/// `COMPRESS` or `CONTINUE`.
pub const COMPACTION_DECISION_VERDICT: &str = "compaction.decision.verdict";
/// The validated probability p, when the probe succeeded.
pub const COMPACTION_DECISION_PROBABILITY: &str = "compaction.decision.probability";

/// `[t_1, t_{N-K}]` in epoch seconds, as an f64 array.
pub const COMPACTION_SUMMARIZE_RANGE: &str = "compaction.summarize.range";
/// Turns folded by this summarization (the new ones only; a turn that never completed, an
/// errored one say, is folded with the rest).
pub const COMPACTION_SUMMARIZE_SLICE_TURNS: &str = "compaction.summarize.slice_turns";
/// True when the hard backstop forced the compaction.
pub const COMPACTION_SUMMARIZE_FORCED: &str = "compaction.summarize.forced";
/// K: completed turns kept verbatim after the range (the compaction event's
/// `retained_turns`).
pub const COMPACTION_SUMMARIZE_RETAINED_TURNS: &str = "compaction.summarize.retained_turns";
/// True when some `llm.token_count.*` figure is this crate's estimate (compaction-core's
/// token estimator on the prompt and the summary) because the summarizer reported none
/// (the offline summarizer never does). Absent when every figure is the model's.
pub const COMPACTION_SUMMARIZE_TOKEN_COUNTS_ESTIMATED: &str =
    "compaction.summarize.token_counts_estimated";

/// The name of the host's per-turn span (the parent of both compaction spans).
pub const TURN_SPAN_NAME: &str = "turn";
/// OpenInference's session id: Phoenix's Sessions view groups traces by it.
pub const SESSION_ID: &str = "session.id";
/// OpenInference's user id.
pub const USER_ID: &str = "user.id";
/// The session's app name on the turn span.
pub const COMPACTION_APP: &str = "compaction.app";
/// The 1-based turn number (an integer) on the turn span.
pub const COMPACTION_TURN: &str = "compaction.turn";
/// The resource attribute Phoenix files spans under a project by.
pub const OPENINFERENCE_PROJECT_NAME: &str = "openinference.project.name";

/// The OpenTelemetry exception event's name.
pub const EXCEPTION_EVENT: &str = "exception";
/// The exception event's message attribute.
pub const EXCEPTION_MESSAGE: &str = "exception.message";

/// `openinference.span.kind` for an evaluation.
pub const SPAN_KIND_EVALUATOR: &str = "EVALUATOR";
/// `openinference.span.kind` for a decision-model call.
pub const SPAN_KIND_DECISION: &str = "DECISION";
/// `openinference.span.kind` for an LLM call.
pub const SPAN_KIND_LLM: &str = "LLM";
/// `openinference.span.kind` for a chain of steps (the host's turn).
pub const SPAN_KIND_CHAIN: &str = "CHAIN";

/// MIME type of JSON values.
pub const MIME_JSON: &str = "application/json";
/// MIME type of plain-text values.
pub const MIME_TEXT: &str = "text/plain";

/// What a hidden value is replaced with (OpenInference's `REDACTED_VALUE`).
pub const REDACTED: &str = compaction_core::REDACTED;
