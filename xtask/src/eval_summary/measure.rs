//! What one fold keeps: facts by kind, citations, superseded and restated lines, tokens, and
//! the totals per run.

use std::collections::BTreeMap;

use compaction_core::{CharsPerToken, TokenEstimator};

use crate::summary_checks;

use super::*;

pub(super) fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Kept / total per kind.
#[derive(Debug, Default, Clone)]
pub(super) struct Tally(pub(super) BTreeMap<&'static str, (usize, usize)>);

impl Tally {
    pub(super) fn add(&mut self, kind: &'static str, kept: bool) {
        let e = self.0.entry(kind).or_default();
        e.0 += usize::from(kept);
        e.1 += 1;
    }
    pub(super) fn merge(&mut self, other: &Tally) {
        for (k, (kept, total)) in &other.0 {
            let e = self.0.entry(k).or_default();
            e.0 += kept;
            e.1 += total;
        }
    }
    pub(super) fn total(&self) -> (usize, usize) {
        self.0
            .values()
            .fold((0, 0), |(a, b), (k, t)| (a + k, b + t))
    }
    pub(super) fn render(&self) -> String {
        let (kept, total) = self.total();
        let mut out = format!("facts {}", ratio(kept, total));
        for (kind, (k, t)) in &self.0 {
            out.push_str(&format!(" {kind} {}", ratio(*k, *t)));
        }
        out
    }
}

pub(super) fn ratio(kept: usize, total: usize) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!(
            "{kept}/{total} ({:.1}%)",
            100.0 * kept as f64 / total as f64
        )
    }
}

/// One fold's figures.
#[derive(Debug, Default, Clone)]
pub(super) struct Measure {
    pub(super) facts: Tally,
    /// Facts kept verbatim or by value (see [`kept_by_value`]): kept, total.
    pub(super) by_value: (usize, usize),
    pub(super) missing: Vec<String>,
    pub(super) superseded: Vec<String>,
    pub(super) tokens: usize,
    pub(super) dois_lost: Vec<String>,
    pub(super) unclaimed_entries: usize,
    pub(super) entries: usize,
    /// The citation ledger had to append `## Sources carried forward`.
    pub(super) carried_forward: bool,
    /// Lines stating a retracted claim without its corrected content.
    pub(super) restated: Vec<String>,
    /// Valid facts shown as superseded or withdrawn.
    pub(super) valid_marked: Vec<String>,
    /// Extra statements of labelled facts.
    pub(super) duplicates: usize,
    /// Why the receipt disagrees with the summary, if it does.
    pub(super) receipt: Option<String>,
}

/// The numbers of `text`: digit runs with their decimal points, thousands separators dropped
/// (`18,500` and `18500` are one number).
fn numbers_of(text: &str) -> Vec<String> {
    static NUMBER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\d+(?:[.,]\d+)*").expect("the pattern is valid")
    });
    NUMBER
        .find_iter(text)
        .map(|m| {
            let n = m.as_str();
            let thousands = n
                .split(',')
                .skip(1)
                .all(|g| g.len() == 3 && !g.contains('.'));
            if thousands {
                n.replace(',', "")
            } else {
                n.to_owned()
            }
        })
        .collect()
}

/// A secondary measure, beside the verbatim one: a fact with numbers is kept by value when one
/// line of the summary states every number it states (`~15%` for `about 15%`, `Mc 0.6 vs 1.1`
/// for `Mc 0.6, compared with Mc 1.1`). Never used for the issue's bar; it tells a paraphrase
/// from a lost value.
pub(super) fn kept_by_value(summary: &str, fact: &str) -> bool {
    let wanted = numbers_of(fact);
    !wanted.is_empty()
        && summary.lines().any(|line| {
            let stated = numbers_of(line);
            wanted.iter().all(|n| stated.contains(n))
        })
}

pub(super) fn superseded_lines(summary: &str, checks: &[SupersededLine]) -> Vec<String> {
    let mut out = Vec::new();
    for line in summary.lines() {
        let lower = line.to_lowercase();
        for check in checks {
            if check
                .all_of
                .iter()
                .all(|s| lower.contains(&s.to_lowercase()))
                && !check
                    .unless_any
                    .iter()
                    .any(|s| lower.contains(&s.to_lowercase()))
            {
                out.push(line.chars().take(160).collect());
            }
        }
    }
    out
}

/// Bibliography entries (lines of a sources section) and how many name a source no prose line
/// of the summary cites (first author surname and year).
pub(super) fn bibliography(summary: &str) -> (usize, usize) {
    let mut in_sources = false;
    let mut prose = String::new();
    let mut entries = Vec::new();
    for line in summary.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            let h = t.trim_start_matches('#').trim().to_lowercase();
            in_sources =
                h.contains("sources") || h.contains("references") || h.contains("bibliograph");
            continue;
        }
        if in_sources && t.starts_with("- ") {
            entries.push(t.to_owned());
        } else {
            prose.push_str(t);
            prose.push('\n');
        }
    }
    let prose = prose.to_lowercase();
    let unclaimed = entries
        .iter()
        .filter(|e| {
            let first = e
                .trim_start_matches("- ")
                .split([',', ' '])
                .next()
                .unwrap_or("")
                .to_lowercase();
            let year = e
                .split(|c: char| !c.is_ascii_digit())
                .find(|w| w.len() == 4 && (w.starts_with("19") || w.starts_with("20")))
                .unwrap_or("");
            !prose
                .lines()
                .any(|l| !first.is_empty() && l.contains(&first) && l.contains(year))
        })
        .count();
    (entries.len(), unclaimed)
}

