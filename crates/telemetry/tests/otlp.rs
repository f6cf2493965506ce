//! The OTLP/HTTP exporter against a loopback receiver: the protobuf body that arrives is
//! decoded and checked span by span.

use std::collections::BTreeMap;

use compaction_core::{
    DecisionAnswer, DecisionState, ModelInfo, Probability, ProbeEnd, ProbeRequest, ProbeStart,
    SummarizeEnd, SummarizeStart, Summary, SummaryRequest, Telemetry as _, Timestamp, TokenUsage,
    Verdict,
};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use telemetry::{OtlpSetup, TelemetryConfig, TelemetryGuard, keys};
use tracing_subscriber::layer::SubscriberExt as _;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A log line inside the turn span; it must never reach the collector.
const LOG_LINE: &str = "upstream said: bad key LOG-LINE-MARKER";

/// One turn with both compaction spans inside it, recorded through `guard`.
fn record_a_turn(guard: &TelemetryGuard) {
    let subscriber = tracing_subscriber::registry().with(guard.layer());
    let telemetry = guard.telemetry(TelemetryConfig::default());
    tracing::subscriber::with_default(subscriber, || {
        let _turn = tracing::info_span!("turn").entered();
        // Log lines and trace-level spans stay local: only INFO spans are exported.
        tracing::warn!("{LOG_LINE}");
        let _noise = tracing::trace_span!("h2_frame").entered();
        let model = ModelInfo::new("typesafe", "typesafe", "jev-latest");
        let request = ProbeRequest::new(
            "jev-latest",
            DecisionState {
                earlier_discussion: "Dense retrieval settled.".into(),
                latest_turn: "Now tokenizers.".into(),
                turns: Vec::new(),
                older: Vec::new(),
            },
        );
        let probe = telemetry.start_probe(&ProbeStart::new(&model, &request, 0.75, 4, 38_400));
        let answer = DecisionAnswer::new(0.82)
            .with_served_model("jev-1.13.0")
            .with_usage(TokenUsage::new(Some(412), Some(2)));
        probe.finish(&ProbeEnd::new(
            Probability::new(0.82).ok(),
            Verdict::Compress,
            Some(&answer),
            None,
        ));
        let summary_request = SummaryRequest::new(
            "nemotron",
            "Existing Conversation Summary: …",
            None,
            "…",
            Vec::new(),
        );
        let summarize = telemetry.start_summarize(&SummarizeStart::new(
            &model,
            &summary_request,
            (
                Timestamp::new(1_700_000_000.0).unwrap(),
                Timestamp::new(1_700_000_007.0).unwrap(),
            ),
            4,
            2,
            false,
        ));
        let summary = Summary::new("## Comprehensive Conversation Summary")
            .with_usage(TokenUsage::new(Some(4210), Some(320)));
        summarize.finish(&SummarizeEnd::new(Some(&summary), None));
    });
}

