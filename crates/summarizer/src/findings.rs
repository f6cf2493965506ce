//! What a research summary must hold on to: **durable facts** and the lines that state them.
//!
//! A durable fact is one of
//! - a **number** (`0.31`, `9,812`, `−0.84`, `95.4%`, `2140–2105`, `5.1σ`); single-digit
//!   integers and four-digit years are not counted on their own;
//! - a **citation** of [`crate::citation`] other than a source line (an author-year key, a DOI,
//!   an arXiv id);
//! - an **identifier or path** (a `` `code span` ``, `data/run_01/x.csv`, `ABC-123`).
//!
//! A line that states at least one durable fact is a **finding**. Besides findings, two
//! kinds of sentence are **pinned** (never dropped by a budget): the user's **constraints**
//! (`exclude pre-2015 studies`, `only field trials`) and **decisions** (`Decision: …`, `we will
//! use …`). Which earlier claims a turn corrects is [`crate::supersede`]'s to say, from the
//! structure of the exchange.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::citation::{self, CitationKind};

static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"[−\-+±]?\d(?:[\d,]*\d)?(?:\.\d+)?(?:\s?[–\-]\s?\d(?:[\d,]*\d)?(?:\.\d+)?)?(?:\s?[%σ‰×])?",
    )
    .expect("the pattern is valid")
});
static IDENTIFIER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"`[^`\s][^`]{0,120}`",
        r"|\b[\w.\-]+(?:/[\w.\-]+)+\.[A-Za-z][\w]{0,7}\b",
        r"|\b[A-Z]{2,}[A-Z0-9]*-\d{2,}\b",
    ))
    .expect("the pattern is valid")
});
static CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\b(?:exclude|excluding|only (?:include|use|consider|keep)|keep only|restrict(?:ed)? to|",
        r"limit(?:ed)? to|must (?:not )?|never use|do not (?:use|include|cite)|",
        r"don't (?:use|include|cite)|no (?:studies|papers|sources) (?:before|after|older)|",
        r"pre-(?:19|20)\d\d|post-(?:19|20)\d\d)",
    ))
    .expect("the pattern is valid")
});
static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(?:^|\b)(?:decision:|we (?:have )?decided|we will use|we'll use|we will go with|",
        r"let's (?:use|go with)|we chose|we agreed|agreed to use|i'll go with)",
    ))
    .expect("the pattern is valid")
});
/// The durable facts of `line`, normalized (numbers without spaces, citations by key,
/// identifiers as written), in a set.
pub(crate) fn facts(line: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let cited = citation::extract(line);
    for c in &cited {
        if c.kind != CitationKind::SourceLine {
            out.insert(c.key.clone());
        }
    }
    for m in NUMBER.find_iter(line) {
        if let Some(n) = counted_number(line, m.start(), m.as_str()) {
            out.insert(match unit_after(&line[m.end()..]) {
                Some(unit) => format!("{n} {unit}"),
                None => n,
            });
        }
    }
    for m in IDENTIFIER.find_iter(line) {
        out.insert(m.as_str().trim_matches('`').to_owned());
    }
    out
}

/// The counted numbers of `text` as written (no unit), in order: what [`facts`] counts.
pub(crate) fn numbers(text: &str) -> Vec<String> {
    NUMBER
        .find_iter(text)
        .filter(|m| counted_number(text, m.start(), m.as_str()).is_some())
        .map(|m| m.as_str().trim().to_owned())
        .collect()
}

/// Words after a number that are no unit.
const NOT_UNITS: [&str; 20] = [
    "for", "and", "to", "of", "in", "at", "with", "vs", "the", "a", "or", "on", "by", "from", "is",
    "was", "were", "are", "as", "than",
];

/// The unit after a number (`mg/kg`, `cm`, `trials`): the next word, unless it is a function
/// word, so that `55.5 mg/kg` and `55.5 cm` are different facts.
fn unit_after(rest: &str) -> Option<String> {
    let word: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || matches!(c, '/' | '¹' | '⁴' | '°'))
        .collect();
    let lower = word.to_lowercase();
    (!word.is_empty()
        && rest.starts_with(' ')
        && word.chars().next().is_some_and(char::is_alphabetic)
        && !NOT_UNITS.contains(&lower.as_str()))
    .then_some(lower)
}

