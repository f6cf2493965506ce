//! Issue 30 on invented claims: a correction supersedes exactly the claims it targets (one
//! labelled case per correction phrasing), the Corrections section states each once (snapshot),
//! a claim sharing neither subject nor value with a correction is never superseded (property),
//! repeated folds of an unchanged history erode no fact, and the receipt agrees.

mod common;

use common::request;
use compaction_core::{DropReason, TurnDigest};
use proptest::prelude::*;
use summarizer::{CORRECTIONS_HEADING, OfflineSummarizer};

fn turn(user: &str, answer: &str) -> TurnDigest {
    TurnDigest {
        invocation_id: user.chars().take(12).collect(),
        user: user.into(),
        assistant: answer.into(),
        tool_outputs: Vec::new(),
    }
}

fn corrections_section(summary: &str) -> String {
    let start = summary
        .find(CORRECTIONS_HEADING)
        .expect("a Corrections section");
    let rest = &summary[start..];
    let end = rest[CORRECTIONS_HEADING.len()..]
        .find("\n## ")
        .or_else(|| rest.find("\n\n_Condensed"))
        .map_or(rest.len(), |e| e + CORRECTIONS_HEADING.len());
    rest[..end].trim().to_owned()
}

/// The body (topics) of a summary: what it states as valid.
fn findings(summary: &str) -> String {
    summary
        .split(CORRECTIONS_HEADING)
        .next()
        .unwrap_or(summary)
        .to_owned()
}

const ORCHARD: &str = "Thinning the orchard raised apple yield by 14.6 kg per tree (Marlow & Eze 2019). \
     Frost damage fell to 23% of buds in thinned rows. Soil nitrate stayed at 41 ppm across plots.";

/// The seven phrasings of issue 30 item 1, each on invented claims: (claim turn, correcting
/// turn, figure that must leave the findings (None: nothing superseded), figure that must stay).
fn cases() -> Vec<(
    &'static str,
    TurnDigest,
    TurnDigest,
    Option<&'static str>,
    &'static str,
)> {
    vec![
        (
            "wrong unit or increment",
            turn("What did thinning do?", ORCHARD),
            turn(
                "Per tree?",
                "Correction: thinning raised apple yield by 14.6 kg per branch, not 14.6 kg per tree.",
            ),
            Some("orchard raised apple yield by 14.6 kg per tree"),
            "23% of buds",
        ),
        (
            "wrong dataset or arm",
            turn(
                "And the arms?",
                "In the early-pruning arm, frost damage fell to 23% of buds in thinned rows. Soil nitrate stayed at 41 ppm across plots.",
            ),
            turn(
                "Which arm?",
                "I put that figure in the wrong arm. In the late-pruning arm, frost damage fell to 23% of buds in thinned rows.",
            ),
            Some("early-pruning arm"),
            "41 ppm",
        ),
        (
            "local vs global",
            turn(
                "Sediment?",
                "The whole watershed lost 312 tonnes of sediment per year. Rainfall averaged 877 mm per year.",
            ),
            turn(
                "The whole watershed?",
                "That was wrong: 312 tonnes of sediment per year is the upper sub-basin alone; the whole watershed lost 505 tonnes of sediment per year.",
            ),
            Some("The whole watershed lost 312"),
            "877 mm",
        ),
        (
            "retracted paper",
            turn("What did thinning do?", ORCHARD),
            turn(
                "Anything new on the yield study?",
                "Marlow & Eze 2019 was retracted this year, so its yield figure cannot be used.",
            ),
            Some("14.6 kg per tree"),
            "41 ppm",
        ),
        (
            "user corrects their own statement",
            turn(
                "My valley survey has 5,400 growers; what power does that give?",
                "With 5,400 growers in the valley survey, power for a 5-point difference is 0.91.",
            ),
            turn(
                "I gave you the wrong number: my valley survey has 4,500 growers, not 5,400.",
                "Thanks: with 4,500 growers in the valley survey, power for a 5-point difference is 0.84.",
            ),
            Some("With 5,400 growers"),
            "0.84",
        ),
        (
            "correction of a correction",
            turn(
                "Canopy gaps?",
                "Correction to the earlier figure: the decade mean canopy gap is 17.5 m, not 12.0 m. Litter depth was 38 mm.",
            ),
            turn(
                "Still odd?",
                "That correction was wrong too: the decade mean canopy gap is 15.2 m, not 17.5 m.",
            ),
            Some("canopy gap is 17.5 m, not 12.0 m."),
            "38 mm",
        ),
        (
            "dispute rejected",
            turn("What did thinning do?", ORCHARD),
            turn(
                "I doubt the 41 ppm nitrate figure; surely it is higher?",
                "I re-checked the plot table. Soil nitrate was 41 ppm across plots; that figure stands. Higher values of 63 ppm occur only in the manured strip.",
            ),
            None,
            "41 ppm",
        ),
        (
            "dispute rejected beside an unrelated error word",
            turn("What did thinning do?", ORCHARD),
            turn(
                "I recall 31 ppm from the spring samples. Are you sure about 41 ppm?",
                "The 31 ppm you recall is the spring value, corrected for moisture, so both stand; the 41 ppm nitrate figure is right across plots.",
            ),
            None,
            "41 ppm",
        ),
        (
            "user proposes, answer concedes",
            turn("What did thinning do?", ORCHARD),
            turn(
                "I think the 14.6 kg yield gain was per branch, not per tree.",
                "You are right, my mistake.",
            ),
            Some("orchard raised apple yield by 14.6 kg per tree"),
            "23% of buds",
        ),
    ]
}

