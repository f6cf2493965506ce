//! What a compaction costs in telemetry: opening and finishing each span (attribute building,
//! JSON, secret scrubbing, the SDK span) and scrubbing a 16 KB summarizer prompt. The
//! provider has no processor, so export cost is excluded (the batch processor exports on its
//! own thread).

use std::hint::black_box;

use compaction_core::{
    DecisionAnswer, DecisionState, ModelInfo, Probability, ProbeEnd, ProbeRequest, ProbeStart,
    SummarizeEnd, SummarizeStart, Summary, SummaryRequest, Telemetry as _, Timestamp, TokenUsage,
    Verdict,
};
use criterion::{Criterion, criterion_group, criterion_main};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use telemetry::{OpenInferenceTelemetry, TelemetryConfig};

/// About `words` words of research prose.
fn prose(words: usize) -> String {
    let sentence = "Dense retrievers beat BM25 on recall at 100 but lose on rare entity names. ";
    sentence.repeat(words / 14 + 1)
}

fn bench(c: &mut Criterion) {
    let provider = SdkTracerProvider::builder().build();
    let telemetry =
        OpenInferenceTelemetry::new(provider.tracer("bench"), TelemetryConfig::default());
    let model = ModelInfo {
        system: "typesafe".into(),
        provider: "typesafe".into(),
        model: "jev-latest".into(),
    };
    // The decision state's default budget is 500 tokens: about 375 words.
    let request = ProbeRequest::new(
        "jev-latest",
        DecisionState {
            earlier_discussion: prose(300),
            latest_turn: prose(75),
            turns: Vec::new(),
        },
    );
    let answer = DecisionAnswer {
        probability: 0.82,
        served_model: Some("jev-1.13.0".into()),
        usage: Some(TokenUsage {
            input: Some(412),
            output: Some(2),
        }),
    };
    c.bench_function("probe_span_start_finish", |b| {
        b.iter(|| {
            let span = telemetry.start_probe(&ProbeStart {
                model: &model,
                request: black_box(&request),
                threshold: 0.75,
                completed_turns: 4,
                prompt_tokens: 38_400,
            });
            span.finish(&ProbeEnd {
                probability: Probability::new(0.82).ok(),
                verdict: Verdict::Compress,
                answer: Some(&answer),
                failure: None,
            });
        });
    });

    // A summarizer prompt of about 16 KB and a 2 KB summary.
    let summary_request = SummaryRequest {
        model: "nemotron".into(),
        prompt: prose(3_000),
        previous_summary: None,
        new_turns_text: String::new(),
        turns: Vec::new(),
    };
    let summary = Summary {
        text: prose(300),
        served_model: None,
        usage: Some(TokenUsage {
            input: Some(4210),
            output: Some(320),
        }),
    };
    let range = (
        Timestamp::new(1_700_000_000.0).unwrap_or(Timestamp::EPOCH),
        Timestamp::new(1_700_000_900.0).unwrap_or(Timestamp::EPOCH),
    );
    c.bench_function("summarize_span_start_finish_16kb", |b| {
        b.iter(|| {
            let span = telemetry.start_summarize(&SummarizeStart {
                model: &model,
                request: black_box(&summary_request),
                range,
                slice_turns: 12,
                forced: false,
            });
            span.finish(&SummarizeEnd {
                summary: Some(&summary),
                failure: None,
            });
        });
    });

    let prompt = prose(3_000);
    c.bench_function("scrub_16kb_prose", |b| {
        b.iter(|| telemetry::scrub::scrub(black_box(&prompt)).len());
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
