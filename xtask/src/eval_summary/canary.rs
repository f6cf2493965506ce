//! `--canary`: a generated 55-turn session with one planted fact per turn.

use cli::transcript::{ToolUse, TranscriptTurn};
use serde_json::{Map, Value};
use summarizer::SummarizerConfig;

use super::*;

/// The planted fact types, in rotation.
pub(super) const CANARY_TYPES: [&str; 5] =
    ["number", "citation", "identifier", "constraint", "decision"];
pub(super) const CANARY_TURNS: usize = 55;
pub(super) const SURNAMES: [&str; 11] = [
    "Quillfeather",
    "Ostrowska",
    "Mbeki-Laurent",
    "Tanaka-Reyes",
    "Haugland",
    "Vasquez-Imre",
    "Dunleavy",
    "Achterberg",
    "Rosenthal",
    "Okonkwo",
    "Lindqvist",
];
pub(super) const SUBJECTS: [&str; 11] = [
    "soil moisture",
    "leaf nitrogen",
    "stomatal conductance",
    "root biomass",
    "canopy height",
    "seed mass",
    "pollen load",
    "nectar volume",
    "flowering date",
    "wing length",
    "forager count",
];

/// The turn's planted fact of `kind`: (the user's question, the fact, the sentence that states
/// it).
fn planted_fact(
    kind: &str,
    subject: &str,
    name: &str,
    year: usize,
    i: usize,
) -> (String, String, String) {
    match kind {
        "number" => {
            let v = format!("{}.{} mg/kg", 10 + i * 3, i % 10);
            (
                format!("What is the typical {subject} effect in the field plots?"),
                v.clone(),
                format!(
                    "The pooled plot-level estimate for {subject} is {v} across the trial sites."
                ),
            )
        }
        "citation" => {
            let key = format!("{name} et al. {year}");
            (
                format!("Which study anchors the {subject} result?"),
                key.clone(),
                format!("The anchoring study for {subject} is {key}, a multi-site field trial."),
            )
        }
        "identifier" => {
            let path = format!("data/plots/run_{i:03}/{}.csv", subject.replace(' ', "_"));
            (
                format!("Where is the {subject} data for this analysis?"),
                path.clone(),
                format!(
                    "The cleaned {subject} table is stored at `{path}` in the project repository."
                ),
            )
        }
        "constraint" => {
            let c = format!("exclude pre-{} studies", 2000 + i % 20);
            (
                format!("For the {subject} review, please {c} and keep only field trials."),
                c.clone(),
                format!("Understood: for {subject} I will {c} from now on."),
            )
        }
        _ => {
            let d = format!("use a mixed model with site as random effect for {subject}");
            (
                format!("Which model should we use for {subject}?"),
                d.clone(),
                format!("Decision: we will {d}, as agreed."),
            )
        }
    }
}

/// The canary session: one planted fact per turn, types in rotation, in an answer of filler
/// prose, with a tool synthesis of six figures that are not planted facts (about 60 of them
/// per fold, so that the budget bites after a few folds).
pub(super) fn canary_session() -> Vec<EvalTurn> {
    let mut turns = Vec::new();
    for i in 0..CANARY_TURNS {
        let kind = CANARY_TYPES[i % CANARY_TYPES.len()];
        let subject = SUBJECTS[i % SUBJECTS.len()];
        let name = SURNAMES[(i * 7) % SURNAMES.len()];
        let year = 2003 + (i * 3) % 20;
        let (user, fact, planted) = planted_fact(kind, subject, name, year, i);
        let filler = format!(
            "Several groups discussed {subject} at length, and the broader literature is mixed. \
             Some reviews argue the methods matter more than the setting, others the reverse. \
             Sampling designs vary between sites and seasons, which complicates any pooled view. \
             This remains an open question worth revisiting once more data arrive."
        );
        let assistant = format!("{filler}\n\n{planted}\n\nWant me to look further into {subject}?");
        // Evidence that competes for the budget: a synthesis with figures of its own.
        let synthesis = (0..6)
            .map(|k| {
                format!(
                    "Plot {} recorded {}.{} cm of {subject} change in season {}, against {}.{} cm at the control site.",
                    i * 10 + k,
                    20 + (i * 7 + k * 3) % 70,
                    (i + k) % 10,
                    k + 1,
                    15 + (i * 5 + k) % 60,
                    (i * 3 + k) % 10
                )
            })
            .collect::<Vec<_>>()
            .join(" ");
        turns.push(EvalTurn {
            transcript: TranscriptTurn {
                user: user.clone(),
                assistant,
                prompt_tokens: None,
                completion_tokens: None,
                tools: vec![ToolUse {
                    name: "search_library".into(),
                    args: None,
                    result: format!("## Field notes on {subject}\n\n{synthesis}"),
                }],
                pipeline: Vec::new(),
                findings_summary: Some(planted.clone()),
            },
            facts: vec![Fact { text: fact, kind }],
            dois: Vec::new(),
            stands: Vec::new(),
        });
    }
    turns
}

// ---------------------------------------------------------------------------------------------
// Driving.

pub(super) async fn run_canary(
    config: &SummarizerConfig,
    map: &Map<String, Value>,
) -> Result<bool, String> {
    let turns = canary_session();
    let run = Run {
        name: "canary",
        every: Some(5),
    };
    let replayed = replay(&turns, run, config, map).await?;
    println!(
        "== canary: {} turns, one planted fact per turn ({}), fold every 5 turns: {} folds ==",
        turns.len(),
        CANARY_TYPES.join(", "),
        replayed.folds.len()
    );
    let mut ok = true;
    for after in [1usize, 3, 5, 10] {
        let Some(fold) = replayed.folds.get(after - 1) else {
            println!("after {after} folds: not reached");
            ok = false;
            continue;
        };
        let m = measure(fold, &turns, &Corrections::default());
        println!(
            "after {after} folds (turn {}, {} turns folded, {} tokens): {}",
            fold.after_turn,
            fold.covered.len(),
            m.tokens,
            m.facts.render()
        );
        for miss in m.missing.iter().take(5) {
            println!("    missing {miss}");
        }
        if after == 10 {
            ok &= m.facts.0.values().all(|(k, t)| *k * 100 >= *t * 95);
        }
    }
    for f in &replayed.failures {
        println!("    failure: {f}");
    }
    Ok(ok)
}