#[test]
fn each_correction_phrasing_supersedes_exactly_its_claim() {
    let offline = OfflineSummarizer::new(4_000);
    for (name, claim, correction, gone, stays) in cases() {
        // In one slice, and across two folds.
        let one = offline
            .consolidate_with_receipt(&request(None, vec![claim.clone(), correction.clone()]));
        let first = offline.consolidate(&request(None, vec![claim]));
        let rolled = offline.consolidate_with_receipt(&request(Some(&first), vec![correction]));
        for (text, receipt) in [one, rolled] {
            let body = findings(&text);
            assert!(body.contains(stays), "{name}: lost {stays}\n{text}");
            match gone {
                Some(g) => {
                    assert!(
                        !body.contains(g),
                        "{name}: {g} still stated as valid\n{text}"
                    );
                    let section = corrections_section(&text);
                    assert_eq!(section.matches(g).count(), 1, "{name}: {section}");
                    assert_eq!(receipt.corrected.len(), 1, "{name}: {receipt:?}\n{text}");
                }
                None => {
                    assert!(!text.contains(CORRECTIONS_HEADING), "{name}: {text}");
                    assert!(receipt.corrected.is_empty(), "{name}: {receipt:?}");
                }
            }
        }
    }
}

#[test]
fn the_corrections_section_states_each_claim_once() {
    let offline = OfflineSummarizer::new(4_000);
    let (claim_a, fix_a) = (cases()[0].1.clone(), cases()[0].2.clone());
    let (claim_b, fix_b) = (cases()[2].1.clone(), cases()[2].2.clone());
    let text = offline.consolidate(&request(None, vec![claim_a, claim_b, fix_a, fix_b]));
    insta::assert_snapshot!("corrections_section", corrections_section(&text));
}

#[test]
fn a_correction_of_a_correction_extends_its_entry() {
    let offline = OfflineSummarizer::new(4_000);
    let first = offline.consolidate(&request(
        None,
        vec![turn(
            "Canopy gaps?",
            "The decade mean canopy gap is 12.0 m (Oduya 2018).",
        )],
    ));
    let second = offline.consolidate(&request(
        Some(&first),
        vec![turn(
            "Sure?",
            "My mistake: the decade mean canopy gap is 17.5 m, not 12.0 m.",
        )],
    ));
    let third = offline.consolidate(&request(
        Some(&second),
        vec![turn(
            "Again?",
            "That correction was wrong too: the decade mean canopy gap is 15.2 m, not 17.5 m.",
        )],
    ));
    let section = corrections_section(&third);
    assert_eq!(section.lines().count(), 2, "{section}");
    assert!(section.contains("12.0 m") && section.contains("17.5 m") && section.contains("15.2 m"));
    assert!(!findings(&third).contains("17.5 m"), "{third}");
}

/// A correction of a correction that revises the corrected value (no error word) extends the
/// same entry, in one slice and across folds.
#[test]
fn a_revision_of_a_correction_extends_its_entry() {
    let offline = OfflineSummarizer::new(4_000);
    let turns = vec![
        turn(
            "Nests?",
            "The nest total for all three valleys was 1,870 (Hale 2020). Rainfall averaged 877 mm per year.",
        ),
        turn(
            "All three?",
            "Correction: the nest total for all three valleys was 2,310, not 1,870.",
        ),
        turn(
            "Does the recount change it?",
            "The recount revises the three-valley nest total from 2,310 to 2,265.",
        ),
    ];
    let one = offline.consolidate(&request(None, turns.clone()));
    let mut rolled: Option<String> = None;
    for t in turns {
        rolled = Some(offline.consolidate(&request(rolled.as_deref(), vec![t])));
    }
    for text in [one, rolled.unwrap_or_default()] {
        let section = corrections_section(&text);
        assert_eq!(section.lines().count(), 2, "{section}");
        for figure in ["1,870", "2,310", "2,265"] {
            assert!(section.contains(figure), "{figure}: {section}");
        }
        let body = findings(&text);
        assert!(!body.contains("2,310") && body.contains("877 mm"), "{text}");
    }
}

