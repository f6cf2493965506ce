//! Unit tests of claim-level supersession ([`super`]), on invented claims.

use super::*;

fn claims<'a>(lines: &[&'a str]) -> Vec<Claim<'a>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, t)| Claim { text: t, topic: i })
        .collect()
}

/// A new turn of `user`'s query and `answer`'s sentences, with no table (shared with the
/// child modules' tests).
pub(super) fn turn(user: &str, answer: &[&str]) -> NewTurn {
    NewTurn {
        user: vec![user.to_owned()],
        answer: answer.iter().map(|s| (*s).to_owned()).collect(),
        rows: Vec::new(),
        rows_announced: false,
    }
}

fn targets(lines: &[&str], t: &NewTurn) -> Vec<usize> {
    supersessions(&claims(lines), t)
        .into_iter()
        .map(|s| s.claim)
        .collect()
}

const CLAIMS: [&str; 3] = [
    "- Orchard thinning raised apple yield by 14.6 kg per tree (Marlow & Eze 2019).",
    "- Frost damage fell to 23% of buds in thinned rows.",
    "- Soil nitrate stayed at 41 ppm across plots (Quint 2020).",
];

#[test]
fn a_wrong_unit_or_increment() {
    let t = turn(
        "And per hectare?",
        &["Thinning raised apple yield by 14.6 kg per branch, not 14.6 kg per tree — my mistake."],
    );
    assert_eq!(targets(&CLAIMS, &t), [0]);
}

