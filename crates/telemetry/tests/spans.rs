//! The two compaction spans as an OpenTelemetry backend receives them: driven through the
//! real engine with compaction-core's in-memory fakes, recorded by the SDK's in-memory
//! exporter, nested under a caller's `tracing` span.

use std::collections::BTreeMap;
use std::sync::Arc;

use compaction_core::testing::{
    EventFactory, InMemoryStore, RecordingSummarizer, ScriptedDecisionModel, SequentialIds,
    SteppingClock,
};
use compaction_core::{
    DecisionAnswer, DecisionModel, DecisionState, Engine, Failure, FailureKind, ModelInfo, Outcome,
    Probability, ProbeEnd, ProbeRequest, ProbeStart, Revision, Session, SessionKey, Summarizer,
    Telemetry, TokenUsage, Verdict,
};
use opentelemetry::trace::{
    Span as _, SpanId, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Array, Context, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use proptest::prelude::*;
use serde_json::json;
use telemetry::{OpenInferenceTelemetry, ProbeSpanKind, TelemetryConfig, keys};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// An in-memory exporter, a provider on it, and a `tracing` subscriber (for this thread)
/// whose spans go to the same provider, as a program's turn spans would.
struct Traced {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _subscriber: tracing::subscriber::DefaultGuard,
}

impl Traced {
    fn new() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("caller"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false);
        let subscriber = tracing_subscriber::registry().with(layer);
        Traced {
            exporter,
            provider,
            _subscriber: tracing::subscriber::set_default(subscriber),
        }
    }

    fn telemetry(&self, config: TelemetryConfig) -> Arc<OpenInferenceTelemetry> {
        Arc::new(OpenInferenceTelemetry::new(
            self.provider.tracer(keys::INSTRUMENTATION_SCOPE),
            config,
        ))
    }

    fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }

    fn span(&self, name: &str) -> SpanData {
        let mut found: Vec<_> = self
            .spans()
            .into_iter()
            .filter(|s| s.name == name)
            .collect();
        assert_eq!(found.len(), 1, "expected one {name} span, got {found:?}");
        found.remove(0)
    }
}

fn key() -> SessionKey {
    SessionKey::new("zocrates", "u1", "s1")
}

/// `turns` research Q&A turns; the last coordinator answer reports `prompt_tokens`.
fn session(turns: usize, prompt_tokens: u64, user_text: &str) -> Session {
    let mut factory = EventFactory::new();
    let mut events = Vec::new();
    for i in 1..=turns {
        events.extend(factory.conversational_turn(
            &format!("inv-{i}"),
            &format!("{user_text} (question {i})"),
            &format!("Answer {i}: the cited papers disagree on the baseline."),
        ));
    }
    let last = events.pop().unwrap().with_prompt_tokens(prompt_tokens);
    events.push(last);
    Session {
        key: key(),
        state: serde_json::Map::new(),
        events,
        revision: Revision(0),
    }
}

const QUESTION: &str = "Compare dense and sparse retrieval for long papers";

