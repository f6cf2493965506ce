//! Cost of the offline summarizer and of the citation ledger on research-sized inputs.
#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use common::{Conversation, fixture};
use compaction_core::{SummaryRequest, TurnDigest};
use criterion::{Criterion, criterion_group, criterion_main};
use summarizer::{CitationLedger, OfflineSummarizer};

/// The fixture's rolling consolidation: the first summary plus turns 4–6.
fn rolling_request(offline: &OfflineSummarizer) -> SummaryRequest {
    let mut conversation = Conversation::new();
    for turn in fixture::first_block() {
        conversation.add(&turn);
    }
    let (request, plan) = conversation.request();
    let first = offline.consolidate(&request);
    conversation.commit(&plan, &first);
    for turn in fixture::second_block() {
        conversation.add(&turn);
    }
    conversation.request().0
}

/// One turn whose synthesis is cut at 30,000 characters, with 80 sources.
fn large_request() -> SummaryRequest {
    let mut synthesis = String::from("## Synthesis\n\n");
    let mut i = 0;
    while synthesis.len() < 24_000 {
        synthesis.push_str(&format!(
            "Cell {i} retained {} % of its capacity after {} cycles at 25 °C (Author{i} et al., 20{:02}). ",
            80 + i % 20,
            100 * (i + 1),
            i % 25
        ));
        i += 1;
    }
    synthesis.push_str("\n\n# Cited Sources\n");
    for s in 0..80 {
        synthesis.push_str(&format!(
            "{}. Author{s}, A. et al. A study of electrode number {s}. J. Bench. 1, {s} (20{:02}). doi:10.5555/bench.{s}\n",
            s + 1,
            s % 25
        ));
    }
    let synthesis: String = synthesis.chars().take(30_000).collect();
    SummaryRequest::new(
        common::MODEL,
        String::new(),
        None,
        String::new(),
        vec![TurnDigest {
            invocation_id: "inv-1".into(),
            user: "What do the cycling studies show?".into(),
            assistant: "Most cells keep more than 80 % of capacity after 1,000 cycles.".into(),
            tool_outputs: vec![synthesis],
        }],
    )
}

fn benches(c: &mut Criterion) {
    let offline = OfflineSummarizer::new(7000);
    let rolling = rolling_request(&offline);
    let large = large_request();
    c.bench_function("offline_consolidate/fixture_rolling", |b| {
        b.iter(|| offline.consolidate(black_box(&rolling)))
    });
    c.bench_function("offline_consolidate/30k_synthesis", |b| {
        b.iter(|| offline.consolidate(black_box(&large)))
    });
    let model_summary = "## Comprehensive Conversation Summary\nSilicon anodes fail mechanically \
        (Obrovac & Chevrier, 2014).";
    c.bench_function("ledger_reconcile/fixture_rolling", |b| {
        b.iter(|| CitationLedger::from_request(black_box(&rolling)).reconcile(model_summary))
    });
    c.bench_function("ledger_reconcile/30k_synthesis", |b| {
        b.iter(|| CitationLedger::from_request(black_box(&large)).reconcile(model_summary))
    });
}

criterion_group!(consolidation, benches);
criterion_main!(consolidation);
