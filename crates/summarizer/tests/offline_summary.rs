//! The offline extractive summarizer on a fixed multi-topic research conversation, and the
//! ledger section a citation-dropping model summary gets.

mod common;

use common::{Conversation, fixture};
use compaction_core::{CharsPerToken, Summarizer, SummaryRequest, TokenEstimator};
use summarizer::{CitationLedger, OfflineSummarizer, WithCitationLedger};

async fn run(s: &dyn Summarizer, request: &SummaryRequest) -> String {
    s.summarize(request)
        .await
        .expect("offline never fails")
        .text
}

/// Every citation the fixture's turns carry.
fn fixture_ledger() -> CitationLedger {
    let mut ledger = CitationLedger::new();
    for turn in fixture::first_block()
        .iter()
        .chain(fixture::second_block().iter())
    {
        ledger.add_text(&turn.user);
        for t in &turn.tool_outputs {
            ledger.add_text(t);
        }
        ledger.add_text(&turn.answer);
    }
    ledger
}

/// The fixture's identifiers, written out by hand (not by the extractor under test).
const IDENTIFIERS: [&str; 11] = [
    "10.1021/cr500207g",
    "10.1038/nnano.2007.411",
    "10.1021/nn204476h",
    "10.1038/nnano.2014.6",
    "10.1021/la203712s",
    "10.1016/j.joule.2018.12.008",
    "10.1149/1.3599565",
    "10.1039/C4EE02158D",
    "arXiv:2307.03172",
    "arXiv:2310.05736",
    "Liu et al. (2023)",
];

fn assert_keeps_every_citation(summary: &str) {
    let missing = fixture_ledger().missing_from(summary).len();
    assert_eq!(missing, 0, "the summary lost {missing} citations");
    for id in IDENTIFIERS {
        assert!(summary.contains(id), "lost {id}");
    }
}

/// Compacts turns 1–3, then rolls turns 4–6 into it.
async fn two_rounds(budget_tokens: usize) -> (String, String) {
    let offline = WithCitationLedger::new(OfflineSummarizer::new(budget_tokens));
    let mut conversation = Conversation::new();
    for turn in fixture::first_block() {
        conversation.add(&turn);
    }
    let (request, plan) = conversation.request();
    let first = run(&offline, &request).await;
    conversation.commit(&plan, &first);
    for turn in fixture::second_block() {
        conversation.add(&turn);
    }
    let (request, _) = conversation.request();
    assert_eq!(request.previous_summary.as_deref(), Some(first.as_str()));
    let second = run(&offline, &request).await;
    (first, second)
}

#[tokio::test]
async fn offline_summary_of_the_research_conversation() {
    let (first, second) = two_rounds(7000).await;
    insta::assert_snapshot!("offline_first_compaction", first);
    insta::assert_snapshot!("offline_rolling_consolidation", second);
    assert_keeps_every_citation(&second);
    // Rolling consolidation keeps one topic per turn, in order, and one sources section.
    assert_eq!(second.matches("### Q: ").count(), 6);
    assert_eq!(second.matches("## Cited Sources").count(), 1);
}

#[tokio::test]
async fn a_tight_budget_condenses_the_prose_but_keeps_every_source() {
    let budget = 700;
    let (_, second) = two_rounds(budget).await;
    let tokens = CharsPerToken.estimate(&second);
    assert!(tokens <= budget, "{tokens} > {budget}");
    assert!(second.contains("_Condensed to stay within summarizer_summary_max_tokens = 700"));
    assert_keeps_every_citation(&second);
    insta::assert_snapshot!("offline_condensed", second);
}

#[tokio::test]
async fn the_ledger_section_restores_what_a_model_dropped() {
    let mut conversation = Conversation::new();
    for turn in fixture::first_block() {
        conversation.add(&turn);
    }
    let (request, _) = conversation.request();
    // A plausible model summary that keeps two references and drops the rest.
    let model_summary = "## Comprehensive Conversation Summary\n\
        Silicon anodes (3,579 mAh/g) fail mechanically through ~280 % volume change \
        (Obrovac & Chevrier, 2014); void-engineered pomegranate designs keep 97 % capacity \
        after 1,000 cycles (Liu et al., 2014). VRFB becomes competitive with Li-ion from \
        about 8 h of discharge.\n\n## Cited Sources\n\
        - Liu, N. et al. A pomegranate-inspired nanoscale design for large-volume-change \
        lithium battery anodes. Nat. Nanotechnol. 9, 187–192 (2014). doi:10.1038/nnano.2014.6";
    let ledger = CitationLedger::from_request(&request);
    let reconciled = ledger.reconcile(model_summary);
    let section = reconciled
        .strip_prefix(model_summary)
        .expect("the model's text is kept as it is");
    insta::assert_snapshot!("ledger_section", section.trim());
    assert_eq!(ledger.reconcile(&reconciled), reconciled, "idempotent");
}