#[test]
fn a_value_given_for_the_wrong_arm() {
    let lines = [
        "- In the early arm, frost damage fell to 23% of buds in thinned rows.",
        "- Soil nitrate stayed at 41 ppm across plots (Quint 2020).",
    ];
    let t = turn(
        "Which arm was that?",
        &[
            "I assigned that to the wrong arm.",
            "In the late arm, frost damage fell to 23% of buds in thinned rows.",
        ],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn a_local_figure_given_as_the_global_one() {
    let lines = [
        "- The whole watershed lost 312 tonnes of sediment per year.",
        "- Rainfall averaged 877 mm per year.",
    ];
    let t = turn(
        "Is that the whole watershed?",
        &[
            "Correction: 312 tonnes of sediment per year is the upper sub-basin alone; the whole watershed lost 505 tonnes per year.",
        ],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn a_retracted_paper() {
    let t = turn(
        "Anything new on Marlow?",
        &["Marlow & Eze 2019 was retracted last year, so its yield gain cannot be used."],
    );
    assert_eq!(targets(&CLAIMS, &t), [0]);
}

/// A single-digit quantity is a value with its unit: moved to another arm, it is a swap;
/// another small quantity of the same line is not the disputed one.
#[test]
fn a_single_digit_quantity_moved_to_another_arm() {
    let lines = [
        "In the sham arm, sleep latency fell by 9 minutes over 4 weeks.",
        "Adherence was 88% in both arms.",
    ];
    let t = turn(
        "Sham?",
        &[
            "I put that in the wrong arm: the 9 minutes fall in sleep latency was in the light arm; the sham arm fell by 2 minutes.",
        ],
    );
    assert_eq!(targets(&lines, &t), [0]);
    assert!(values("fell by 9 minutes over 4 weeks").contains("4 weeks"));
    assert!(!values("9 of the 12 sites").contains("9 the"));
}

/// A work named without the brackets of a citation (a table's label column) is still the
/// subject a retraction names; a retraction of another work leaves it.
#[test]
fn a_retraction_names_an_uncited_work_by_author_and_year() {
    let lines = [
        "Pellham 2011 — Effect size: g = 0.58",
        "Ostrova 2014 — Effect size: g = 0.21",
        "In 2011 the effect size was g = 0.33 in the pooled sample.",
    ];
    let t = turn(
        "Still usable?",
        &["The editors retracted Pellham 2011 in March; its estimate is void."],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn the_user_corrects_their_own_statement() {
    let lines = ["- The user's cohort has 5,400 growers in the valley survey."];
    let t = NewTurn {
        user: vec![
            "I gave you the wrong number: my valley survey has 4,500 growers, not 5,400.".into(),
        ],
        answer: vec!["Thanks — with 4,500 growers the power drops.".into()],
        rows: Vec::new(),
        rows_announced: false,
    };
    assert_eq!(targets(&lines, &t), [0]);
    // A user contesting a figure (a question) corrects nothing by itself.
    let contest = NewTurn {
        user: vec!["Are you sure the 5,400 growers figure is not wrong?".into()],
        answer: vec!["The survey lists 5,400 growers; that figure stands.".into()],
        rows: Vec::new(),
        rows_announced: false,
    };
    assert!(targets(&lines, &contest).is_empty());
}

#[test]
fn a_correction_of_a_correction() {
    let lines = [
        "- Correction: the mean canopy gap is 17.5 m over the decade, not 12.0 m.",
        "- Rainfall averaged 877 mm per year.",
    ];
    let t = turn(
        "Still odd?",
        &["That correction was wrong too: the decade mean canopy gap is 15.2 m, not 17.5 m."],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn a_rejected_dispute_supersedes_nothing() {
    let t = turn(
        "I doubt the 41 ppm nitrate figure, surely it is higher?",
        &[
            "I re-checked the plot table.",
            "Soil nitrate was 41 ppm across plots (Quint 2020); the figure stands.",
            "Higher values of 63 ppm occur only in the manured strip.",
        ],
    );
    assert!(targets(&CLAIMS, &t).is_empty());
}

#[test]
fn a_claim_sharing_neither_subject_nor_value_is_untouched() {
    let t = turn(
        "Wait.",
        &["My mistake: frost damage fell to 31% of buds, not 23%."],
    );
    assert_eq!(targets(&CLAIMS, &t), [1]);
}

#[test]
fn a_line_restating_the_old_claim_without_the_new_value_is_caught() {
    let claim = "Thinning raised apple yield by 14.6 kg per tree.";
    let by = "Thinning raised apple yield by 11.2 kg per tree, not 14.6 kg.";
    assert!(restates(
        "- Apple yield rose by 14.6 kg per tree after thinning.",
        claim,
        by
    ));
    assert!(!restates(
        "- Apple yield rose by 11.2 kg per tree (corrected from 14.6).",
        claim,
        by
    ));
    assert!(!restates("- Soil nitrate stayed at 14.6 ppm.", claim, by));
}

#[test]
fn a_negated_property_supersedes_the_claim_that_states_it() {
    let lines = [
        "- Root uptake of zinc is transporter-limited at 12.5 µM (Vance 2018).",
        "- Leaf area grew 18% in the first month.",
    ];
    let t = turn(
        "Check the uptake model?",
        &["Correction: root uptake of zinc is diffusion-limited, not transporter-limited."],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn an_announcement_lends_its_subject_to_the_figures_beside_it() {
    let lines = ["- Moth counts are robust: 41.5 per trap in all three valleys."];
    let t = turn(
        "Sure?",
        &[
            "My statement was wrong.",
            "The 41.5 per trap comes from the north transect alone, in one season.",
            "I wrongly applied that figure to all three valleys.",
        ],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn only_the_retracted_clause_of_a_claim_goes() {
    let claim = "- Plots held 35 beetles per trap, yet the survey mean was 412 per site.";
    let by = "Correction: plots held 53 beetles per trap, not 35.";
    let (gone, rest) = split_claim(claim, by);
    assert_eq!(gone, "- Plots held 35 beetles per trap");
    assert_eq!(rest.as_deref(), Some("the survey mean was 412 per site."));
    assert_eq!(split_claim("- Plots held 35 beetles.", by).1, None);
    // `, and` joins two claims: the untouched one stays.
    let (gone, rest) = split_claim(
        "- Plots held 35 beetles per trap, and the survey mean was 412 per site.",
        by,
    );
    assert_eq!(gone, "- Plots held 35 beetles per trap");
    assert_eq!(rest.as_deref(), Some("the survey mean was 412 per site."));
    // A disputed word, no value: the clauses naming the word go, the figure stays.
    let (gone, rest) = split_claim(
        "- Zinc: Km = 31.5 µM, and the data fit the transporter model best — so uptake is transporter-limited (Vance 2018).",
        "Correction: uptake is diffusion-limited, not transporter-limited.",
    );
    assert_eq!(
        gone,
        "the data fit the transporter model best; so uptake is transporter-limited (Vance 2018)."
    );
    assert_eq!(rest.as_deref(), Some("- Zinc: Km = 31.5 µM"));
    // A value-less clause right before the retracted figure is its subject.
    let (gone, rest) = split_claim(
        "- The densest plots — those under oak — held 35 beetles per trap, and the survey mean was 412 per site.",
        by,
    );
    assert_eq!(
        gone,
        "- The densest plots; those under oak; held 35 beetles per trap"
    );
    assert_eq!(rest.as_deref(), Some("the survey mean was 412 per site."));
}

#[test]
fn one_claim_stated_on_several_lines_is_corrected_on_each() {
    // A bullet, a table row and a synthesis line state the same wrong claim.
    let lines = [
        "- Spring hive density: 12.5 and 19.0 colonies per km² on the survey grid.",
        "- Survey grid — spring density: 12.5; peak density: 19.0 colonies per km²",
        "* On the survey grid, spring densities were 12.5 and 19.0 colonies per km².",
    ];
    let t = turn(
        "Spring?",
        &[
            "I mixed up the seasons.",
            "The survey grid gives 12.5 and 19.0 colonies per km² for the autumn count, with 8.1 in spring.",
        ],
    );
    let one_topic: Vec<Claim<'_>> = lines.iter().map(|t| Claim { text: t, topic: 0 }).collect();
    let found: Vec<usize> = supersessions(&one_topic, &t)
        .into_iter()
        .map(|s| s.claim)
        .collect();
    assert_eq!(found, [0, 1, 2]);
    // The same sentence restating three different claims is a recap: nothing goes.
    let spread = [
        "- Grid A held 12.5 and 19.0 colonies per km².",
        "- Grid B held 7.25 and 3.5 colonies per km².",
        "- Grid C held 41.5 and 60.5 colonies per km².",
    ];
    let recap = turn(
        "Recap?",
        &[
            "I mixed up the grids.",
            "Grids A, B and C held 12.5 and 19.0, 7.25 and 3.5, 41.5 and 60.5 colonies per km², and 8.1 overall.",
        ],
    );
    assert!(targets(&spread, &recap).is_empty());
}

#[test]
fn a_claim_that_already_weighs_the_corrected_word_is_not_targeted() {
    let lines = [
        "- Bud loss of 23% in thinned rows is frost-driven (Marlow & Eze 2019).",
        "- A 23% bud loss is far above the 5% typical of frost damage and points to a drought-driven loss.",
    ];
    let t = turn(
        "Frost?",
        &["Correction: the bud loss is drought-driven, not frost-driven."],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn a_table_after_a_named_dispute_corrects_only_the_disputed_rows() {
    let lines = [
        "- Copper uptake: 31.5 µM/h, transporter-limited (Vance 2018).",
        "- Zinc uptake 12.5 µM/h, reported as channel-limited.",
    ];
    let t = NewTurn {
        user: vec!["Check the table?".into()],
        answer: vec![
            "Correction: copper uptake is channel-limited, not transporter-limited.".into(),
        ],
        rows: vec![
            "Copper — uptake (µM/h): 31.5; fit: 0.97; limit: channel".into(),
            "Zinc — uptake (µM/h): 12.5; fit: 0.91; limit: channel".into(),
        ],
        rows_announced: true,
    };
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn a_dispute_stood_by_beside_an_unrelated_error_word_supersedes_nothing() {
    let lines = ["- Seed germination reached 64% at 18 °C in the dark trays (Ruiz 2017)."];
    let t = turn(
        "I recall 78% germination from the greenhouse. Are you sure about 64%?",
        &[
            "I re-checked the tray log.",
            "The 78% germination you recall is the greenhouse value, corrected for light, so both stand; the 64% germination figure is right for the dark trays.",
        ],
    );
    assert!(targets(&lines, &t).is_empty());
}

#[test]
fn agreeing_with_the_user_concedes_rather_than_affirms() {
    let lines = [
        "- Glacier front retreat averaged 0.85 km per year across the 12 outlets (Nakamura 2015).",
        "- Calving flux was 31.5 Gt per year.",
    ];
    let t = turn(
        "I think the 0.85 km retreat was per decade, not per year.",
        &[
            "You are right: Nakamura 2015 gives 0.85 km per decade across the 12 outlets, about 0.085 km per year.",
            "My earlier figure was wrong.",
        ],
    );
    assert_eq!(targets(&lines, &t), [0]);
}

#[test]
fn a_conceded_user_proposal_is_the_correction() {
    let lines = [
        "- Glacier front retreat averaged 0.85 km per year across the outlets.",
        "- Calving flux was 31.5 Gt per year.",
    ];
    let t = turn(
        "I think the glacier front retreat of 0.85 km was per decade, not per year.",
        &["You are right, my mistake."],
    );
    assert_eq!(targets(&lines, &t), [0]);
    // The same proposal, not conceded, corrects nothing.
    let kept = turn(
        "I think the glacier front retreat of 0.85 km was per decade, not per year.",
        &["The outlet record gives 0.85 km per year; the annual figure stands."],
    );
    assert!(targets(&lines, &kept).is_empty());
}

#[test]
fn a_revision_from_one_value_to_another_supersedes_the_old_value() {
    let lines = [
        "- Correction: the nest total for all three valleys was 2,310, not 1,870.",
        "- Rainfall averaged 877 mm per year.",
    ];
    let t = turn(
        "Does the recount change it?",
        &["The recount revises the three-valley nest total from 2,310 to 2,265."],
    );
    assert_eq!(targets(&lines, &t), [0]);
    // A change in the world, or new information, is no revision.
    for later in [
        "The three-valley nest total fell from 2,310 to 2,265 by the next survey.",
        "The spring survey updated the three-valley nest total from 2,310 to 2,265.",
    ] {
        assert!(
            targets(&lines, &turn("And since?", &[later])).is_empty(),
            "{later}"
        );
    }
}

#[test]
fn a_negated_property_of_a_named_figure_targets_only_the_claim_stating_it() {
    let lines = [
        "- The cohort study (n = 9,812) estimated univariate associations for 21 phenotypes.",
        "- The strongest univariate association was |r| = 0.31.",
    ];
    let t = turn(
        "Univariate?",
        &["Correction: the 0.31 I gave in turn 21 is not a univariate effect."],
    );
    assert_eq!(targets(&lines, &t), [1]);
}

#[test]
fn a_table_row_repeating_a_claims_values_is_a_recap() {
    let lines = ["- After six trials, 38% of exposed workers responded versus 67% of controls."];
    let t = NewTurn {
        user: vec!["Table please?".into()],
        answer: vec!["I mislabelled a column earlier.".into()],
        rows: vec!["Learning — Measure: exposed workers responding; Effect: 38% vs 67% of controls; Source: Iwa 2021"
                .into(),],
        rows_announced: true,
    };
    assert!(targets(&lines, &t).is_empty());
}

#[test]
fn values_are_bare_numbers() {
    let v = values("g = −0.84 (−1.07 to −0.61), 1.18%/yr, 171 ± 29 Gt, 2,760–3,300 t");
    for want in ["0.84", "1.18", "171", "29", "2,760–3,300", "2,760", "3,300"] {
        assert!(v.contains(want), "{want}: {v:?}");
    }
    assert_eq!(
        negated_values("HR 2.2 per 5 mg, not per 10 mg; 7.5 was wrong"),
        ["10".to_owned(), "7.5".to_owned()].into()
    );
    assert!(
        negated_values("I re-read Quint et al. 2020 in the archive, and my figure was wrong")
            .is_empty()
    );
}
