//! The checks of `cargo xtask eval-summary` that issue 30 added: a retracted claim counts as
//! handled only when its line states the corrected content (never because a marker word is
//! present), valid facts shown as superseded or withdrawn, duplicate statements, and whether
//! the compaction's receipt agrees with its summary.
//!
//! Nothing here knows a session: every rule reads the labels (`facts[]`, `superseded[]`,
//! `disputed_but_stands[]`, `checks.superseded_lines`) and the summary's structure.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use compaction_core::Receipt;
use regex::Regex;

/// Words that mark a line as a correction without stating what the value became. A line
/// that carries one of them still states the retracted claim as valid unless it also states
/// the corrected content.
pub(crate) const MARKER_WORDS: [&str; 21] = [
    "correct",
    "retract",
    "supersed",
    "not ",
    "wrong",
    "mix",
    "instead",
    "misread",
    "error",
    "erroneous",
    "no longer",
    "withdrawn",
    "unreliable",
    "invalid",
    "disregard",
    "removed",
    "do not",
    "don't",
    "must not",
    "cannot be",
    "✗",
];

static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d[\d,]*(?:\.\d+)?(?:\s?[–-]\s?\d[\d,]*(?:\.\d+)?)?").expect("valid")
});
static WITHDRAWING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)supersed|withdrawn|retracted|no longer valid|was wrong|were wrong|invalid")
        .expect("valid")
});

/// One superseded-line check with what counts as the corrected content.
#[derive(Debug, Clone)]
pub(crate) struct StrictCheck {
    pub all_of: Vec<String>,
    /// `unless_any` without marker words: corrected values, subjects, regions.
    pub corrected_terms: Vec<String>,
    /// Numbers of the labelled correction (the first sentence of the note after "corrected"),
    /// other than the claim's own.
    pub corrected_values: Vec<String>,
}

fn lower(s: &str) -> String {
    s.to_lowercase().replace('−', "-")
}

