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
    let model = ModelInfo::new("typesafe", "typesafe", "jev-latest");
    // The decision state's default budget is 500 tokens: about 375 words.
    let request = ProbeRequest::new(
        "jev-latest",
        DecisionState {
            earlier_discussion: prose(300),
            latest_turn: prose(75),
            turns: Vec::new(),
            older: Vec::new(),
        },
    );
    let answer = DecisionAnswer::new(0.82)
        .with_served_model("jev-1.13.0")
        .with_usage(TokenUsage::new(Some(412), Some(2)));
    c.bench_function("probe_span_start_finish", |b| {
        b.iter(|| {
            let span = telemetry.start_probe(&ProbeStart::new(
                &model,
                black_box(&request),
                0.75,
                4,
                38_400,
            ));
            span.finish(&ProbeEnd::new(
                Probability::new(0.82).ok(),
                Verdict::Compress,
                Some(&answer),
                None,
            ));
        });
    });

    // A summarizer prompt of about 16 KB and a 2 KB summary.
    let summary_request =
        SummaryRequest::new("nemotron", prose(3_000), None, String::new(), Vec::new());
    let summary = Summary::new(prose(300)).with_usage(TokenUsage::new(Some(4210), Some(320)));
    let range = (
        Timestamp::new(1_700_000_000.0).unwrap_or(Timestamp::EPOCH),
        Timestamp::new(1_700_000_900.0).unwrap_or(Timestamp::EPOCH),
    );
    c.bench_function("summarize_span_start_finish_16kb", |b| {
        b.iter(|| {
            let span = telemetry.start_summarize(&SummarizeStart::new(
                &model,
                black_box(&summary_request),
                range,
                12,
                2,
                false,
            ));
            span.finish(&SummarizeEnd::new(Some(&summary), None));
        });
    });

    let prompt = prose(3_000);
    c.bench_function("scrub_16kb_prose", |b| {
        b.iter(|| telemetry::scrub::scrub(black_box(&prompt)).len());
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