/// Runs one post-turn evaluation inside a caller span `turn`; returns the outcome and the
/// caller span's id.
async fn evaluate(
    session: Session,
    decision: Arc<dyn DecisionModel>,
    summarizer: Arc<dyn Summarizer>,
    telemetry: Arc<dyn Telemetry>,
) -> (Outcome, SpanId) {
    let store = Arc::new(InMemoryStore::new());
    store.insert(session);
    let engine = Engine::builder(
        decision,
        summarizer,
        store,
        Arc::new(SteppingClock::starting_at(1_800_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .telemetry(telemetry)
    .build()
    .unwrap();
    let turn = tracing::info_span!("turn");
    let caller = turn.context().span().span_context().span_id();
    assert_ne!(caller, SpanId::INVALID, "the caller span must be tracked");
    let outcome = engine.evaluate_and_compact(&key()).instrument(turn).await;
    (outcome, caller)
}

/// The span's attributes by key; panics when a key was set twice.
fn attributes(span: &SpanData) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for kv in &span.attributes {
        let value = match &kv.value {
            Value::Bool(b) => json!(b),
            Value::I64(i) => json!(i),
            Value::F64(f) => json!(f),
            Value::String(s) => json!(s.as_str()),
            Value::Array(Array::F64(v)) => json!(v),
            other => panic!("unexpected attribute type {other:?}"),
        };
        let previous = out.insert(kv.key.as_str().to_owned(), value);
        assert!(previous.is_none(), "{} set twice on {}", kv.key, span.name);
    }
    out
}

/// What the snapshot shows: name, status, events and attributes, with the measured latency
/// replaced by a placeholder once it is checked to be a sane number.
fn rendered(span: &SpanData) -> serde_json::Value {
    let mut attributes = attributes(span);
    if let Some(latency) = attributes.get_mut(keys::COMPACTION_DECISION_LATENCY_MS) {
        assert!(
            latency.as_i64().is_some_and(|ms| ms >= 0),
            "latency_ms is a whole number of milliseconds: {latency}"
        );
        *latency = json!("[latency_ms]");
    }
    if let Some(latency) = attributes.get_mut(keys::COMPACTION_DECISION_LATENCY_MS_PRECISE) {
        let ms = latency.as_f64().expect("the precise latency is an f64");
        assert!(ms.is_finite() && ms >= 0.0, "latency {ms}");
        *latency = json!("[latency_ms_precise]");
    }
    let status = match &span.status {
        Status::Unset => json!("UNSET"),
        Status::Ok => json!("OK"),
        Status::Error { description } => json!({ "ERROR": description }),
    };
    let events: Vec<_> = span
        .events
        .iter()
        .map(|e| {
            let attrs: BTreeMap<_, _> = e
                .attributes
                .iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect();
            json!({ "name": e.name, "attributes": attrs })
        })
        .collect();
    json!({
        "name": span.name,
        "status": status,
        "events": events,
        "attributes": attributes,
    })
}

fn string_attr(span: &SpanData, key: &str) -> Option<String> {
    attributes(span).get(key).map(|v| {
        v.as_str()
            .unwrap_or_else(|| panic!("{key} is not a string"))
            .to_owned()
    })
}

#[tokio::test]
async fn a_compression_records_the_probe_and_the_summary_under_the_callers_span() {
    let traced = Traced::new();
    let (outcome, caller) = evaluate(
        session(6, 40_000, QUESTION),
        Arc::new(ScriptedDecisionModel::constant(0.82)),
        Arc::new(RecordingSummarizer::new()),
        traced.telemetry(TelemetryConfig::default()),
    )
    .await;
    assert!(matches!(outcome, Outcome::Compressed(_)), "{outcome:?}");

    let spans = traced.spans();
    assert_eq!(spans.len(), 3, "turn, probe, summary: {spans:?}");
    let turn = traced.span("turn");
    assert_eq!(turn.span_context.span_id(), caller);
    let probe = traced.span(keys::PROBE_SPAN_NAME);
    let summary = traced.span(keys::SUMMARIZE_SPAN_NAME);
    for span in [&probe, &summary] {
        assert_eq!(span.parent_span_id, caller, "{} parent", span.name);
        assert_eq!(
            span.span_context.trace_id(),
            turn.span_context.trace_id(),
            "{} trace",
            span.name
        );
        assert_eq!(
            span.instrumentation_scope.name(),
            keys::INSTRUMENTATION_SCOPE
        );
    }
    assert!(
        probe.end_time <= summary.start_time,
        "the probe ends before the summary starts"
    );

    // The JSON-valued attributes are JSON of the documented shape.
    let input: serde_json::Value =
        serde_json::from_str(&string_attr(&probe, keys::INPUT_VALUE).unwrap()).unwrap();
    let input_keys: Vec<_> = input.as_object().unwrap().keys().cloned().collect();
    assert_eq!(input_keys, ["earlier_discussion", "latest_turn", "rubric"]);
    assert_eq!(input["rubric"], compaction_core::RUBRIC);
    let output: serde_json::Value =
        serde_json::from_str(&string_attr(&probe, keys::OUTPUT_VALUE).unwrap()).unwrap();
    assert_eq!(
        output,
        json!({ "probability": 0.82, "verdict": "COMPRESS" })
    );

    insta::assert_yaml_snapshot!("compress_probe_span", rendered(&probe));
    insta::assert_yaml_snapshot!("compress_summarize_span", rendered(&summary));
}

#[tokio::test]
async fn a_fast_exit_records_no_span() {
    let traced = Traced::new();
    let decision = Arc::new(ScriptedDecisionModel::constant(0.99));
    let summarizer = Arc::new(RecordingSummarizer::new());
    for (turns, tokens) in [(3, 90_000), (6, 10_000)] {
        let (outcome, _) = evaluate(
            session(turns, tokens, QUESTION),
            decision.clone(),
            summarizer.clone(),
            traced.telemetry(TelemetryConfig::default()),
        )
        .await;
        assert!(matches!(outcome, Outcome::FastExit(_)), "{outcome:?}");
    }
    let names: Vec<_> = traced.spans().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["turn", "turn"], "only the caller's spans");
    assert_eq!(decision.calls(), 0);
    assert_eq!(summarizer.calls(), 0);
}

#[tokio::test]
async fn the_hard_backstop_records_only_a_forced_summary() {
    let traced = Traced::new();
    let (outcome, caller) = evaluate(
        session(6, 130_000, QUESTION),
        Arc::new(ScriptedDecisionModel::constant(0.0)),
        Arc::new(RecordingSummarizer::new()),
        traced.telemetry(TelemetryConfig::default()),
    )
    .await;
    assert!(matches!(outcome, Outcome::Forced(_)), "{outcome:?}");
    assert!(
        traced
            .spans()
            .iter()
            .all(|s| s.name != keys::PROBE_SPAN_NAME)
    );
    let summary = traced.span(keys::SUMMARIZE_SPAN_NAME);
    assert_eq!(summary.parent_span_id, caller);
    let attrs = attributes(&summary);
    assert_eq!(attrs[keys::COMPACTION_SUMMARIZE_FORCED], json!(true));
    assert_eq!(attrs[keys::COMPACTION_SUMMARIZE_SLICE_TURNS], json!(4));
    // K, as the compaction event's metadata records it (the spec's default 2).
    assert_eq!(attrs[keys::COMPACTION_SUMMARIZE_RETAINED_TURNS], json!(2));
    let Outcome::Forced(compaction) = &outcome else {
        unreachable!()
    };
    let event = serde_json::to_value(&compaction.event).unwrap();
    let metadata = &event["custom_metadata"];
    assert_eq!(
        metadata["adaptive_compaction"]["retained_turns"],
        attrs[keys::COMPACTION_SUMMARIZE_RETAINED_TURNS],
        "{metadata}"
    );
    assert_eq!(summary.status, Status::Ok);
}

#[tokio::test]
async fn a_failed_probe_is_an_error_span_with_the_fail_open_verdict() {
    let traced = Traced::new();
    let (outcome, caller) = evaluate(
        session(6, 40_000, QUESTION),
        Arc::new(ScriptedDecisionModel::failing(
            "decision host timed out after 2s",
        )),
        Arc::new(RecordingSummarizer::new()),
        traced.telemetry(TelemetryConfig::default()),
    )
    .await;
    assert!(matches!(outcome, Outcome::Continue(_)), "{outcome:?}");
    assert!(
        traced
            .spans()
            .iter()
            .all(|s| s.name != keys::SUMMARIZE_SPAN_NAME)
    );
    let probe = traced.span(keys::PROBE_SPAN_NAME);
    assert_eq!(probe.parent_span_id, caller);
    assert!(
        matches!(probe.status, Status::Error { .. }),
        "{:?}",
        probe.status
    );
    let attrs = attributes(&probe);
    assert_eq!(attrs[keys::COMPACTION_DECISION_VERDICT], json!("CONTINUE"));
    assert!(!attrs.contains_key(keys::COMPACTION_DECISION_PROBABILITY));
    insta::assert_yaml_snapshot!("failed_probe_span", rendered(&probe));
}

#[tokio::test]
async fn a_failed_summary_is_an_error_span_without_output() {
    let traced = Traced::new();
    let (outcome, _) = evaluate(
        session(6, 130_000, QUESTION),
        Arc::new(ScriptedDecisionModel::constant(0.0)),
        Arc::new(RecordingSummarizer::failing("summarizer returned HTTP 503")),
        traced.telemetry(TelemetryConfig::default()),
    )
    .await;
    assert!(
        matches!(outcome, Outcome::SummarizerFailed { .. }),
        "{outcome:?}"
    );
    let summary = traced.span(keys::SUMMARIZE_SPAN_NAME);
    let Status::Error { description } = &summary.status else {
        panic!("status {:?}", summary.status);
    };
    assert_eq!(
        description,
        "summarizer failed: summarizer returned HTTP 503"
    );
    let attrs = attributes(&summary);
    assert!(!attrs.contains_key(keys::OUTPUT_VALUE));
    assert!(!attrs.contains_key(keys::LLM_TOKEN_COUNT_TOTAL));
    // The configured model, since no host reported a served one.
    assert_eq!(
        attrs[keys::LLM_MODEL_NAME],
        json!("openrouter/nvidia/nemotron-3.5-lightning:free")
    );
}

fn lookup(pairs: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
    move |var| {
        pairs
            .iter()
            .find(|(k, _)| *k == var)
            .map(|(_, v)| v.clone())
    }
}

#[tokio::test]
async fn hidden_inputs_and_outputs_are_redacted_like_openinference_does() {
    for (hide_inputs, hide_outputs) in [(true, true), (true, false), (false, true)] {
        let traced = Traced::new();
        let config = TelemetryConfig::from_lookup(lookup(vec![
            (telemetry::HIDE_INPUTS_ENV, hide_inputs.to_string()),
            (telemetry::HIDE_OUTPUTS_ENV, hide_outputs.to_string()),
        ]))
        .unwrap();
        let (outcome, _) = evaluate(
            session(6, 40_000, QUESTION),
            Arc::new(ScriptedDecisionModel::constant(0.9)),
            Arc::new(RecordingSummarizer::new()),
            traced.telemetry(config),
        )
        .await;
        assert!(matches!(outcome, Outcome::Compressed(_)), "{outcome:?}");
        for name in [keys::PROBE_SPAN_NAME, keys::SUMMARIZE_SPAN_NAME] {
            let attrs = attributes(&traced.span(name));
            let input = attrs[keys::INPUT_VALUE].as_str().unwrap();
            let output = attrs[keys::OUTPUT_VALUE].as_str().unwrap();
            assert_eq!(input == keys::REDACTED, hide_inputs, "{name} input {input}");
            assert_eq!(
                output == keys::REDACTED,
                hide_outputs,
                "{name} output {output}"
            );
            assert_eq!(attrs.contains_key(keys::INPUT_MIME_TYPE), !hide_inputs);
            assert_eq!(attrs.contains_key(keys::OUTPUT_MIME_TYPE), !hide_outputs);
            // The user's words (in the probe's input, the summarizer's prompt and, echoed,
            // its summary) appear nowhere once both are hidden.
            let text = serde_json::to_string(&attrs).unwrap();
            if hide_inputs && hide_outputs {
                assert!(!text.contains(QUESTION), "{name}: {text}");
            }
            // Everything that is not content stays visible.
            assert!(attrs.contains_key(keys::OPENINFERENCE_SPAN_KIND));
            assert!(attrs.contains_key(keys::METADATA));
        }
    }
}

#[tokio::test]
async fn the_decision_span_kind_is_a_setting() {
    let traced = Traced::new();
    let config = TelemetryConfig::default().with_probe_kind(ProbeSpanKind::Decision);
    let (_, _) = evaluate(
        session(6, 40_000, QUESTION),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        Arc::new(RecordingSummarizer::new()),
        traced.telemetry(config),
    )
    .await;
    let probe = traced.span(keys::PROBE_SPAN_NAME);
    assert_eq!(
        string_attr(&probe, keys::OPENINFERENCE_SPAN_KIND).as_deref(),
        Some("DECISION")
    );
    assert_eq!(
        string_attr(&probe, keys::COMPACTION_DECISION_VERDICT).as_deref(),
        Some("CONTINUE")
    );
}

/// Everything a span carries, as text: attributes, events, status.
fn everything(span: &SpanData) -> String {
    format!("{:?} {:?} {:?}", span.attributes, span.events, span.status)
}

#[tokio::test]
async fn an_api_key_never_reaches_a_span() {
    const KEY: &str = "sk-or-v1-4f6c2b0e9d8a7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29180716f5e4d3c2b1a09";
    let env = lookup(vec![
        ("OPENROUTER_API_KEY", KEY.to_owned()),
        (telemetry::HIDE_INPUTS_ENV, "false".to_owned()),
    ]);
    let config = TelemetryConfig::from_lookup(&env).unwrap();
    assert!(!format!("{config:?}").contains(KEY));

    // A host that echoes the key in its error, and a user who pasted it into the chat.
    let traced = Traced::new();
    let leaky = format!(
        "HTTP 401: invalid key {} for Authorization: Bearer {}",
        env("OPENROUTER_API_KEY").unwrap(),
        KEY
    );
    let (outcome, _) = evaluate(
        session(
            6,
            40_000,
            &format!("my key is {KEY}, why does the API refuse it?"),
        ),
        Arc::new(ScriptedDecisionModel::failing(&leaky)),
        Arc::new(RecordingSummarizer::new()),
        traced.telemetry(config),
    )
    .await;
    assert!(matches!(outcome, Outcome::Continue(_)));
    let (outcome, _) = evaluate(
        session(
            6,
            130_000,
            &format!("my key is {KEY}, why does the API refuse it?"),
        ),
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        Arc::new(RecordingSummarizer::new()),
        traced.telemetry(config),
    )
    .await;
    assert!(matches!(outcome, Outcome::Forced(_)));

    let spans = traced.spans();
    let probe = traced.span(keys::PROBE_SPAN_NAME);
    let summary = traced.span(keys::SUMMARIZE_SPAN_NAME);
    // The key was there to leak: the prompt, the summary and the failure all carried it.
    assert!(
        string_attr(&summary, keys::INPUT_VALUE)
            .unwrap()
            .contains(keys::REDACTED)
    );
    assert!(
        string_attr(&summary, keys::OUTPUT_VALUE)
            .unwrap()
            .contains(keys::REDACTED)
    );
    assert!(
        matches!(&probe.status, Status::Error { description } if description.contains(keys::REDACTED))
    );
    // Every span, the caller's `turn` included: a standard tracing-opentelemetry layer (as
    // here) exports the engine's own `warn!` as a span event on the turn, so the engine's
    // failure text must be scrubbed too (issue 14 item 9).
    assert_eq!(spans.len(), 4, "two turns, a probe and a summary");
    let turn_events: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "turn")
        .flat_map(|s| s.events.iter())
        .collect();
    assert!(
        turn_events
            .iter()
            .any(|e| format!("{e:?}").contains("fail-open")
                && format!("{e:?}").contains(keys::REDACTED)),
        "the engine's warning is exported, scrubbed: {turn_events:?}"
    );
    for span in &spans {
        assert!(
            !everything(span).contains(&KEY[10..]),
            "{}: {}",
            span.name,
            everything(span)
        );
    }
}

