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
//!   of the new turns only;
//! - **restating a corrected claim as valid** (issue 30): the ledger knows which claims of the
//!   previous summary and the slice a later turn of the slice corrected
//!   ([`crate::supersede`], the offline summarizer's rule); a summary line that names such a
//!   claim's subject and a retracted value without the correction is refused.
//!
//! [`FactsLedger::reconcile`] re-adds the lines of every figure the summary does not keep
//! under `## Key figures carried forward`, deduplicated, in ledger order — never the line of a
//! corrected claim. [`FactsLedger::receipt`] is the fold's receipt.

use std::collections::HashSet;

use compaction_core::{CharsPerToken, CorrectedClaim, Receipt, SummaryRequest, TokenEstimator};

use crate::citation;
use crate::error::SummarizerError;
use crate::findings;
use crate::supersede::{self, Claim, NewTurn};
use crate::text::{numeric_findings, sentences};

/// The heading of the section the facts ledger appends.
pub const KEY_FIGURES_HEADING: &str = "## Key figures carried forward";
/// The fewest previous-summary facts for the "dropped the ledger" check to apply.
pub(crate) const MIN_LEDGER_FOR_CHECK: usize = 4;

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
    /// Claims a turn of the slice corrected: (claim, correcting sentence, turn index).
    corrected: Vec<(String, String)>,
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
        ledger.corrected = corrections(request);
        ledger
            .figures
            .retain(|f| !ledger.corrected.iter().any(|(claim, _)| claim == &f.line));
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
        for line in summary.lines() {
            if let Some((_, by)) = self
                .corrected
                .iter()
                .find(|(claim, by)| supersede::restates(line, claim, by))
            {
                return Err(SummarizerError::RestatesSuperseded {
                    source_name: source_name.to_owned(),
                    line: line.trim().to_owned(),
                    now: by.clone(),
                });
            }
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

    /// The claims the slice corrected, each with its correcting sentence.
    pub fn corrected(&self) -> &[(String, String)] {
        &self.corrected
    }

    /// The receipt of a committed summary: the ledger's figures it states, the claims the
    /// slice corrected. A model summary drops nothing the ledger holds ([`Self::reconcile`]
    /// carries it forward).
    pub fn receipt(&self, summary: &str) -> Receipt {
        Receipt {
            kept: self.figures.len() - self.missing_from(summary).len(),
            corrected: self
                .corrected
                .iter()
                .map(|(was, now)| CorrectedClaim {
                    was: was.clone(),
                    now: now.clone(),
                    turn: None,
                })
                .collect(),
            dropped: Vec::new(),
        }
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

/// The claims of the previous summary and of the slice that a later turn of the slice
/// corrects, each with its correcting sentence, turn by turn.
fn corrections(request: &SummaryRequest) -> Vec<(String, String)> {
    let mut claims: Vec<(String, usize)> = Vec::new();
    if let Some(previous) = &request.previous_summary {
        for line in citation::prose_lines(previous) {
            let line = line.trim().trim_start_matches(['-', '*', ' ']).trim();
            if !line.starts_with('#') && findings::is_finding(line) {
                claims.push((line.to_owned(), 0));
            }
        }
    }
    let mut out = Vec::new();
    for (i, turn) in request.turns.iter().enumerate() {
        let new_turn = NewTurn {
            user: sentences(&turn.user),
            answer: sentences(&turn.assistant),
            rows: findings::table_rows(&turn.assistant),
            rows_announced: supersede::announced_before_table(&turn.assistant),
        };
        let view: Vec<Claim<'_>> = claims
            .iter()
            .map(|(text, topic)| Claim {
                text,
                topic: *topic,
            })
            .collect();
        let found = supersede::supersessions(&view, &new_turn);
        let mut gone: Vec<usize> = Vec::new();
        for s in found {
            out.push((claims[s.claim].0.clone(), s.by.clone()));
            gone.push(s.claim);
        }
        gone.sort_unstable();
        for g in gone.into_iter().rev() {
            claims.remove(g);
        }
        for line in new_turn.answer.into_iter().chain(new_turn.rows) {
            if findings::is_finding(&line) {
                claims.push((line, i + 1));
            }
        }
    }
    out
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

    /// The previous summary of the two hive tests.
    const HIVES: &str = "## Summary\n- Hive density near the orchard was 12.5 colonies per km² (Ode 2019).\n- Pollen loads averaged 31 mg per forager.";

    /// The ledger of one new turn (`user`, `assistant`) after [`HIVES`].
    fn hive_ledger(user: &str, assistant: &str) -> FactsLedger {
        FactsLedger::from_request(&SummaryRequest::new(
            String::new(),
            String::new(),
            Some(HIVES.into()),
            String::from("**User**: hives?"),
            vec![TurnDigest {
                invocation_id: "inv-2".into(),
                user: user.into(),
                assistant: assistant.into(),
                tool_outputs: Vec::new(),
            }],
        ))
    }

    /// Fail closed: a model summary that restates a corrected claim as valid is refused; one
    /// that states the correction passes, and reconciling never re-adds the old claim.
    #[test]
    fn a_summary_restating_a_corrected_claim_is_refused() {
        let ledger = hive_ledger(
            "Can you re-check the hive density?",
            "My mistake: hive density near the orchard was 21.5 colonies per km², not 12.5 (Ode 2019).",
        );
        assert_eq!(ledger.corrected().len(), 1, "{:?}", ledger.corrected());
        let stale = HIVES;
        let err = ledger.check(stale, "m").unwrap_err();
        assert!(
            matches!(err, SummarizerError::RestatesSuperseded { .. }),
            "{err}"
        );
        let right = "## Summary\n- Hive density near the orchard was 21.5 colonies per km², not 12.5 (Ode 2019).\n- Pollen loads averaged 31 mg per forager.";
        assert!(ledger.check(right, "m").is_ok());
        let reconciled = ledger.reconcile("## Summary\n- Pollen loads averaged 31 mg per forager.");
        assert!(!reconciled.contains("12.5 colonies"), "{reconciled}");
        assert!(ledger.check(&reconciled, "m").is_ok(), "{reconciled}");
        let receipt = ledger.receipt(right);
        assert_eq!(receipt.corrected.len(), 1);
    }

    /// The same rule from the structure of the exchange, fail-closed: a user's proposal the
    /// answer concedes makes a restatement of the old claim refused; a dispute the answer
    /// stands by supersedes nothing, so restating the claim passes.
    #[test]
    fn a_conceded_proposal_is_refused_and_a_stood_dispute_is_not() {
        let stale = HIVES;
        let conceded = hive_ledger(
            "I think the hive density near the orchard was 21.5 colonies per km², not 12.5.",
            "You are right, my mistake.",
        );
        assert_eq!(conceded.corrected().len(), 1, "{:?}", conceded.corrected());
        assert!(matches!(
            conceded.check(stale, "m"),
            Err(SummarizerError::RestatesSuperseded { .. })
        ));
        let stood = hive_ledger(
            "I recall 21.5 colonies per km² from the hill sites. Are you sure about 12.5?",
            "The 21.5 you recall is the hill sites, corrected for altitude, so both stand; 12.5 colonies per km² is right near the orchard.",
        );
        assert!(stood.corrected().is_empty(), "{:?}", stood.corrected());
        assert!(stood.check(stale, "m").is_ok());
    }
}