/// Folding an unchanged history again (no new turns) keeps every fact, fold after fold.
#[test]
fn repeated_folds_of_an_unchanged_history_erode_no_fact() {
    let offline = OfflineSummarizer::new(4_000);
    let mut turns = Vec::new();
    for i in 0..12 {
        turns.push(turn(
            &format!("Plot {i}?"),
            &format!("Plot {i} recorded {i}1.5 mm of growth over {i}2 days (Smith et al. 2020). Cover was {i}3 %."),
        ));
    }
    let first = offline.consolidate(&request(None, turns));
    let mut text = first.clone();
    for _ in 0..5 {
        text = offline.consolidate(&request(Some(&text), Vec::new()));
    }
    for i in 0..12 {
        for fact in [
            format!("{i}1.5 mm"),
            format!("{i}2 days"),
            format!("{i}3 %"),
        ] {
            assert!(text.contains(&fact), "lost {fact}\n{text}");
        }
    }
    assert_eq!(text, offline.consolidate(&request(Some(&text), Vec::new())));
}

/// Under a budget that bites (terse lines, findings dropped), folding the unchanged history
/// again loses nothing the first fold kept, and the summary settles.
#[test]
fn repeated_folds_under_a_biting_budget_lose_nothing_the_first_fold_kept() {
    let offline = OfflineSummarizer::new(500);
    let mut turns = Vec::new();
    for i in 0..20 {
        turns.push(turn(
            &format!("What did plot {i} show over the whole of the wet season, and why?"),
            &format!(
                "Plot {i}, which the crew surveyed at dawn, recorded {i}1.5 mm of growth over \
                 {i}2 days (Smith et al. 2020), as expected for the season. Cover was {i}3 %, \
                 a figure the crew checked twice."
            ),
        ));
    }
    let first = offline.consolidate(&request(None, turns));
    assert!(first.contains("_Condensed to stay within"), "{first}");
    assert!(first.contains(" … "), "no terse line\n{first}");
    let kept: Vec<String> = (0..20)
        .flat_map(|i| {
            [
                format!("{i}1.5 mm"),
                format!("{i}2 days"),
                format!("{i}3 %"),
            ]
        })
        .filter(|f| first.contains(f.as_str()))
        .collect();
    assert!(kept.len() >= 10, "{first}");
    assert_refolds_keep(&offline, &first, &kept);
}

/// Invented turns whose answer states a figure in a sentence and a table row, and whose
/// synthesis states it again with more detail.
fn stated_three_times() -> Vec<TurnDigest> {
    (1..10)
        .map(|i| TurnDigest {
            invocation_id: format!("peat-{i}"),
            user: format!("How much peat did plot {i} gain?"),
            assistant: format!(
                "Plot {i} gained {i}1.5 mm of peat (Varga & Lind 2018).\n\n\
                 | Plot | Gain | Depth |\n|---|---|---|\n| P{i} | {i}1.5 mm | {i}4 cm |"
            ),
            tool_outputs: vec![format!(
                "Varga & Lind 2018 cored plot {i} over {i}2 days and measured {i}1.5 mm of peat, \
                 with {i}6 % water."
            )],
        })
        .collect()
}

fn facts_of_plot(i: usize) -> [String; 4] {
    [
        format!("{i}1.5 mm"),
        format!("{i}4 cm"),
        format!("{i}2 days"),
        format!("{i}6 % water"),
    ]
}

/// The sentence, the table row and the synthesis line of one figure are one statement, and
/// folding the unchanged history again erodes none of its facts.
#[test]
fn a_figure_stated_three_times_is_one_statement_and_survives_repeated_folds() {
    let offline = OfflineSummarizer::new(4_000);
    let first = offline.consolidate(&request(None, stated_three_times()));
    let mut text = first.clone();
    for _ in 0..5 {
        text = offline.consolidate(&request(Some(&text), Vec::new()));
    }
    for summary in [&first, &text] {
        for i in 1..10 {
            let figure = format!("{i}1.5 mm");
            let lines = findings(summary)
                .lines()
                .filter(|l| l.contains(&figure))
                .count();
            assert_eq!(lines, 1, "{figure} stated on {lines} lines\n{summary}");
            for fact in facts_of_plot(i) {
                assert!(summary.contains(&fact), "lost {fact}\n{summary}");
            }
        }
    }
    assert_eq!(text, offline.consolidate(&request(Some(&text), Vec::new())));
}