#[test]
fn without_a_tracing_span_the_opentelemetry_context_is_the_parent() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let telemetry = OpenInferenceTelemetry::new(provider.tracer("t"), TelemetryConfig::default());
    let caller = provider.tracer("caller").start("caller");
    let caller_id = caller.span_context().span_id();
    let cx = Context::current_with_span(caller);
    {
        let _attached = cx.clone().attach();
        probe_by_hand(&telemetry, None, None);
    }
    // And with no context at all, a root span.
    probe_by_hand(&telemetry, None, None);
    let spans = exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0].parent_span_id, caller_id);
    assert_eq!(
        spans[0].span_context.trace_id(),
        cx.span().span_context().trace_id()
    );
    assert_eq!(spans[1].parent_span_id, SpanId::INVALID);
}

fn model() -> ModelInfo {
    ModelInfo::new("typesafe", "typesafe", "jev-latest")
}

/// Opens and finishes one probe span through the port, as the engine would.
fn probe_by_hand(
    telemetry: &OpenInferenceTelemetry,
    answer: Option<&DecisionAnswer>,
    failure: Option<&str>,
) {
    let request = ProbeRequest::new(
        "jev-latest",
        DecisionState {
            earlier_discussion: "Earlier: dense retrieval wins on recall.".into(),
            latest_turn: "Now: which tokenizer?".into(),
            turns: Vec::new(),
            older: Vec::new(),
        },
    );
    let span = telemetry.start_probe(&ProbeStart::new(&model(), &request, 0.75, 4, 38_400));
    let probability = answer.and_then(|a| Probability::new(a.probability).ok());
    let verdict = match probability {
        Some(p) => compaction_core::verdict(p, 0.75),
        None => Verdict::Continue,
    };
    let failure = failure
        .or(probability.is_none().then_some("no answer"))
        .map(|f| Failure::new(FailureKind::Other, f));
    span.finish(&ProbeEnd::new(
        probability,
        verdict,
        answer,
        failure.as_ref(),
    ));
}