async fn receiver() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .and(header("content-type", "application/x-protobuf"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

/// Every span the receiver got, with the service name of its resource.
async fn received(server: &MockServer) -> Vec<(String, Span)> {
    let mut spans = Vec::new();
    for request in server.received_requests().await.unwrap() {
        let export = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for resource_spans in export.resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref()?.value.clone());
            let Some(any_value::Value::StringValue(service)) = service else {
                panic!("no service.name");
            };
            for scope_spans in resource_spans.scope_spans {
                spans.extend(scope_spans.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }
    spans
}

fn attribute(span: &Span, key: &str) -> Option<any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.clone())
}

#[tokio::test]
async fn spans_arrive_over_otlp_http_nested_under_the_turn() {
    let server = receiver().await;
    let endpoint = format!("{}/v1/traces", server.uri());
    // The exporter uses a blocking HTTP client on its own thread; keep it off the runtime.
    let resolved = tokio::task::spawn_blocking(move || {
        let guard = OtlpSetup::new()
            .env_lookup(|_| None)
            .endpoint(Some(&endpoint))
            .init()
            .unwrap();
        record_a_turn(&guard);
        let resolved = guard.endpoint().to_owned();
        guard.shutdown().unwrap();
        resolved
    })
    .await
    .unwrap();
    assert_eq!(resolved, format!("{}/v1/traces", server.uri()));

    let bodies: Vec<u8> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .flat_map(|r| r.body)
        .collect();
    assert!(
        !String::from_utf8_lossy(&bodies).contains("LOG-LINE-MARKER"),
        "a log event was exported"
    );
    let spans = received(&server).await;
    let by_name: BTreeMap<_, _> = spans.iter().map(|(_, s)| (s.name.as_str(), s)).collect();
    assert_eq!(
        by_name.keys().copied().collect::<Vec<_>>(),
        [keys::SUMMARIZE_SPAN_NAME, keys::PROBE_SPAN_NAME, "turn"]
    );
    assert!(
        spans
            .iter()
            .all(|(service, _)| service == telemetry::DEFAULT_SERVICE_NAME)
    );
    let turn = by_name["turn"];
    for name in [keys::PROBE_SPAN_NAME, keys::SUMMARIZE_SPAN_NAME] {
        let span = by_name[name];
        assert_eq!(span.trace_id, turn.trace_id, "{name}");
        assert_eq!(span.parent_span_id, turn.span_id, "{name}");
    }
    let probe = by_name[keys::PROBE_SPAN_NAME];
    assert_eq!(
        attribute(probe, keys::OPENINFERENCE_SPAN_KIND),
        Some(any_value::Value::StringValue("EVALUATOR".into()))
    );
    assert_eq!(
        attribute(probe, keys::DECISION_MODEL_NAME),
        Some(any_value::Value::StringValue("jev-1.13.0".into()))
    );
    let summary = by_name[keys::SUMMARIZE_SPAN_NAME];
    assert_eq!(
        attribute(summary, keys::LLM_TOKEN_COUNT_TOTAL),
        Some(any_value::Value::IntValue(4530))
    );
    let Some(any_value::Value::ArrayValue(range)) =
        attribute(summary, keys::COMPACTION_SUMMARIZE_RANGE)
    else {
        panic!("range is not an array");
    };
    let range: Vec<_> = range.values.into_iter().filter_map(|v| v.value).collect();
    assert_eq!(
        range,
        [
            any_value::Value::DoubleValue(1_700_000_000.0),
            any_value::Value::DoubleValue(1_700_000_007.0)
        ]
    );
}

#[tokio::test]
async fn the_base_endpoint_variable_is_honoured_and_dropping_the_guard_flushes() {
    let server = receiver().await;
    let base = server.uri();
    tokio::task::spawn_blocking(move || {
        let guard = OtlpSetup::new()
            .env_lookup(move |var| match var {
                "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(base.clone()),
                "OTEL_SERVICE_NAME" => Some("zocrates".into()),
                _ => None,
            })
            .init()
            .unwrap();
        record_a_turn(&guard);
        drop(guard);
    })
    .await
    .unwrap();
    let spans = received(&server).await;
    assert_eq!(spans.len(), 3, "{spans:?}");
    assert!(spans.iter().all(|(service, _)| service == "zocrates"));
}

#[tokio::test]
async fn asked_to_it_installs_the_global_subscriber_once() {
    let server = receiver().await;
    let endpoint = format!("{}/v1/traces", server.uri());
    let second = tokio::task::spawn_blocking(move || {
        let guard = OtlpSetup::new()
            .env_lookup(|_| None)
            .endpoint(Some(&endpoint))
            .install_subscriber(true)
            .init()
            .unwrap();
        // No scoped subscriber here: the global one carries the span to the exporter.
        drop(tracing::info_span!("global_turn").entered());
        let second = OtlpSetup::new()
            .env_lookup(|_| None)
            .endpoint(Some(&endpoint))
            .install_subscriber(true)
            .init()
            .map(|_| ())
            .unwrap_err();
        guard.shutdown().unwrap();
        second
    })
    .await
    .unwrap();
    assert!(
        second
            .to_string()
            .starts_with("cannot install the tracing subscriber: "),
        "{second}"
    );
    let names: Vec<_> = received(&server)
        .await
        .into_iter()
        .map(|(_, s)| s.name)
        .collect();
    // Other threads of this test binary may add spans of their own through the global
    // subscriber; ours must be there.
    assert!(names.iter().any(|n| n == "global_turn"), "{names:?}");
}

/// A collector that is not there (a loopback port nobody listens on) never fails or panics the
/// program: building the exporter connects to nothing, recording works as usual, and shutting
/// down returns `Ok` — the SDK's batch processor owns export errors and drops the undelivered
/// spans (telemetry fails open like the models).
#[tokio::test]
async fn a_collector_that_is_down_does_not_fail_the_program() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let endpoint = format!("http://127.0.0.1:{port}/v1/traces");
    let outcome = tokio::task::spawn_blocking(move || {
        let guard = OtlpSetup::new()
            .env_lookup(|_| None)
            .endpoint(Some(&endpoint))
            .init()
            .expect("building the exporter connects to nothing");
        record_a_turn(&guard);
        guard.shutdown()
    })
    .await
    .expect("no panic");
    assert!(outcome.is_ok(), "{outcome:?}");
}