/// The strict form of a check, given the session's `superseded[]` notes.
pub(crate) fn strict(all_of: &[String], unless_any: &[String], notes: &[String]) -> StrictCheck {
    let corrected_terms = unless_any
        .iter()
        .filter(|u| {
            let u = lower(u);
            !MARKER_WORDS
                .iter()
                .any(|m| u.contains(m.trim()) || m.contains(u.trim()))
        })
        .map(|u| lower(u))
        .collect();
    let claim_values: BTreeSet<String> = all_of
        .iter()
        .flat_map(|a| {
            NUMBER
                .find_iter(&lower(a))
                .map(|m| m.as_str().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut corrected_values = BTreeSet::new();
    for note in notes {
        let note = lower(note);
        if !all_of.iter().all(|a| note.contains(&lower(a))) {
            continue;
        }
        let Some(at) = note.find("corrected") else {
            continue;
        };
        let rest = &note[at..];
        let sentence = rest.split(". ").next().unwrap_or(rest);
        for m in NUMBER.find_iter(sentence) {
            let before = &sentence[..m.start()];
            let v = m.as_str().to_owned();
            let is_turn =
                before.trim_end().ends_with("turn") || before.trim_end().ends_with("turns");
            if !is_turn
                && !claim_values.contains(&v)
                && v.chars().filter(char::is_ascii_digit).count() >= 2
            {
                corrected_values.insert(v);
            }
        }
    }
    StrictCheck {
        all_of: all_of.iter().map(|a| lower(a)).collect(),
        corrected_terms,
        corrected_values: corrected_values.into_iter().collect(),
    }
}

/// True when `line` states `value` as a whole number.
fn states_value(line: &str, value: &str) -> bool {
    NUMBER.find_iter(line).any(|m| {
        let found = m.as_str();
        found == value || found.split(['–', '-']).any(|e| e.trim() == value)
    })
}

/// Lines of `summary` that state a retracted claim without its corrected content.
pub(crate) fn restated(summary: &str, checks: &[StrictCheck]) -> Vec<String> {
    let mut out = Vec::new();
    for line in summary.lines() {
        let l = lower(line);
        for c in checks {
            let matches = c.all_of.iter().all(|a| l.contains(a));
            let corrected = c.corrected_terms.iter().any(|t| l.contains(t))
                || c.corrected_values.iter().any(|v| states_value(&l, v));
            if matches && !corrected {
                out.push(line.chars().take(160).collect());
            }
        }
    }
    out
}

/// The parts of the summary that present something as withdrawn: in a section whose heading
/// names corrections, each entry's text before its `→` (what was said); elsewhere, a line
/// that says it is superseded, withdrawn or retracted, before any `→`.
pub(crate) fn withdrawn_parts(summary: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_corrections = false;
    for line in summary.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            in_corrections = t.to_lowercase().contains("correction");
            continue;
        }
        let before_arrow = t.split('→').next().unwrap_or(t);
        if (in_corrections && t.contains('→')) || WITHDRAWING.is_match(before_arrow) {
            out.push(lower(before_arrow));
        }
    }
    out
}

/// Valid facts (`facts[]` and `disputed_but_stands[]` of the covered turns) that the summary
/// shows as superseded or withdrawn.
pub(crate) fn valid_marked(summary: &str, valid: &[String]) -> Vec<String> {
    let parts = withdrawn_parts(summary);
    valid
        .iter()
        .filter(|f| {
            let f = lower(&collapse(f));
            parts.iter().any(|p| collapse(p).contains(&f))
        })
        .cloned()
        .collect()
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Extra statements of the same labelled fact: for each fact the summary states, the lines
/// outside sources and corrections sections stating it, minus one.
pub(crate) fn duplicates(summary: &str, facts: &[String]) -> usize {
    let lines = body_lines(summary);
    facts
        .iter()
        .map(|f| {
            let f = lower(&collapse(f));
            lines
                .iter()
                .filter(|l| l.contains(&f))
                .count()
                .saturating_sub(1)
        })
        .sum()
}

/// The summary's lines outside sources and corrections sections, lower case, collapsed.
fn body_lines(summary: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for line in summary.lines() {
        let t = line.trim();
        if t.starts_with("## ") || t.starts_with("# ") {
            let h = t.to_lowercase();
            skip = h.contains("source") || h.contains("correction") || h.contains("reference");
            continue;
        }
        if !skip && !t.is_empty() && !t.starts_with('#') {
            out.push(lower(&collapse(t)));
        }
    }
    out
}

/// Whether the receipt agrees with the summary: `None` when it does, else why not.
pub(crate) fn receipt_mismatch(summary: &str, receipt: Option<&Receipt>) -> Option<String> {
    let Some(r) = receipt else {
        return Some("no receipt".into());
    };
    let text = lower(&collapse(summary));
    let corrected_missing = r
        .corrected
        .iter()
        .filter(|c| !text.contains(&lower(&collapse(&c.now))))
        .count();
    let body = body_lines(summary);
    let was_in_body = r
        .corrected
        .iter()
        .filter(|c| body.iter().any(|l| l.contains(&lower(&collapse(&c.was)))))
        .count();
    let findings = body
        .iter()
        .filter(|l| {
            (l.starts_with("- ") || l.starts_with("* ")) && l.chars().any(|c| c.is_ascii_digit())
        })
        .count();
    let mut why = Vec::new();
    if corrected_missing > 0 {
        why.push(format!(
            "{corrected_missing} corrections not in the summary"
        ));
    }
    if was_in_body > 0 {
        why.push(format!(
            "{was_in_body} corrected claims still among the findings"
        ));
    }
    if r.kept > findings {
        why.push(format!("kept {} > {findings} finding lines", r.kept));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn a_marker_word_does_not_handle_a_retracted_claim() {
        let check = strict(
            &s(&["12.5", "hives"]),
            &s(&["correct", "supersed", "meadow", "19.0"]),
            &s(&[
                "Hives: 12.5 colonies — WRONG; corrected in turn 6: 19.0 colonies in the meadow plots. Other values were right.",
            ]),
        );
        assert_eq!(check.corrected_terms, s(&["meadow", "19.0"]));
        assert_eq!(check.corrected_values, s(&["19.0"]));
        let summary = "- Superseded by a later correction: hives held 12.5 colonies\n- hives: 12.5 → 19.0 colonies\n- hives 12.5 in the meadow";
        assert_eq!(restated(summary, &[check]).len(), 1);
    }

    #[test]
    fn valid_facts_in_a_withdrawn_part_are_counted() {
        let summary = "## Findings\n- Yield 4.2 t/ha (Ode 2020)\n## Corrections\n- Turn 3 said yield 9.9 t/ha and 4.2 t/ha → turn 5: 8.8 t/ha";
        assert_eq!(
            valid_marked(summary, &s(&["4.2 t/ha", "8.8 t/ha"])),
            s(&["4.2 t/ha"])
        );
        assert_eq!(
            duplicates(
                "- a 4.2 t/ha\n* b 4.2 t/ha\n## Corrections\n- 4.2 t/ha",
                &s(&["4.2 t/ha"])
            ),
            1
        );
    }
}