#[test]
fn the_served_model_names_the_decision_model_and_reported_tokens_are_recorded() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let telemetry = OpenInferenceTelemetry::new(provider.tracer("t"), TelemetryConfig::default());
    let served = DecisionAnswer::new(0.93)
        .with_served_model("jev-1.13.0")
        .with_usage(TokenUsage::new(Some(412), Some(2)));
    let unreported = DecisionAnswer::new(0.2);
    probe_by_hand(&telemetry, Some(&served), None);
    probe_by_hand(&telemetry, Some(&unreported), None);
    let spans = exporter.get_finished_spans().unwrap();
    let first = attributes(&spans[0]);
    assert_eq!(first[keys::DECISION_MODEL_NAME], json!("jev-1.13.0"));
    assert_eq!(
        first[keys::DECISION_REQUEST_MODEL_NAME],
        json!("jev-latest")
    );
    assert_eq!(
        first[keys::DECISION_RESPONSE_MODEL_NAME],
        json!("jev-1.13.0")
    );
    assert_eq!(first[keys::DECISION_TOKEN_COUNT_INPUT], json!(412));
    assert_eq!(first[keys::DECISION_TOKEN_COUNT_OUTPUT], json!(2));
    assert_eq!(first[keys::DECISION_SYSTEM], json!("typesafe"));
    assert_eq!(first[keys::COMPACTION_DECISION_MODEL], json!("jev-1.13.0"));
    let second = attributes(&spans[1]);
    assert_eq!(second[keys::DECISION_MODEL_NAME], json!("jev-latest"));
    assert_eq!(second[keys::COMPACTION_DECISION_MODEL], json!("jev-latest"));
    for absent in [
        keys::DECISION_REQUEST_MODEL_NAME,
        keys::DECISION_RESPONSE_MODEL_NAME,
        keys::DECISION_TOKEN_COUNT_INPUT,
        keys::DECISION_TOKEN_COUNT_OUTPUT,
    ] {
        assert!(!second.contains_key(absent), "{absent}");
    }
    // The probe spans never carry LLM model attributes (decision_spans.md).
    for span in &spans {
        assert!(
            span.attributes
                .iter()
                .all(|kv| !kv.key.as_str().starts_with("llm."))
        );
    }
}

