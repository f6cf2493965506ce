//! The per-turn root span of the reference service and the engine's spans under it, through
//! the span adapter into the SDK's in-memory exporter. Its own test binary: the `tracing`
//! subscriber is this thread's default, and other tests in the same process would race the
//! callsites' cached interest.

mod common;

use std::sync::Arc;

use common::*;
use compaction_core::Telemetry;
use compaction_core::testing::ScriptedDecisionModel;
use service::http::{OfflineCoordinator, ServeOptions};

/// The SDK's in-memory exporter behind both the engine's span adapter and a `tracing`
/// subscriber (this thread's default), as `compaction serve --otlp` wires them.
struct Traced {
    exporter: opentelemetry_sdk::trace::InMemorySpanExporter,
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
    _subscriber: tracing::subscriber::DefaultGuard,
}

impl Traced {
    fn new() -> Self {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        let exporter = opentelemetry_sdk::trace::InMemorySpanExporter::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("serve"));
        Traced {
            exporter,
            provider,
            _subscriber: tracing::subscriber::set_default(
                tracing_subscriber::registry().with(layer),
            ),
        }
    }

    fn telemetry(&self) -> Arc<dyn Telemetry> {
        use opentelemetry::trace::TracerProvider as _;
        Arc::new(telemetry::OpenInferenceTelemetry::new(
            self.provider.tracer(telemetry::keys::INSTRUMENTATION_SCOPE),
            telemetry::TelemetryConfig::default(),
        ))
    }

    /// The finished spans, once `turns` turn spans have ended (they end when the turn's
    /// task does, just after its evaluation is reported).
    async fn spans_after(&self, turns: usize) -> Vec<opentelemetry_sdk::trace::SpanData> {
        for _ in 0..100_000 {
            let spans = self.exporter.get_finished_spans().expect("spans");
            if spans
                .iter()
                .filter(|s| s.name == "coordinator_turn")
                .count()
                >= turns
            {
                return spans;
            }
            tokio::task::yield_now().await;
        }
        panic!("{turns} turn spans never ended");
    }
}

