//! Decision cases as data: every `tests/fixtures/*.json` (an invented labelled session in the
//! research-session format) is probed after each turn, as the engine would with its gate open,
//! and the offline lexical model's verdict beside the label is a snapshot. Adding a case is
//! dropping a session file (invented text, never an evaluation session's) into the directory;
//! a refit of the model shows here as a reviewed change of verdicts.

use std::fmt::Write as _;

use compaction_core::{CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS};
use decision_client::offline::probability;
use decision_client::sessions::{parse_session, turn_cases};

/// The spec's default threshold τ.
const TAU: f64 = 0.75;

#[test]
fn each_case_gets_its_snapshot_verdicts() {
    insta::glob!("fixtures/*.json", |path| {
        let text = std::fs::read_to_string(path).expect("read the case");
        let session = parse_session(&text, &path.display().to_string()).expect("a session");
        let mut shown = String::from("turn | label | p | verdict at τ 0.75 | latest query\n");
        for case in turn_cases(&session, &CharsPerToken, DEFAULT_STATE_BUDGET_TOKENS) {
            let p = probability(&case.state);
            let label = if case.expect.pivot { "pivot" } else { "-" };
            let verdict = if p >= TAU { "COMPRESS" } else { "continue" };
            let query = session.turns[case.turn - 1].user.chars().take(60);
            let query: String = query.collect();
            writeln!(
                shown,
                "{} | {label} | {p:.3} | {verdict} | {query}",
                case.turn
            )
            .expect("write to a String");
        }
        insta::assert_snapshot!(shown);
    });
}