fn answers() -> impl Strategy<Value = Option<DecisionAnswer>> {
    let usage = proptest::option::of(
        (
            proptest::option::of(0u64..u64::MAX),
            proptest::option::of(0u64..10),
        )
            .prop_map(|(input, output)| TokenUsage::new(input, output)),
    );
    proptest::option::of(
        (
            -0.5f64..1.5,
            proptest::option::of(proptest::sample::select(vec!["jev-latest", "jev-1.13.0"])),
            usage,
        )
            .prop_map(|(probability, served, usage)| {
                let mut answer = DecisionAnswer::new(probability);
                if let Some(served) = served {
                    answer = answer.with_served_model(served);
                }
                if let Some(usage) = usage {
                    answer = answer.with_usage(usage);
                }
                answer
            }),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the probe's outcome and the privacy switches, the probe span sets every key
    /// once, always carries its kind, verdict and model, masks exactly what was asked, and is
    /// an error exactly when the probe failed.
    #[test]
    fn every_probe_span_is_well_formed(
        answer in answers(),
        failure in proptest::option::of("[a-z ]{1,20}"),
        hide_inputs in any::<bool>(),
        hide_outputs in any::<bool>(),
        decision_kind in any::<bool>(),
    ) {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        let kind = if decision_kind { ProbeSpanKind::Decision } else { ProbeSpanKind::Evaluator };
        let config = TelemetryConfig { probe_kind: kind, hide_inputs, hide_outputs };
        let telemetry = OpenInferenceTelemetry::new(provider.tracer("t"), config);
        probe_by_hand(&telemetry, answer.as_ref(), failure.as_deref());
        let spans = exporter.get_finished_spans().unwrap();
        prop_assert_eq!(spans.len(), 1);
        let span = &spans[0];
        let attrs = attributes(span);
        prop_assert_eq!(&attrs[keys::OPENINFERENCE_SPAN_KIND], &json!(kind.as_str()));
        for key in [
            keys::DECISION_SYSTEM, keys::DECISION_MODEL_NAME, keys::COMPACTION_DECISION_MODEL,
            keys::COMPACTION_DECISION_THRESHOLD, keys::COMPACTION_DECISION_VERDICT,
            keys::COMPACTION_DECISION_LATENCY_MS, keys::METADATA,
        ] {
            prop_assert!(attrs.contains_key(key), "{} missing", key);
        }
        prop_assert_eq!(attrs[keys::INPUT_VALUE] == json!(keys::REDACTED), hide_inputs);
        prop_assert_eq!(attrs[keys::OUTPUT_VALUE] == json!(keys::REDACTED), hide_outputs);
        let valid = answer.as_ref().is_some_and(|a| (0.0..=1.0).contains(&a.probability));
        let failed = failure.is_some() || !valid;
        prop_assert_eq!(matches!(span.status, Status::Error { .. }), failed);
        prop_assert_eq!(attrs.contains_key(keys::COMPACTION_DECISION_PROBABILITY), valid);
        if !valid {
            prop_assert_eq!(&attrs[keys::COMPACTION_DECISION_VERDICT], &json!("CONTINUE"));
        }
    }
}

/// A summary whose summarizer reported no usage (the offline summarizer never does) and one
/// that reported only its prompt, through the port as the engine drives it.
fn summarize_by_hand(telemetry: &OpenInferenceTelemetry, usage: Option<TokenUsage>) {
    // 160 characters of prompt: 40 tokens by the default estimator.
    let request = compaction_core::SummaryRequest::new(
        "offline-extractive",
        "p".repeat(160),
        None,
        String::new(),
        Vec::new(),
    );
    let span = telemetry.start_summarize(&compaction_core::SummarizeStart::new(
        &model(),
        &request,
        (
            compaction_core::Timestamp::new(1.0).unwrap(),
            compaction_core::Timestamp::new(2.0).unwrap(),
        ),
        3,
        2,
        false,
    ));
    // 41 characters of summary: 11 tokens.
    let mut summary = compaction_core::Summary::new("s".repeat(41));
    if let Some(usage) = usage {
        summary = summary.with_usage(usage);
    }
    span.finish(&compaction_core::SummarizeEnd::new(Some(&summary), None));
}

#[test]
fn a_summarizer_that_reports_no_usage_gets_estimated_token_counts_marked_as_estimates() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let telemetry = OpenInferenceTelemetry::new(provider.tracer("t"), TelemetryConfig::default());
    summarize_by_hand(&telemetry, None);
    summarize_by_hand(&telemetry, Some(TokenUsage::new(Some(4210), None)));
    summarize_by_hand(&telemetry, Some(TokenUsage::new(Some(4210), Some(320))));
    let spans = exporter.get_finished_spans().unwrap();
    let counts = |span: &SpanData| {
        let attrs = attributes(span);
        (
            attrs[keys::LLM_TOKEN_COUNT_PROMPT].clone(),
            attrs[keys::LLM_TOKEN_COUNT_COMPLETION].clone(),
            attrs[keys::LLM_TOKEN_COUNT_TOTAL].clone(),
            attrs
                .get(keys::COMPACTION_SUMMARIZE_TOKEN_COUNTS_ESTIMATED)
                .cloned(),
        )
    };
    assert_eq!(
        counts(&spans[0]),
        (json!(40), json!(11), json!(51), Some(json!(true)))
    );
    assert_eq!(
        counts(&spans[1]),
        (json!(4210), json!(11), json!(4221), Some(json!(true)))
    );
    assert_eq!(
        counts(&spans[2]),
        (json!(4210), json!(320), json!(4530), None)
    );
    for span in &spans {
        assert_eq!(
            attributes(span)[keys::COMPACTION_SUMMARIZE_RETAINED_TURNS],
            json!(2)
        );
    }
}

