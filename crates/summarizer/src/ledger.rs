//! The citation ledger: every citation of the slice and of the previous summary, and the
//! `## Sources carried forward` section that restores whatever a summary left out.
//!
//! The ledger is built deterministically from a [`SummaryRequest`]: the previous summary
//! first, then each turn's user query, tool outputs and answer, in order (see
//! [`crate::citation`] for what a citation is). [`CitationLedger::reconcile`] appends every
//! citation the summary does not keep, deduplicated, in the ledger's order, so that after it
//! the summary keeps every citation of the ledger. [`WithCitationLedger`] applies it to any
//! [`Summarizer`]; both adapters of this crate are wrapped in it by the factory.

use std::collections::HashSet;

use async_trait::async_trait;
use compaction_core::{AdapterError, ModelInfo, Summarizer, Summary, SummaryRequest};

use crate::citation::{self, Citation, CitationKind};
use crate::error::SummarizerError;

/// The heading of the section the ledger appends.
pub const CARRIED_FORWARD_HEADING: &str = "## Sources carried forward";

/// The citations a summary must keep, in a stable order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CitationLedger {
    entries: Vec<Citation>,
    seen: HashSet<String>,
}

impl CitationLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ledger of a consolidation: the previous summary, then every turn's user query,
    /// tool outputs and answer.
    pub fn from_request(request: &SummaryRequest) -> Self {
        let mut ledger = Self::new();
        if let Some(previous) = &request.previous_summary {
            ledger.add_text(previous);
        }
        for turn in &request.turns {
            ledger.add_text(&turn.user);
            for output in &turn.tool_outputs {
                ledger.add_text(output);
            }
            ledger.add_text(&turn.assistant);
        }
        ledger
    }

    /// Adds the citations of one text (one message; sources sections do not span texts).
    pub fn add_text(&mut self, text: &str) {
        citation::extract_into(text, &mut self.entries, &mut self.seen);
    }

    /// Every citation, in order of first appearance.
    pub fn entries(&self) -> &[Citation] {
        &self.entries
    }

    /// True when there is no citation.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The citations `summary` does not keep, in ledger order. A DOI, arXiv id or author-year
    /// reference that a missing source line contains or [mentions](Citation::mentioned_by) is
    /// left out (restoring the line restores it); an author-year reference that a source line
    /// of the summary mentions is kept; a source line that cites DOIs, arXiv ids or
    /// author-year references counts as kept when the summary keeps every one of them.
    pub fn missing_from(&self, summary: &str) -> Vec<&Citation> {
        let in_summary = citation::extract(summary);
        let kept: HashSet<&str> = in_summary.iter().map(|c| c.key.as_str()).collect();
        let kept_lines: Vec<&str> = in_summary
            .iter()
            .filter(|c| c.kind == CitationKind::SourceLine)
            .map(|c| c.text.as_str())
            .collect();
        without_contained(
            self.entries
                .iter()
                .filter(|c| !kept.contains(c.key.as_str()))
                .filter(|c| !identifiers_kept(c, &kept, &kept_lines))
                .filter(|c| !kept_lines.iter().any(|line| c.mentioned_by(line)))
                .collect(),
        )
    }

    /// `summary` with a `## Sources carried forward` section listing every citation it does
    /// not keep; `summary` (trimmed) unchanged when it keeps them all.
    pub fn reconcile(&self, summary: &str) -> String {
        let summary = summary.trim();
        let missing = self.missing_from(summary);
        if missing.is_empty() {
            return summary.to_owned();
        }
        format!(
            "{summary}\n\n{}",
            render_section(CARRIED_FORWARD_HEADING, &missing)
        )
    }

    /// Every citation as a sources section under `heading` (e.g. `## Cited Sources`), in
    /// ledger order, leaving out identifiers a listed source line contains. Empty when the
    /// ledger is.
    pub fn render_all(&self, heading: &str) -> String {
        let listed = without_contained(self.entries.iter().collect());
        if listed.is_empty() {
            return String::new();
        }
        render_section(heading, &listed)
    }
}

fn render_section(heading: &str, citations: &[&Citation]) -> String {
    let mut out = String::from(heading);
    for c in citations {
        out.push_str("\n- ");
        out.push_str(&c.text);
    }
    out
}

/// Drops the DOIs, arXiv ids and author-year references that one of the listed source lines
/// already contains.
fn without_contained(citations: Vec<&Citation>) -> Vec<&Citation> {
    let lines: Vec<&str> = citations
        .iter()
        .filter(|c| c.kind == CitationKind::SourceLine)
        .map(|c| c.text.as_str())
        .collect();
    let inside_lines: HashSet<String> = lines.iter().flat_map(|l| citation::keys(l)).collect();
    citations
        .into_iter()
        .filter(|c| {
            c.kind == CitationKind::SourceLine
                || !(inside_lines.contains(&c.key) || lines.iter().any(|l| c.mentioned_by(l)))
        })
        .collect()
}

/// A source line is kept when it cites at least one DOI, arXiv id or author-year reference
/// and the summary keeps every one of them (an author-year reference also when a kept source
/// line names it): a compacted bibliography entry (`Haddad & Rivas 2021 — Title — doi:…`)
/// keeps the entry it was made from.
fn identifiers_kept(c: &Citation, kept: &HashSet<&str>, kept_lines: &[&str]) -> bool {
    if c.kind != CitationKind::SourceLine {
        return false;
    }
    let inside = citation::extract(&c.text);
    !inside.is_empty()
        && inside.iter().all(|i| {
            kept.contains(i.key.as_str()) || kept_lines.iter().any(|line| i.mentioned_by(line))
        })
}

/// Wraps a summarizer so that its summaries keep every citation of the request: whatever
/// the inner summary leaves out is appended under [`CARRIED_FORWARD_HEADING`].
#[derive(Debug, Clone)]
pub struct WithCitationLedger<S> {
    inner: S,
}

impl<S> WithCitationLedger<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        WithCitationLedger { inner }
    }

    /// The wrapped summarizer.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

#[async_trait]
impl<S: Summarizer> Summarizer for WithCitationLedger<S> {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        let mut summary = self.inner.summarize(request).await?;
        // A summary that is only carried-forward sources is no summary: nothing is written.
        if summary.text.trim().is_empty() {
            return Err(SummarizerError::EmptySummary {
                source_name: self.inner.info().model,
            }
            .into_adapter_error());
        }
        let ledger = CitationLedger::from_request(request);
        let missing = ledger.missing_from(&summary.text).len();
        if missing > 0 {
            tracing::info!(
                missing,
                total = ledger.entries().len(),
                "citation ledger carried forward citations the summary left out"
            );
        }
        summary.text = ledger.reconcile(&summary.text);
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_appends_only_what_is_missing_and_is_idempotent() {
        let mut ledger = CitationLedger::new();
        ledger.add_text(
            "See Smith et al. (2021) and doi:10.1000/abc.\n# Cited Sources\n- Smith, J. et al. (2021). Anodes. 10.1000/abc\n- Lee, K. (2020). Cathodes.",
        );
        let summary = "## Summary\nAnodes swell (Smith et al., 2021).\n## Cited Sources\n- Lee, K. (2020). Cathodes.";
        let once = ledger.reconcile(summary);
        assert_eq!(
            once,
            format!(
                "{summary}\n\n{CARRIED_FORWARD_HEADING}\n- Smith, J. et al. (2021). Anodes. 10.1000/abc"
            )
        );
        assert_eq!(ledger.reconcile(&once), once);
    }
}