/// Under a budget that bites, folding the unchanged history of merged statements again loses
/// nothing the first fold kept, and the summary settles.
#[test]
fn merged_statements_under_a_biting_budget_lose_nothing_the_first_fold_kept() {
    let offline = OfflineSummarizer::new(400);
    let first = offline.consolidate(&request(None, stated_three_times()));
    assert!(first.contains("_Condensed to stay within"), "{first}");
    assert!(first.contains(" · "), "no merged statement\n{first}");
    let kept: Vec<String> = (1..10)
        .flat_map(facts_of_plot)
        .filter(|f| first.contains(f.as_str()))
        .collect();
    assert!(kept.len() >= 8, "{first}");
    assert_refolds_keep(&offline, &first, &kept);
}

/// The receipt counts the findings the summary states and names what the budget dropped.
#[test]
fn the_receipt_agrees_with_the_summary() {
    let mut turns = Vec::new();
    for i in 0..30 {
        turns.push(turn(
            &format!("Question {i}?"),
            &format!("Site {i} recorded {i}1.5 mm of growth over {i}2 days. Plot {i} lost {i}4 % of cover."),
        ));
    }
    let (text, receipt) =
        OfflineSummarizer::new(500).consolidate_with_receipt(&request(None, turns));
    let stated = text
        .lines()
        .filter(|l| l.starts_with("- ") && l.chars().any(|c| c.is_ascii_digit()))
        .count();
    assert_eq!(receipt.kept, stated, "{text}");
    assert!(receipt.dropped_for(DropReason::Budget) > 0, "{receipt:?}");
    for d in &receipt.dropped {
        assert!(!text.contains(&d.finding), "{} is still there", d.finding);
    }
}

proptest! {
    /// A claim that shares neither subject nor value with the correction is never shown as
    /// superseded: it stays among the findings, outside the Corrections section.
    #[test]
    fn an_unrelated_claim_is_never_superseded(
        a in 11u32..99, b in 11u32..99, c in 101u32..999,
        subject in prop::sample::select(vec!["hedgerow beetles", "river otters", "moss cover", "lichen growth"]),
        fix in prop::sample::select(vec!["Correction:", "My mistake:", "That was wrong:", "I misread the table:"]),
        path in 0usize..4,
    ) {
        prop_assume!(a != b);
        let unrelated = format!("Counts of {subject} reached {c}.5 per site in the upland survey.");
        let claim = turn("Orchard?", &format!("Thinning raised apple yield by {a}.5 kg per tree. {unrelated}"));
        // Each path of the correction step: a negation, a user's proposal the answer
        // concedes, a revision of the value, a dispute the answer stands by.
        let correction = match path {
            0 => turn(
                "Per tree?",
                &format!("{fix} thinning raised apple yield by {b}.5 kg per tree, not {a}.5 kg."),
            ),
            1 => turn(
                &format!("I think the apple yield gain was {b}.5 kg per tree, not {a}.5 kg."),
                &format!("You are right. {fix} the gain was {b}.5 kg per tree."),
            ),
            2 => turn(
                "Any update?",
                &format!("The re-weighing revises the apple yield gain per tree from {a}.5 to {b}.5 kg."),
            ),
            _ => turn(
                &format!("I recall {b}.5 kg from the other orchard. Are you sure about {a}.5 kg?"),
                &format!("The {b}.5 kg you recall is the other orchard, corrected for age, so both stand; {a}.5 kg per tree is right here."),
            ),
        };
        let text = OfflineSummarizer::new(4_000).consolidate(&request(None, vec![claim, correction]));
        prop_assert!(findings(&text).contains(&unrelated), "{}", text);
        if path == 3 {
            // A dispute the answer stands by supersedes nothing.
            prop_assert!(!text.contains(CORRECTIONS_HEADING), "{}", text);
        }
        let section = text.split(CORRECTIONS_HEADING).nth(1).unwrap_or("");
        prop_assert!(!section.contains(&format!("{c}.5")), "{}", text);
    }
}

/// Five more folds of an unchanged history keep every fact in `kept`, and a sixth changes
/// nothing.
#[track_caller]
fn assert_refolds_keep(offline: &OfflineSummarizer, first: &str, kept: &[String]) {
    let mut text = first.to_owned();
    for _ in 0..5 {
        text = offline.consolidate(&request(Some(&text), Vec::new()));
    }
    for fact in kept {
        assert!(text.contains(fact.as_str()), "lost {fact}\n{text}");
    }
    assert_eq!(text, offline.consolidate(&request(Some(&text), Vec::new())));
}
