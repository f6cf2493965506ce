//! The offline summary under a budget that bites, on invented turns: what restates a value
//! another kept line states goes first, and folding the unchanged history again erodes no
//! fact the first fold kept.

mod common;

use common::request;
use compaction_core::TurnDigest;
use summarizer::OfflineSummarizer;

/// Invented turns: each answer states its figures in a sentence and again in a table row,
/// every fourth turn recaps the figures of the turns before it, and each synthesis states one
/// figure nothing else states.
fn rows_and_recaps() -> Vec<TurnDigest> {
    (1..13)
        .map(|i| {
            let mut assistant = format!(
                "Plot {i} gained {i}1.5 mm of peat over {i}2 days (Varga & Lind 2018), \
                 with {i}6 % water in the top {i}4 cm."
            );
            if i % 4 == 0 {
                assistant.push_str(&format!(
                    " Recap (Varga & Lind 2018): plot {} gained {}1.5 and plot {} gained {}1.5 mm.",
                    i - 1,
                    i - 1,
                    i - 2,
                    i - 2
                ));
            }
            assistant.push_str(&format!(
                "\n\n| Plot | Gain | Days | Water |\n|---|---|---|---|\n\
                 | P{i} | {i}1.5 mm | {i}2 | {i}6 % |"
            ));
            TurnDigest {
                invocation_id: format!("peat-{i}"),
                user: format!("What did plot {i} show?"),
                assistant,
                tool_outputs: vec![format!("Plot {i} lies at {i}7 m elevation.")],
            }
        })
        .collect()
}

/// Under a budget that bites, the table rows and recaps that restate a sentence's values go
/// before a figure only a synthesis states, and five more folds of the unchanged history keep
/// every fact the first fold kept, then settle.
#[test]
fn restatements_go_first_and_repeated_folds_erode_nothing() {
    let offline = OfflineSummarizer::new(620);
    let first = offline.consolidate(&request(None, rows_and_recaps()));
    assert!(first.contains("_Condensed to stay within"), "{first}");
    assert!(
        !first.contains("— Gain:"),
        "a restating row survived\n{first}"
    );
    assert!(!first.contains("Recap ("), "a recap survived\n{first}");
    for i in 1..13 {
        let unique = format!("{i}7 m elevation");
        assert!(first.contains(&unique), "lost {unique}\n{first}");
    }
    let kept: Vec<String> = (1..13)
        .flat_map(|i| [format!("{i}1.5 mm of peat"), format!("{i}6 % water")])
        .filter(|f| first.contains(f.as_str()))
        .collect();
    assert!(kept.len() >= 12, "{} kept\n{first}", kept.len());
    let mut text = first.clone();
    for _ in 0..5 {
        text = offline.consolidate(&request(Some(&text), Vec::new()));
    }
    for fact in &kept {
        assert!(text.contains(fact.as_str()), "lost {fact}\n{text}");
    }
    assert_eq!(text, offline.consolidate(&request(Some(&text), Vec::new())));
}

/// Invented turns: each answer states two figures in a sentence and again in a table row
/// labelled with words only, and every fourth turn only tabulates figures the turn before it
/// stated (no synthesis).
fn rows_restating_sentences() -> Vec<TurnDigest> {
    (1..13)
        .map(|i| {
            let (assistant, tool_outputs) = if i % 4 == 0 {
                let table = format!(
                    "| Measure | Gain | Span |\n|---|---|---|\n\
                     | Earlier peat gain | {}1.5 mm | {}2 days |",
                    i - 1,
                    i - 1
                );
                (table, Vec::new())
            } else {
                let answer = format!(
                    "Plot {i} gained {i}1.5 mm of peat over {i}2 days (Varga & Lind 2018).\n\n\
                     | Measure | Gain | Span |\n|---|---|---|\n\
                     | Peat gain | {i}1.5 mm | {i}2 days |"
                );
                (answer, vec![format!("Plot {i} lies at {i}7 m elevation.")])
            };
            TurnDigest {
                invocation_id: format!("moss-{i}"),
                user: format!("What did moss plot {i} show?"),
                assistant,
                tool_outputs,
            }
        })
        .collect()
}

/// Under a budget that bites, a question heading with no line left under it (a turn that only
/// restated earlier figures) goes, the newest topic's aside; five more folds of the unchanged history keep every fact
/// the first fold kept.
#[test]
fn a_heading_with_no_line_left_goes_once_the_budget_bites() {
    let offline = OfflineSummarizer::new(300);
    let first = offline.consolidate(&request(None, rows_restating_sentences()));
    assert!(first.contains("_Condensed to stay within"), "{first}");
    let mut lines = first.lines().filter(|l| !l.is_empty()).peekable();
    while let Some(line) = lines.next() {
        // The newest topic (turn 12 restated only) stays, as its pointer.
        if line.starts_with("### ") && !line.contains("plot 12") {
            let next = lines.peek().copied().unwrap_or_default();
            assert!(
                next.starts_with("- ") || next.starts_with("* "),
                "a heading with nothing under it: {line}\n{first}"
            );
        }
    }
    let kept: Vec<String> = (1..13)
        .flat_map(|i| [format!("{i}1.5 mm"), format!("{i}7 m")])
        .filter(|f| first.contains(f.as_str()))
        .collect();
    assert!(kept.len() >= 8, "{} kept\n{first}", kept.len());
    let mut text = first.clone();
    for _ in 0..5 {
        text = offline.consolidate(&request(Some(&text), Vec::new()));
    }
    for fact in &kept {
        assert!(text.contains(fact.as_str()), "lost {fact}\n{text}");
    }
    assert_eq!(text, offline.consolidate(&request(Some(&text), Vec::new())));
}