/// One turn as a host records it for Phoenix: the turn span from [`telemetry::turn_span`], an
/// offline probe (no served model) and a summary whose summarizer reported no usage.
fn record_a_phoenix_turn(guard: &TelemetryGuard) {
    let subscriber = tracing_subscriber::registry().with(guard.layer());
    let config = TelemetryConfig::default();
    let telemetry = guard.telemetry(config);
    tracing::subscriber::with_default(subscriber, || {
        let key = compaction_core::SessionKey::new("zocrates", "u1", "s1");
        let turn = telemetry::turn_span(&config, &key, 5, "Which tokenizer for long papers?");
        {
            let _entered = turn.enter();
            let offline = ModelInfo::new("offline", "local", "offline-lexical");
            let request = ProbeRequest::new(
                "inception/mercury-decide",
                DecisionState {
                    earlier_discussion: "Dense retrieval settled.".into(),
                    latest_turn: "Now tokenizers.".into(),
                    turns: Vec::new(),
                    older: Vec::new(),
                },
            );
            let probe =
                telemetry.start_probe(&ProbeStart::new(&offline, &request, 0.75, 4, 38_400));
            let answer = DecisionAnswer::new(0.82);
            probe.finish(&ProbeEnd::new(
                Probability::new(0.82).ok(),
                Verdict::Compress,
                Some(&answer),
                None,
            ));
            let summary_request = SummaryRequest::new(
                "offline-extractive",
                "Existing Conversation Summary: …",
                None,
                "…",
                Vec::new(),
            );
            let summarize = telemetry.start_summarize(&SummarizeStart::new(
                &offline,
                &summary_request,
                (
                    Timestamp::new(1_700_000_000.0).unwrap(),
                    Timestamp::new(1_700_000_007.0).unwrap(),
                ),
                3,
                2,
                false,
            ));
            let summary = Summary::new("## Comprehensive Conversation Summary");
            summarize.finish(&SummarizeEnd::new(Some(&summary), None));
        }
        telemetry::record_turn_output(&config, &turn, r#"{"outcome":"compressed"}"#);
    });
}

/// What Phoenix reads, checked on the recorded OTLP payload against OpenInference's semantic
/// conventions (`spec/semantic_conventions.md`): every span has a known
/// `openinference.span.kind`; `session.id` and `user.id` are non-empty strings; counts and
/// token counts are integers; the resource names the project (`openinference.project.name`).
/// A real Phoenix reads exactly these protobuf fields, so the payload is the contract.
#[tokio::test]
async fn the_payload_phoenix_reads_follows_openinference_types() {
    use any_value::Value::{BoolValue, DoubleValue, IntValue, StringValue};
    let server = receiver().await;
    let endpoint = format!("{}/v1/traces", server.uri());
    tokio::task::spawn_blocking(move || {
        let guard = OtlpSetup::new()
            .env_lookup(|var| (var == telemetry::PROJECT_NAME_ENV).then(|| "ignored".into()))
            .endpoint(Some(&endpoint))
            .project_name(Some("zocrates-research"))
            .init()
            .unwrap();
        record_a_phoenix_turn(&guard);
        guard.shutdown().unwrap();
    })
    .await
    .unwrap();
    let mut projects = Vec::new();
    for request in server.received_requests().await.unwrap() {
        let export = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for rs in export.resource_spans {
            let resource = rs.resource.unwrap_or_default();
            projects.extend(
                resource
                    .attributes
                    .iter()
                    .filter(|kv| kv.key == keys::OPENINFERENCE_PROJECT_NAME)
                    .filter_map(|kv| kv.value.as_ref()?.value.clone()),
            );
        }
    }
    assert!(!projects.is_empty());
    assert!(
        projects
            .iter()
            .all(|p| *p == StringValue("zocrates-research".into())),
        "{projects:?}"
    );
    let spans = received(&server).await;
    let by_name: BTreeMap<_, _> = spans.iter().map(|(_, s)| (s.name.as_str(), s)).collect();
    assert_eq!(by_name.len(), 3, "{:?}", by_name.keys());
    let kinds = ["LLM", "CHAIN", "EVALUATOR", "DECISION", "AGENT"];
    for span in by_name.values() {
        let Some(StringValue(kind)) = attribute(span, keys::OPENINFERENCE_SPAN_KIND) else {
            panic!("{} has no openinference.span.kind", span.name);
        };
        assert!(kinds.contains(&kind.as_str()), "{}: {kind}", span.name);
    }

    let turn = by_name[keys::TURN_SPAN_NAME];
    assert_eq!(
        attribute(turn, keys::OPENINFERENCE_SPAN_KIND),
        Some(StringValue("CHAIN".into()))
    );
    assert_eq!(
        attribute(turn, keys::SESSION_ID),
        Some(StringValue("s1".into()))
    );
    assert_eq!(
        attribute(turn, keys::USER_ID),
        Some(StringValue("u1".into()))
    );
    assert_eq!(attribute(turn, keys::COMPACTION_TURN), Some(IntValue(5)));
    assert_eq!(
        attribute(turn, keys::INPUT_VALUE),
        Some(StringValue("Which tokenizer for long papers?".into()))
    );
    assert_eq!(
        attribute(turn, keys::OUTPUT_VALUE),
        Some(StringValue(r#"{"outcome":"compressed"}"#.into()))
    );

    let probe = by_name[keys::PROBE_SPAN_NAME];
    assert_eq!(probe.parent_span_id, turn.span_id);
    assert!(
        matches!(attribute(probe, keys::COMPACTION_DECISION_LATENCY_MS), Some(IntValue(ms)) if ms >= 0)
    );
    assert!(matches!(
        attribute(probe, keys::COMPACTION_DECISION_LATENCY_MS_PRECISE),
        Some(DoubleValue(_))
    ));
    assert_eq!(
        attribute(probe, keys::COMPACTION_DECISION_MODEL),
        Some(StringValue("offline-lexical".into())),
        "the model that answered"
    );
    assert_eq!(
        attribute(probe, keys::COMPACTION_DECISION_CONFIGURED_MODEL),
        Some(StringValue("inception/mercury-decide".into()))
    );

    let summary = by_name[keys::SUMMARIZE_SPAN_NAME];
    assert_eq!(summary.parent_span_id, turn.span_id);
    // 32 and 37 characters: 8 and 10 tokens by the default estimator.
    assert_eq!(
        attribute(summary, keys::LLM_TOKEN_COUNT_PROMPT),
        Some(IntValue(8))
    );
    assert_eq!(
        attribute(summary, keys::LLM_TOKEN_COUNT_COMPLETION),
        Some(IntValue(10))
    );
    assert_eq!(
        attribute(summary, keys::LLM_TOKEN_COUNT_TOTAL),
        Some(IntValue(18))
    );
    assert_eq!(
        attribute(summary, keys::COMPACTION_SUMMARIZE_TOKEN_COUNTS_ESTIMATED),
        Some(BoolValue(true))
    );
    assert_eq!(
        attribute(summary, keys::COMPACTION_SUMMARIZE_RETAINED_TURNS),
        Some(IntValue(2))
    );
    assert_eq!(
        attribute(summary, keys::COMPACTION_SUMMARIZE_SLICE_TURNS),
        Some(IntValue(3))
    );
}
