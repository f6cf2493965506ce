//! The decision states `decision_client::sessions` computes for a labelled research session
//! are the ones the real engine sends: each turn's history goes into an in-memory store, the
//! engine evaluates it with the gate open and a decision model that always says CONTINUE, and
//! the probe it sent must equal the computed state (wire strings and structured turns).
//!
//! The sessions: an invented fixture (always), this project's labelled sessions in the
//! repository's `data/research-sessions/`, and the shared sessions outside the repository only
//! when asked for (`COMPACTION_OUTSIDE_DATA`, see the `test-data` crate; otherwise a SKIPPED line).

use std::path::Path;
use std::sync::Arc;

use compaction_core::DEFAULT_STATE_BUDGET_TOKENS;
use compaction_core::testing::{
    InMemoryStore, RecordingSummarizer, ScriptedDecisionModel, SequentialIds, SteppingClock,
};
use compaction_core::{CharsPerToken, Engine, Session, SessionKey, Settings};
use decision_client::sessions::{
    ResearchSession, events_and_turn_ends, load_sessions, parse_session, session_state, turn_cases,
};

fn fixture() -> ResearchSession {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/invented-session.json");
    let text = std::fs::read_to_string(&path).unwrap();
    parse_session(&text, &path.display().to_string()).unwrap()
}

/// The `.json` sessions of `dir` (none when the directory holds no session yet).
fn sessions_in(dir: &Path) -> Vec<ResearchSession> {
    let any = std::fs::read_dir(dir)
        .unwrap()
        .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "json"));
    if any {
        load_sessions(dir).unwrap()
    } else {
        Vec::new()
    }
}

#[tokio::test]
async fn the_states_are_what_the_engine_sends() {
    the_engine_sends_these_states(&fixture()).await;
}

#[tokio::test]
async fn the_states_of_the_repository_sessions_are_what_the_engine_sends() {
    let test = "the_states_of_the_repository_sessions_are_what_the_engine_sends";
    let Some(dir) = test_data::repo(test, test_data::RESEARCH_SESSIONS) else {
        return;
    };
    for session in sessions_in(&dir) {
        the_engine_sends_these_states(&session).await;
    }
}

#[tokio::test]
async fn the_states_of_the_shared_sessions_are_what_the_engine_sends() {
    let test = "the_states_of_the_shared_sessions_are_what_the_engine_sends";
    let Some(dir) = test_data::outside(test, "research-sessions") else {
        return;
    };
    let sessions = load_sessions(&dir).unwrap();
    assert!(!sessions.is_empty());
    for session in &sessions {
        the_engine_sends_these_states(session).await;
    }
}

async fn the_engine_sends_these_states(session: &ResearchSession) {
    let cases = turn_cases(session, &CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS);
    assert_eq!(cases.len(), session.turns.len());
    let (events, ends) = events_and_turn_ends(session);
    // The gate open from the first turn: K = 0 and min_turns = 1.
    let settings = Settings {
        adaptive_compaction_retention_turns: 0,
        adaptive_compaction_min_turns: 1,
        ..Settings::default()
    };
    let min_turns = 1;
    let mut compared = 0;
    for (i, &end) in ends.iter().enumerate().skip(min_turns - 1) {
        let store = Arc::new(InMemoryStore::new());
        let decision = Arc::new(ScriptedDecisionModel::constant(0.0));
        let key = SessionKey::new("app", "user", format!("s{i}"));
        let mut history = events[..end].to_vec();
        // Above the floor, below the ceiling: the gate opens for a probe.
        let answer = history.last_mut().unwrap();
        answer
            .usage_metadata
            .get_or_insert_with(Default::default)
            .prompt_token_count = Some(50_000);
        let mut s = Session::new(key.clone());
        s.events = history;
        s.state = session_state(session, i + 1);
        store.insert(s);
        let engine = Engine::builder(
            decision.clone(),
            Arc::new(RecordingSummarizer::new()),
            store.clone(),
            Arc::new(SteppingClock::starting_at(1_800_000_000)),
            Arc::new(SequentialIds::default()),
        )
        .settings(settings.clone())
        .build()
        .unwrap();
        let outcome = engine.evaluate_and_compact(&key).await;
        assert!(
            outcome.compaction().is_none(),
            "turn {}: {outcome:?}",
            i + 1
        );
        let requests = decision.requests();
        assert_eq!(requests.len(), 1, "turn {}: {outcome:?}", i + 1);
        assert_eq!(
            requests[0].state,
            cases[i].state,
            "{} turn {}",
            session.session,
            i + 1
        );
        compared += 1;
    }
    assert_eq!(compared, session.turns.len() - (min_turns - 1));
}

#[test]
fn bad_session_files_name_the_file_and_what_is_wrong() {
    let e = parse_session("{\"turns\": []}", "x.json")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("x.json:") && e.contains("empty"), "{e}");
    let e = parse_session(
        r#"{"turns": [{"n": 2, "user": "u", "assistant": "a", "expect": {"pivot": false}}]}"#,
        "y.json",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("turns[0].n must be 1"), "{e}");
    let e = parse_session(r#"{"turns": [{"n": 1}]}"#, "z.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("z.json") && e.contains("user"), "{e}");
    let named = parse_session(
        r#"{"turns": [{"n": 1, "user": "u", "assistant": "a", "expect": {"pivot": false}}]}"#,
        "dir/named.json",
    )
    .unwrap();
    assert_eq!(named.session, "named");
}