pub(super) fn measure(fold: &Fold, turns: &[EvalTurn], checks: &Corrections) -> Measure {
    let summary = normalized(&fold.text);
    let corrected = checks.by_turn.is_some_and(|t| fold.covered.contains(&t));
    let mut m = Measure {
        tokens: CharsPerToken.estimate(&fold.text),
        superseded: if corrected {
            superseded_lines(&fold.text, &checks.lines)
        } else {
            Vec::new()
        },
        ..Measure::default()
    };
    let mut valid: Vec<String> = Vec::new();
    for &n in &fold.covered {
        valid.extend(turns[n].facts.iter().map(|f| f.text.clone()));
        valid.extend(turns[n].stands.iter().cloned());
        for fact in &turns[n].facts {
            let kept = summary.contains(&normalized(&fact.text));
            m.facts.add(fact.kind, kept);
            m.by_value.0 += usize::from(kept || kept_by_value(&fold.text, &fact.text));
            m.by_value.1 += 1;
            if !kept {
                m.missing
                    .push(format!("t{} {}: {}", n + 1, fact.kind, fact.text));
            }
        }
        for doi in &turns[n].dois {
            if !summary.contains(doi) {
                m.dois_lost.push(doi.clone());
            }
        }
    }
    m.carried_forward = fold.text.contains(summarizer::CARRIED_FORWARD_HEADING);
    if corrected {
        m.restated = summary_checks::restated(&fold.text, &checks.strict);
    }
    m.valid_marked = summary_checks::valid_marked(&fold.text, &valid);
    m.duplicates = summary_checks::duplicates(&fold.text, &valid);
    m.receipt = summary_checks::receipt_mismatch(&fold.text, fold.receipt.as_ref());
    // A fact a rejected dispute left standing must still be stated.
    for &n in &fold.covered {
        for f in &turns[n].stands {
            if !summary.contains(&normalized(f)) {
                m.valid_marked
                    .push(format!("{f} (disputed but stands: missing)"));
            }
        }
    }
    m.dois_lost.sort();
    m.dois_lost.dedup();
    (m.entries, m.unclaimed_entries) = bibliography(&fold.text);
    m
}

// ---------------------------------------------------------------------------------------------
// The canary.

/// Totals of one run over a group of sessions.
#[derive(Debug, Default)]
pub(super) struct Totals {
    pub(super) facts: Tally,
    /// Facts kept verbatim or by value, over the last folds: kept, total.
    pub(super) by_value: (usize, usize),
    pub(super) restated: usize,
    pub(super) valid_marked: usize,
    pub(super) over_budget: usize,
    pub(super) over_bar: usize,
    pub(super) max_tokens: usize,
    pub(super) dois_lost: usize,
    pub(super) receipt_mismatches: usize,
    pub(super) duplicates: usize,
}

impl Totals {
    pub(super) fn render(&self, budget: usize) -> String {
        format!(
            "{} | by value {} | restated (all folds covering the correction) {} | valid marked (all folds) {} | \
             duplicates (last folds) {} | max tokens {} | folds over budget ({budget}) {} | \
             folds over {SUMMARY_BAR_TOKENS} tokens {} | dois lost {} | receipt mismatches {}",
            self.facts.render(),
            ratio(self.by_value.0, self.by_value.1),
            self.restated,
            self.valid_marked,
            self.duplicates,
            self.max_tokens,
            self.over_budget,
            self.over_bar,
            self.dois_lost,
            self.receipt_mismatches
        )
    }

    pub(super) fn passes(&self) -> bool {
        let (kept, total) = self.facts.total();
        total > 0
            && kept * 100 >= total * 95
            && self.restated == 0
            && self.valid_marked == 0
            && self.over_budget == 0
            && self.dois_lost == 0
            && self.receipt_mismatches == 0
    }
}

/// Issue 30's bar for a summary at spec defaults, in tokens.
pub(super) const SUMMARY_BAR_TOKENS: usize = 4000;

pub(super) fn fold_line(m: &Measure) -> String {
    format!(
        "{} | by value {} | restated {} (marker-lenient {}) | valid marked {} | duplicates {} | \
         tokens {} | dois lost {} | no-claim entries {} | receipt {}",
        m.facts.render(),
        ratio(m.by_value.0, m.by_value.1),
        m.restated.len(),
        m.superseded.len(),
        m.valid_marked.len(),
        m.duplicates,
        m.tokens,
        m.dois_lost.len(),
        m.unclaimed_entries,
        m.receipt.as_deref().unwrap_or("ok")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_is_kept_by_value_when_one_line_states_all_its_numbers() {
        let summary = "- Kelp cover fell ~15% after 2,400 urchins per plot\n- Survey depth 12 m";
        assert!(kept_by_value(summary, "about 15%"));
        assert!(kept_by_value(summary, "15% with 2400 urchins"));
        // Numbers on two different lines do not make one fact.
        assert!(!kept_by_value(summary, "15% at 12 m"));
        // A number the summary never states, and a fact without numbers.
        assert!(!kept_by_value(summary, "about 1.5%"));
        assert!(!kept_by_value(summary, "Okafor et al."));
    }
}