fn attribute(span: &opentelemetry_sdk::trace::SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// Each turn has one root span (OpenInference CHAIN, `session.id`); a fast exit records no
/// compaction span; the probe and summarize spans of the turn that opened the gate nest
/// under that turn's span, in its trace.
#[tokio::test]
async fn the_engines_spans_nest_under_the_turn_that_caused_them() {
    let traced = Traced::new();
    let (summarizer, _started, release) = gated();
    release.add_permits(10);
    let rig = start_traced(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer,
        ServeOptions::default(),
        Some(traced.telemetry()),
        lanes(),
    )
    .await;
    let key = rig.create("s").await;
    let mut reports = rig.server.lanes().subscribe();
    let mut invocations = Vec::new();
    for n in 1..=3 {
        let events = rig.chat(&key, &format!("Question {n}?")).await;
        invocations.push(
            done(&events)["invocation_id"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
        let report = reports.recv().await.expect("report");
        let expected = if n < 3 { "fast-exit" } else { "compressed" };
        assert_eq!(report.outcomes[0].label(), expected, "turn {n}");
        if n == 2 {
            let spans = traced.spans_after(2).await;
            let names: Vec<&str> = spans
                .iter()
                .map(|s| s.name.as_ref())
                .filter(|name| *name != "coordinator_llm")
                .collect();
            assert_eq!(
                names, ["coordinator_turn"; 2],
                "a fast exit opens no compaction span"
            );
        }
    }
    let spans = traced.spans_after(3).await;
    let turn_of = |invocation: &str| {
        spans
            .iter()
            .find(|s| {
                s.name == "coordinator_turn"
                    && attribute(s, "invocation.id").as_deref() == Some(invocation)
            })
            .expect("turn span")
    };
    let third = turn_of(&invocations[2]);
    assert_eq!(
        attribute(third, "openinference.span.kind").as_deref(),
        Some("CHAIN")
    );
    assert_eq!(
        attribute(third, "session.id").as_deref(),
        Some("app/user/s")
    );
    assert_eq!(
        attribute(third, "compaction.session_id").as_deref(),
        Some("s")
    );
    assert_eq!(attribute(third, "user.id").as_deref(), Some("user"));
    assert_eq!(
        attribute(third, "input.value").as_deref(),
        Some("Question 3?")
    );
    assert_eq!(
        attribute(third, "input.mime_type").as_deref(),
        Some("text/plain")
    );
    let output = attribute(third, "output.value").expect("output.value");
    assert!(output.contains("Question 3?"), "the reply: {output}");
    assert_eq!(
        third.status,
        opentelemetry::trace::Status::Ok,
        "a stored reply is status OK"
    );
    for name in [
        telemetry::keys::PROBE_SPAN_NAME,
        telemetry::keys::SUMMARIZE_SPAN_NAME,
    ] {
        let children: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(children.len(), 1, "one {name} span: {spans:?}");
        assert_eq!(
            children[0].parent_span_id,
            third.span_context.span_id(),
            "{name}"
        );
        assert_eq!(
            children[0].span_context.trace_id(),
            third.span_context.trace_id(),
            "{name}"
        );
    }
    // The coordinator's own call: an LLM span under the turn, with the prompt and the reply.
    let llm: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "coordinator_llm" && s.parent_span_id == third.span_context.span_id())
        .collect();
    assert_eq!(llm.len(), 1, "one LLM span per turn");
    let llm = llm[0];
    assert_eq!(
        attribute(llm, "openinference.span.kind").as_deref(),
        Some("LLM")
    );
    assert_eq!(
        attribute(llm, "llm.model_name"),
        Some(service::http::Coordinator::info(&OfflineCoordinator::default()).model)
    );
    // Turns 1 and 2 (two messages each), then the question.
    assert_eq!(
        attribute(llm, "llm.input_messages.0.message.content").as_deref(),
        Some("Question 1?")
    );
    assert_eq!(
        attribute(llm, "llm.input_messages.4.message.role").as_deref(),
        Some("user")
    );
    assert_eq!(
        attribute(llm, "llm.input_messages.4.message.content").as_deref(),
        Some("Question 3?")
    );
    assert_eq!(attribute(llm, "llm.input_messages.5.message.role"), None);
    assert_eq!(
        attribute(llm, "llm.output_messages.0.message.content"),
        attribute(third, "output.value")
    );
    let count = |key: &str| -> u64 { attribute(llm, key).expect(key).parse().expect(key) };
    assert!(count("llm.token_count.prompt") > 0);
    assert_eq!(
        count("llm.token_count.total"),
        count("llm.token_count.prompt") + count("llm.token_count.completion")
    );
    assert_eq!(
        attribute(llm, "compaction.coordinator.token_counts_estimated"),
        None,
        "the stand-in reports usage"
    );
    assert_eq!(llm.status, opentelemetry::trace::Status::Ok);
    for earlier in &invocations[..2] {
        let id = turn_of(earlier).span_context.span_id();
        assert!(
            spans
                .iter()
                .filter(|s| s.parent_span_id == id)
                .all(|s| s.name == "coordinator_llm"),
            "a fast-exit turn has no compaction span"
        );
    }
    assert!(rig.stop().await);
}

/// Two users' sessions that share an id are two Phoenix sessions (`session.id` is
/// `app/user/id`); a failed coordinator turn is status ERROR with the message, and hidden
/// inputs and outputs show `__REDACTED__`.
#[tokio::test]
async fn session_ids_are_unique_and_failures_and_privacy_show_on_the_turn_span() {
    struct Fails;
    #[compaction_core::async_trait]
    impl service::http::Coordinator for Fails {
        fn info(&self) -> compaction_core::ModelInfo {
            compaction_core::ModelInfo::new("test", "local", "fails")
        }
        async fn stream(
            &self,
            _: &service::http::CoordinatorRequest,
        ) -> Result<service::http::ReplyStream, compaction_core::AdapterError> {
            Err("the upstream said no".into())
        }
    }
    let traced = Traced::new();
    let (summarizer, _started, release) = gated();
    release.add_permits(10);
    let rig = start_traced(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default().hide(true, true),
        Some(traced.telemetry()),
        lanes(),
    )
    .await;
    for user in ["alice", "bob"] {
        let r = rig
            .http
            .post(format!("{}/v1/sessions", rig.base))
            .json(&serde_json::json!({"app": "app", "user": user, "id": "s1"}))
            .send()
            .await
            .expect("create");
        assert_eq!(r.status(), reqwest::StatusCode::CREATED);
        let key = compaction_core::SessionKey::new("app", user, "s1");
        let _ = rig.chat(&key, "A secret question?").await;
    }
    let spans = traced.spans_after(2).await;
    let mut ids: Vec<String> = spans
        .iter()
        .filter(|s| s.name == "coordinator_turn")
        .filter_map(|s| attribute(s, "session.id"))
        .collect();
    ids.sort();
    assert_eq!(ids, ["app/alice/s1", "app/bob/s1"]);
    for span in spans.iter().filter(|s| s.name == "coordinator_llm") {
        for key in [
            "llm.input_messages.0.message.content",
            "llm.output_messages.0.message.content",
        ] {
            assert_eq!(
                attribute(span, key).as_deref(),
                Some("__REDACTED__"),
                "{key}"
            );
        }
    }
    for span in spans.iter().filter(|s| s.name == "coordinator_turn") {
        assert_eq!(
            attribute(span, "input.value").as_deref(),
            Some("__REDACTED__")
        );
        assert_eq!(
            attribute(span, "output.value").as_deref(),
            Some("__REDACTED__")
        );
    }
    assert!(rig.stop().await);

    let traced = Traced::new();
    let (summarizer, _started, release) = gated();
    release.add_permits(10);
    let rig = start_traced(
        Arc::new(Fails),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
        Some(traced.telemetry()),
        lanes(),
    )
    .await;
    let key = rig.create("s").await;
    let events = rig.chat(&key, "Will this fail?").await;
    assert_eq!(events.last().expect("an event").event, "error");
    let spans = traced.spans_after(1).await;
    let turn = spans
        .iter()
        .find(|s| s.name == "coordinator_turn")
        .expect("the turn span");
    match &turn.status {
        opentelemetry::trace::Status::Error { description } => {
            assert!(
                description.contains("the upstream said no"),
                "{description}"
            )
        }
        other => panic!("status {other:?}"),
    }
    let llm = spans
        .iter()
        .find(|s| s.name == "coordinator_llm")
        .expect("the LLM span");
    assert!(
        matches!(&llm.status, opentelemetry::trace::Status::Error { description } if description.contains("the upstream said no")),
        "{:?}",
        llm.status
    );
    assert!(rig.stop().await);
}

/// An OpenAI-compatible coordinator: the provider's usage (asked for with
/// `stream_options.include_usage`) is the LLM span's token count; a provider that sends none
/// gets the core's estimate, flagged.
#[tokio::test]
async fn the_llm_span_counts_the_providers_usage_or_flags_an_estimate() {
    use wiremock::matchers::{body_partial_json, method};
    let upstream = wiremock::MockServer::start().await;
    let chunk = |text: &str| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]})
        )
    };
    let with_usage = format!(
        "{}{}data: {}\n\ndata: [DONE]\n\n",
        chunk("Four"),
        chunk(" words here."),
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 123, "completion_tokens": 45}})
    );
    let without = format!("{}data: [DONE]\n\n", chunk("No usage."));
    wiremock::Mock::given(method("POST"))
        .and(body_partial_json(
            serde_json::json!({"stream_options": {"include_usage": true}}),
        ))
        .respond_with(
            wiremock::ResponseTemplate::new(200).set_body_raw(with_usage, "text/event-stream"),
        )
        .up_to_n_times(1)
        .mount(&upstream)
        .await;
    wiremock::Mock::given(method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(200).set_body_raw(without, "text/event-stream"),
        )
        .mount(&upstream)
        .await;
    let traced = Traced::new();
    let (summarizer, _started, release) = gated();
    release.add_permits(10);
    let rig = start_traced(
        Arc::new(service::http::OpenAiCompatible::new(
            &format!("{}/v1", upstream.uri()),
            "provider/model-x",
            None,
        )),
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default(),
        Some(traced.telemetry()),
        lanes(),
    )
    .await;
    let key = rig.create("s").await;
    let _ = rig.chat(&key, "First?").await;
    let _ = rig.chat(&key, "Second?").await;
    let spans = traced.spans_after(2).await;
    let llm: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "coordinator_llm")
        .collect();
    assert_eq!(llm.len(), 2);
    let first = llm
        .iter()
        .find(|s| {
            attribute(s, "llm.output_messages.0.message.content").as_deref()
                == Some("Four words here.")
        })
        .expect("the first call's span");
    assert_eq!(
        attribute(first, "llm.model_name").as_deref(),
        Some("provider/model-x")
    );
    assert_eq!(
        attribute(first, "llm.token_count.prompt").as_deref(),
        Some("123")
    );
    assert_eq!(
        attribute(first, "llm.token_count.completion").as_deref(),
        Some("45")
    );
    assert_eq!(
        attribute(first, "llm.token_count.total").as_deref(),
        Some("168")
    );
    assert_eq!(
        attribute(first, "compaction.coordinator.token_counts_estimated"),
        None
    );
    let second = llm
        .iter()
        .find(|s| {
            attribute(s, "llm.output_messages.0.message.content").as_deref() == Some("No usage.")
        })
        .expect("the second call's span");
    assert_eq!(
        attribute(second, "compaction.coordinator.token_counts_estimated").as_deref(),
        Some("true")
    );
    assert!(attribute(second, "llm.token_count.prompt").is_some());
    assert!(rig.stop().await);
}