#[test]
fn the_decision_model_is_the_one_that_answered_and_the_configured_slug_has_its_own_key() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let telemetry = OpenInferenceTelemetry::new(provider.tracer("t"), TelemetryConfig::default());
    // The offline model answers although the settings name a hosted one.
    let offline = ModelInfo::new("offline", "local", "offline-lexical");
    let request = ProbeRequest::new(
        "inception/mercury-decide",
        DecisionState {
            earlier_discussion: "e".into(),
            latest_turn: "l".into(),
            turns: Vec::new(),
            older: Vec::new(),
        },
    );
    for served in [None, Some("offline-lexical-v2")] {
        let span = telemetry.start_probe(&ProbeStart::new(&offline, &request, 0.75, 4, 38_400));
        let mut answer = DecisionAnswer::new(0.4);
        if let Some(served) = served {
            answer = answer.with_served_model(served);
        }
        span.finish(&ProbeEnd::new(
            Probability::new(0.4).ok(),
            Verdict::Continue,
            Some(&answer),
            None,
        ));
    }
    let spans = exporter.get_finished_spans().unwrap();
    let models: Vec<_> = spans
        .iter()
        .map(|s| {
            let attrs = attributes(s);
            (
                attrs[keys::COMPACTION_DECISION_MODEL].clone(),
                attrs[keys::COMPACTION_DECISION_CONFIGURED_MODEL].clone(),
                attrs[keys::DECISION_MODEL_NAME].clone(),
            )
        })
        .collect();
    assert_eq!(
        models,
        [
            (
                json!("offline-lexical"),
                json!("inception/mercury-decide"),
                json!("offline-lexical")
            ),
            (
                json!("offline-lexical-v2"),
                json!("inception/mercury-decide"),
                json!("offline-lexical-v2")
            ),
        ]
    );
}

