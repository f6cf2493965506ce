//! The facts ledger: the numbers with units a model summary must keep, beside the citation
//! ledger ([`crate::ledger`]), and the fail-closed checks on a model summary.
//!
//! The ledger holds every number with its unit (`3,579 mAh/g`, `97 %`, `60 min`; see
//! `text::numeric_findings`) of the **previous summary** and of the slice's **user queries and
//! answers** (the syntheses' own figures are evidence the answers report; the offline
//! summarizer keeps them, a model is asked to), with the line that states it.
//!
//! [`FactsLedger::check`] refuses a model summary that must not be committed:
//! - **empty** (or whitespace);
//! - **longer than the text it replaces** (the previous summary plus the new turns, tokens by
//!   the core's estimator);
//! - **dropping the previous summary's ledger**: it keeps fewer than half of the previous
//!   summary's figures and citations (at least [`MIN_LEDGER_FOR_CHECK`] of them) — a summary
//!   of the new turns only.
//!
//! [`FactsLedger::reconcile`] re-adds the lines of every figure the summary does not keep
//! under `## Key figures carried forward`, deduplicated, in ledger order.

use std::collections::HashSet;

use compaction_core::{CharsPerToken, SummaryRequest, TokenEstimator};

use crate::citation;
use crate::error::SummarizerError;
use crate::text::{numeric_findings, sentences};

/// The heading of the section the facts ledger appends.
pub const KEY_FIGURES_HEADING: &str = "## Key figures carried forward";
/// The fewest previous-summary facts for the "dropped the ledger" check to apply.
pub const MIN_LEDGER_FOR_CHECK: usize = 4;

/// One figure and the line that states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    /// The normalized figure (`3,579mah/g`).
    pub key: String,
    /// The sentence or line that states it, as written.
    pub line: String,
}

/// The figures a model summary must keep, and what the previous summary held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FactsLedger {
    figures: Vec<Figure>,
    /// The previous summary's figures and citation keys.
    previous: Vec<String>,
    /// Tokens of the text a summary replaces.
    replaced_tokens: usize,
}

impl FactsLedger {
    /// The ledger of a consolidation request.
    pub fn from_request(request: &SummaryRequest) -> Self {
        let mut ledger = FactsLedger::default();
        let mut seen = HashSet::new();
        if let Some(previous) = &request.previous_summary {
            for line in previous.lines() {
                ledger.add_line(line.trim(), &mut seen);
            }
            let mut previous_keys: Vec<String> = numeric_findings(previous).into_iter().collect();
            previous_keys.extend(citation::extract(previous).into_iter().map(|c| c.key));
            let mut unique = HashSet::new();
            previous_keys.retain(|k| unique.insert(k.clone()));
            ledger.previous = previous_keys;
        }
        for turn in &request.turns {
            for text in [&turn.user, &turn.assistant] {
                for sentence in sentences(text) {
                    ledger.add_line(&sentence, &mut seen);
                }
            }
        }
        let replaced = format!(
            "{}\n{}",
            request.previous_summary.as_deref().unwrap_or(""),
            request.new_turns_text
        );
        ledger.replaced_tokens = CharsPerToken.estimate(&replaced);
        ledger
    }

    fn add_line(&mut self, line: &str, seen: &mut HashSet<String>) {
        let line = line.trim_start_matches(['-', '*', ' ']).trim();
        if line.is_empty() || line.starts_with('#') {
            return;
        }
        for key in numeric_findings(line) {
            if seen.insert(key.clone()) {
                self.figures.push(Figure {
                    key,
                    line: line.to_owned(),
                });
            }
        }
    }

    /// Every figure, in order of first appearance.
    pub fn figures(&self) -> &[Figure] {
        &self.figures
    }

    /// Tokens of the text a summary replaces.
    pub fn replaced_tokens(&self) -> usize {
        self.replaced_tokens
    }

    /// Refuses a summary that must not be committed (see the module docs); `source_name`
    /// names the endpoint in the error.
    pub fn check(&self, summary: &str, source_name: &str) -> Result<(), SummarizerError> {
        if summary.trim().is_empty() {
            return Err(SummarizerError::EmptySummary {
                source_name: source_name.to_owned(),
            });
        }
        let summary_tokens = CharsPerToken.estimate(summary);
        if summary_tokens > self.replaced_tokens {
            return Err(SummarizerError::Oversized {
                source_name: source_name.to_owned(),
                summary_tokens,
                replaced_tokens: self.replaced_tokens,
            });
        }
        if self.previous.len() >= MIN_LEDGER_FOR_CHECK {
            let figures: HashSet<String> = numeric_findings(summary).into_iter().collect();
            let cited = citation::keys(summary);
            let kept = self
                .previous
                .iter()
                .filter(|k| figures.contains(*k) || cited.contains(*k))
                .count();
            if kept * 2 < self.previous.len() {
                return Err(SummarizerError::LedgerDropped {
                    source_name: source_name.to_owned(),
                    kept,
                    total: self.previous.len(),
                });
            }
        }
        Ok(())
    }