/// A number worth counting, normalized; `None` for a single digit, a year, or a digit inside
/// a word (`G395H`, `CO2`).
fn counted_number(line: &str, start: usize, raw: &str) -> Option<String> {
    let before = line[..start].chars().next_back();
    if before.is_some_and(|c| c.is_alphanumeric() || c == '.') {
        return None;
    }
    let n: String = raw
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .replace('−', "-");
    let digits = n.chars().filter(char::is_ascii_digit).count();
    let plain = n.chars().all(|c| c.is_ascii_digit());
    if digits < 2 || (plain && digits == 4 && (n.starts_with("19") || n.starts_with("20"))) {
        return None;
    }
    Some(n)
}

/// True when `line` states a durable fact.
pub(crate) fn is_finding(line: &str) -> bool {
    !facts(line).is_empty()
}

/// True when `line` states an author-year citation, a DOI or an arXiv id.
pub(crate) fn is_cited(line: &str) -> bool {
    citation::extract(line)
        .iter()
        .any(|c| c.kind != CitationKind::SourceLine)
}

/// True when a sentence of the user states a constraint on the research.
pub(crate) fn is_constraint(sentence: &str) -> bool {
    CONSTRAINT.is_match(sentence)
}

/// True when a sentence records a decision.
pub(crate) fn is_decision(sentence: &str) -> bool {
    DECISION.is_match(sentence)
}

/// The data rows of the Markdown tables in `text`, each as one line: the first cell, then
/// `header: cell` for the others (`All designs pooled — k: 47; Hedges' g: −0.42`). Cells keep
/// their text; emphasis marks are dropped.
pub(crate) fn table_rows(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut header: Option<Vec<String>> = None;
    let mut in_body = false;
    for line in text.lines() {
        let t = line.trim();
        if !t.starts_with('|') {
            header = None;
            in_body = false;
            continue;
        }
        let cells: Vec<String> = t
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace("**", "").replace("__", ""))
            .collect();
        let separator = cells
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')));
        match (&header, separator, in_body) {
            (None, _, _) => header = Some(cells),
            (Some(_), true, false) => in_body = true,
            (Some(h), false, true) => {
                let mut row = cells.first().cloned().unwrap_or_default();
                let rest: Vec<String> = cells
                    .iter()
                    .enumerate()
                    .skip(1)
                    .filter(|(_, c)| !c.is_empty())
                    .map(|(i, c)| match h.get(i).filter(|h| !h.is_empty()) {
                        Some(name) => format!("{name}: {c}"),
                        None => c.clone(),
                    })
                    .collect();
                if !rest.is_empty() {
                    row.push_str(" — ");
                    row.push_str(&rest.join("; "));
                }
                out.push(row);
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_numbers_citations_and_identifiers() {
        let f = facts(
            "ICC rose from 0.31 to 0.47 in 2021 (Haddad & Rivas, 2021), n = 9,812, see `run_7.yaml` and G395H.",
        );
        assert!(f.contains("0.31"), "{f:?}");
        assert!(f.contains("9,812"), "{f:?}");
        assert!(facts("55.5 mg/kg").contains("55.5 mg/kg"));
        assert!(facts("55.5 cm and more").contains("55.5 cm"));
        assert!(facts("0.31 for 10 min").contains("0.31"));
        assert!(f.contains("run_7.yaml"), "{f:?}");
        assert!(f.iter().any(|k| k.starts_with("ay:haddad")), "{f:?}");
        assert!(!f.contains("2021"), "{f:?}");
        assert!(!f.iter().any(|k| k.contains("395")), "{f:?}");
        assert!(!is_finding("The method matters more than the setting."));
    }

    #[test]
    fn constraints_and_decisions_are_recognised() {
        assert!(is_constraint("Please exclude pre-2015 studies."));
        assert!(is_constraint("Keep only field trials."));
        assert!(!is_constraint("Which study anchors the result?"));
        assert!(is_decision("Decision: we will use a mixed model."));
        assert!(!is_decision("A mixed model is one option."));
        assert_eq!(
            numbers("Yield rose 12.5% (n = 3,400) in 2019 on plot G7, ±60 kg and 7."),
            ["12.5%", "3,400", "±60"]
        );
    }

    #[test]
    fn table_rows_become_lines_with_their_headers() {
        let rows = table_rows(
            "| Subset | k | g (95% CI) |\n|---|---|---|\n| **All pooled** | 47 | **−0.42** (−0.58 to −0.26) |\n| Lab | 21 | −0.84 |\n\nAfter.",
        );
        assert_eq!(
            rows,
            [
                "All pooled — k: 47; g (95% CI): −0.42 (−0.58 to −0.26)",
                "Lab — k: 21; g (95% CI): −0.84"
            ]
        );
    }
}
