//! The summarizers behind compaction-core's real engine: rolling consolidation keeps every
//! citation end to end, and a failing summarizer writes nothing.

mod common;

use std::sync::Arc;

use common::{Conversation, fixture};
use compaction_core::testing::{
    InMemoryStore, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{Engine, Outcome, Session, SessionKey, Settings};
use serde_json::json;
use summarizer::{
    ChatSummarizer, CitationLedger, SummarizerConfig, WithCitationLedger, build_summarizer,
};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

fn key() -> SessionKey {
    SessionKey::new("zocrates", "researcher", "s1")
}

fn engine(summarizer: Arc<dyn compaction_core::Summarizer>, store: Arc<InMemoryStore>) -> Engine {
    Engine::builder(
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        summarizer,
        store,
        Arc::new(SteppingClock::starting_at(1_800_000_000)),
        Arc::new(SequentialIds::default()),
    )
    .build()
    .expect("default settings are valid")
}

fn summary_of(outcome: &Outcome) -> String {
    let compaction = outcome
        .compaction()
        .unwrap_or_else(|| panic!("no compaction: {outcome:?}"));
    compaction
        .event
        .compaction()
        .expect("a compaction event")
        .summary_text()
}

#[tokio::test]
async fn two_rolling_compactions_through_the_engine_keep_every_citation() {
    let settings = Settings::default().effective().expect("valid");
    let selected =
        build_summarizer(&settings, &SummarizerConfig::default(), |_| None).expect("offline");
    let store = Arc::new(InMemoryStore::new());
    let engine = engine(selected.summarizer, store.clone());
    let follow_up = |q: &str| common::ResearchTurn {
        user: q.to_owned(),
        tool_outputs: Vec::new(),
        answer: format!("Noted: {q}"),
    };
    let turns: Vec<_> = fixture::first_block()
        .into_iter()
        .chain(fixture::second_block())
        .chain([
            follow_up("Draft the outline."),
            follow_up("Add a limitations section."),
        ])
        .collect();

    // Turns 1–4: K = 2 keeps turns 3–4 verbatim and folds turns 1–2.
    let mut conversation = Conversation::new();
    for turn in &turns[..4] {
        conversation.add(turn);
    }
    conversation.report_prompt_tokens(40_000);
    let mut session = Session::new(key());
    session.events = conversation.events().to_vec();
    store.insert(session);
    let first = summary_of(&engine.evaluate_and_compact(&key()).await);

    // Turns 5–8: the envelope reopens; turns 3–6 are rolled into the first summary.
    let before = conversation.events().len();
    for turn in &turns[4..] {
        conversation.add(turn);
    }
    conversation.report_prompt_tokens(45_000);
    let mut session = store.get(&key()).expect("stored");
    session
        .events
        .extend(conversation.events()[before..].iter().cloned());
    store.insert(session);
    let second = summary_of(&engine.evaluate_and_compact(&key()).await);

    let mut ledger = CitationLedger::new();
    for (i, turn) in turns[..6].iter().enumerate() {
        for text in std::iter::once(&turn.user)
            .chain(&turn.tool_outputs)
            .chain([&turn.answer])
        {
            ledger.add_text(text);
        }
        if i == 1 {
            assert!(
                ledger.missing_from(&first).is_empty(),
                "the first summary lost a citation"
            );
        }
    }
    assert!(
        ledger.missing_from(&second).is_empty(),
        "the rolling summary lost a citation"
    );
    assert_eq!(second.matches("### Q: ").count(), 6, "{second}");
    assert!(second.contains("doi:10.1038/nnano.2007.411") && second.contains("arXiv:2310.05736"));
}

#[tokio::test]
async fn a_truncated_chat_reply_writes_nothing() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"finish_reason": "length", "message": {"role": "assistant", "content": "## Comprehensive"}}]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let config = SummarizerConfig {
        base_url: server.uri(),
        ..SummarizerConfig::default()
    };
    let chat = ChatSummarizer::new(&config, common::MODEL, None).expect("client builds");
    let store = Arc::new(InMemoryStore::new());
    let engine = engine(Arc::new(WithCitationLedger::new(chat)), store.clone());
    let mut conversation = Conversation::new();
    for turn in fixture::first_block()
        .iter()
        .chain(&fixture::second_block()[..1])
    {
        conversation.add(turn);
    }
    conversation.report_prompt_tokens(40_000);
    let mut session = Session::new(key());
    session.events = conversation.events().to_vec();
    store.insert(session);

    let outcome = engine.evaluate_and_compact(&key()).await;
    match &outcome {
        Outcome::SummarizerFailed { failure, .. } => {
            // A truncated reply is an invalid reply, and the outcome says so by kind.
            assert_eq!(failure.kind(), compaction_core::FailureKind::InvalidReply);
            assert!(
                failure.message().contains("finish_reason \"length\""),
                "{failure}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.appends(), 0, "nothing is written");
}

/// Fail closed: a chat summary longer than the text it replaces is not committed; the engine
/// reports `SummarizerFailed` naming why and the raw context stays.
#[tokio::test]
async fn an_oversized_chat_summary_writes_nothing() {
    let server = MockServer::start().await;
    let oversized = format!(
        "## Comprehensive Conversation Summary\n{}",
        "Silicon anodes swell by 280 %. ".repeat(20_000)
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": oversized}}]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let config = SummarizerConfig {
        base_url: server.uri(),
        ..SummarizerConfig::default()
    };
    let chat = ChatSummarizer::new(&config, common::MODEL, None).expect("client builds");
    let store = Arc::new(InMemoryStore::new());
    let engine = engine(Arc::new(WithCitationLedger::new(chat)), store.clone());
    let mut conversation = Conversation::new();
    for turn in fixture::first_block()
        .iter()
        .chain(&fixture::second_block()[..1])
    {
        conversation.add(turn);
    }
    conversation.report_prompt_tokens(40_000);
    let mut session = Session::new(key());
    session.events = conversation.events().to_vec();
    store.insert(session);

    let outcome = engine.evaluate_and_compact(&key()).await;
    match &outcome {
        Outcome::SummarizerFailed { failure, .. } => {
            assert_eq!(
                failure.kind(),
                compaction_core::FailureKind::RejectedSummary
            );
            assert!(
                failure
                    .message()
                    .contains("is longer than the text it replaces"),
                "{failure}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.appends(), 0, "nothing is written");
}