    /// The figures `summary` does not state.
    pub fn missing_from(&self, summary: &str) -> Vec<&Figure> {
        let kept: HashSet<String> = numeric_findings(summary).into_iter().collect();
        self.figures
            .iter()
            .filter(|f| !kept.contains(&f.key))
            .collect()
    }

    /// `summary` with a `## Key figures carried forward` section listing, once each, the
    /// lines of the figures it does not state; unchanged (trimmed) when it states them all.
    pub fn reconcile(&self, summary: &str) -> String {
        let summary = summary.trim();
        let missing = self.missing_from(summary);
        if missing.is_empty() {
            return summary.to_owned();
        }
        let mut lines: Vec<&str> = Vec::new();
        for f in missing {
            if !lines.contains(&f.line.as_str()) {
                lines.push(&f.line);
            }
        }
        let mut out = format!("{summary}\n\n{KEY_FIGURES_HEADING}");
        for line in lines {
            out.push_str("\n- ");
            out.push_str(line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compaction_core::TurnDigest;

    fn request(previous: Option<&str>, answer: &str) -> SummaryRequest {
        SummaryRequest::new(
            String::new(),
            String::new(),
            previous.map(str::to_owned),
            format!("**User**: q\n**Assistant**: {answer}"),
            vec![TurnDigest {
                invocation_id: "inv-1".into(),
                user: "Exclude pre-2015 studies. How much does silicon swell?".into(),
                assistant: answer.into(),
                tool_outputs: vec!["Evidence: 999 mAh/g in one cell.".into()],
            }],
        )
    }

    #[test]
    fn missing_figures_are_carried_forward_once_with_their_lines() {
        let ledger = request(
            Some("## Summary\n- Graphite holds 372 mAh/g."),
            "Silicon swells by 280 % and holds 3,579 mAh/g. It lasts 1,000 cycles.",
        );
        let ledger = FactsLedger::from_request(&ledger);
        let out = ledger.reconcile("## Summary\nSilicon swells by 280 %.");
        assert_eq!(
            out,
            "## Summary\nSilicon swells by 280 %.\n\n## Key figures carried forward\n\
             - Graphite holds 372 mAh/g.\n\
             - Silicon swells by 280 % and holds 3,579 mAh/g.\n\
             - It lasts 1,000 cycles."
        );
        // The synthesis's own figures are not the model's to keep.
        assert!(!out.contains("999"));
        assert_eq!(ledger.reconcile(&out), out, "idempotent");
    }

    proptest::proptest! {
        /// Whatever subset of the answer's sentences a model keeps, the reconciled summary
        /// states every figure of the ledger, and reconciling again changes nothing.
        #[test]
        fn reconcile_restores_every_figure_and_is_idempotent(
            figures in proptest::collection::vec((1u32..5000, 0usize..4), 1..12),
            kept in proptest::collection::vec(proptest::bool::ANY, 12),
        ) {
            let units = ["mAh/g", "%", "min", "cycles"];
            let sentences: Vec<String> = figures
                .iter()
                .enumerate()
                .map(|(i, (n, u))| format!("Result {i} is {n} {}.", units[*u]))
                .collect();
            let ledger = FactsLedger::from_request(&request(None, &sentences.join(" ")));
            let model: Vec<&str> = sentences
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(s, _)| s.as_str())
                .collect();
            let model = format!("## Summary\n{}", model.join(" "));
            let once = ledger.reconcile(&model);
            proptest::prop_assert!(ledger.missing_from(&once).is_empty(), "{once}");
            proptest::prop_assert!(once.starts_with(model.trim()));
            proptest::prop_assert_eq!(ledger.reconcile(&once), once);
        }
    }

    #[test]
    fn empty_oversized_and_ledger_dropping_summaries_are_refused() {
        let previous =
            "## Summary\n- A is 10 %, B is 20 %, C is 30 %, D is 40 % (Smith et al., 2020).";
        let ledger = FactsLedger::from_request(&request(Some(previous), "E is 50 %."));
        assert!(matches!(
            ledger.check("  ", "m"),
            Err(SummarizerError::EmptySummary { .. })
        ));
        let long = "x".repeat(ledger.replaced_tokens() * 4 + 8);
        assert!(matches!(
            ledger.check(&long, "m"),
            Err(SummarizerError::Oversized { .. })
        ));
        assert!(matches!(
            ledger.check("## Summary\nE is 50 %.", "m"),
            Err(SummarizerError::LedgerDropped {
                kept: 0,
                total: 5,
                ..
            })
        ));
        assert!(ledger.check("A 10 %, B 20 %, C 30 %. E 50 %.", "m").is_ok());
    }
}