#[tokio::test]
async fn the_turn_span_is_a_chain_with_session_user_turn_input_and_output() {
    for hide in [false, true] {
        let traced = Traced::new();
        let config = TelemetryConfig {
            hide_inputs: hide,
            hide_outputs: hide,
            ..TelemetryConfig::default()
        };
        let message = "Compare dense and sparse retrieval; my key is sk-or-v1-0123456789abcdef0123";
        let turn = telemetry::turn_span(&config, &key(), 7, message);
        let engine = Engine::builder(
            Arc::new(ScriptedDecisionModel::constant(0.9)),
            Arc::new(RecordingSummarizer::new()),
            {
                let store = Arc::new(InMemoryStore::new());
                store.insert(session(6, 40_000, QUESTION));
                store
            },
            Arc::new(SteppingClock::starting_at(1_800_000_000)),
            Arc::new(SequentialIds::default()),
        )
        .telemetry(traced.telemetry(config))
        .build()
        .unwrap();
        let outcome = engine
            .evaluate_and_compact(&key())
            .instrument(turn.clone())
            .await;
        telemetry::record_turn_output(
            &config,
            &turn,
            &json!({ "outcome": outcome.label() }).to_string(),
        );
        drop(turn);
        let span = traced.span(keys::TURN_SPAN_NAME);
        let attrs = attributes(&span);
        assert_eq!(attrs[keys::OPENINFERENCE_SPAN_KIND], json!("CHAIN"));
        assert_eq!(attrs[keys::SESSION_ID], json!("s1"));
        assert_eq!(attrs[keys::USER_ID], json!("u1"));
        assert_eq!(attrs[keys::COMPACTION_APP], json!("zocrates"));
        assert_eq!(attrs[keys::COMPACTION_TURN], json!(7), "an integer");
        assert!(!attrs.contains_key("session"), "the old key is gone");
        if hide {
            assert_eq!(attrs[keys::INPUT_VALUE], json!(keys::REDACTED));
            assert_eq!(attrs[keys::OUTPUT_VALUE], json!(keys::REDACTED));
            assert!(!attrs.contains_key(keys::INPUT_MIME_TYPE));
            assert!(!attrs.contains_key(keys::OUTPUT_MIME_TYPE));
        } else {
            assert_eq!(
                attrs[keys::INPUT_VALUE],
                json!("Compare dense and sparse retrieval; my key is __REDACTED__")
            );
            assert_eq!(attrs[keys::INPUT_MIME_TYPE], json!(keys::MIME_TEXT));
            assert_eq!(
                attrs[keys::OUTPUT_VALUE],
                json!(r#"{"outcome":"compressed"}"#)
            );
            assert_eq!(attrs[keys::OUTPUT_MIME_TYPE], json!(keys::MIME_JSON));
        }
        // Both compaction spans sit under it.
        for name in [keys::PROBE_SPAN_NAME, keys::SUMMARIZE_SPAN_NAME] {
            assert_eq!(
                traced.span(name).parent_span_id,
                span.span_context.span_id()
            );
        }
    }
}
