//! The offline summarizer: the embedded default when no API key is configured, built around
//! **findings**.
//!
//! Deterministic and network-free. Each new turn becomes a **topic**: the user's question as
//! a `### Q:` heading that names the session's turn it came from (`### Q: … (turn 7)`, when
//! the request carries turn numbers: what `compaction recall --turns 7..7` expands), then
//! - the user's **constraints** (`- Constraint: exclude pre-2015 studies …`) and the
//!   **decisions** of the turn (`- Decision: …`): pinned, never dropped;
//! - the answer's first sentence, when it states no fact (prose, dropped first);
//! - every **finding** (a sentence or a Markdown table row that states a number, a citation or
//!   an identifier, see [`crate::findings`]) of the answer (`- `) and of the tool syntheses
//!   (`* `, evidence), each once: a line whose every fact a line kept before it states is a
//!   **duplicate** and goes (the answer's lines are kept before the syntheses'); a line that
//!   shares a fact with an earlier line of its topic is **merged** into it ([`merge`]): it
//!   becomes a part of that statement (`… · …`) carrying only its clauses that state something
//!   new, so the sentence, the table row and the synthesis line of one figure are one statement.
//!
//! **Corrections, claim by claim** ([`crate::supersede`]): when a new turn corrects an earlier
//! claim (a line of the previous summary, of an earlier turn of the slice, or an earlier
//! correction), the claim leaves the findings and the `## Corrections` section
//! ([`crate::corrections`]) states it once: what was said, what it was corrected to, which turn
//! corrected it. A claim the correction does not target stays as it was.
//!
//! Rolling consolidation parses the previous summary back into its topics (a summary written by
//! another summarizer becomes one `### Earlier summary` topic; a merged statement is cut back
//! into its parts, which corrections and the budget treat line by line) and puts the new topics
//! after them.
//!
//! **The budget** (`summarizer_summary_max_tokens`, characters / 4), the cheapest loss
//! first: prose lines; question headings cut short; the bibliography without titles; terse
//! finding lines ([`terse`]: the clauses that state no fact, or only facts a line before
//! states, leave; the subject, values, units, sources and qualifying clauses stay; a terse
//! line left without a fact of its own and without a qualifying clause goes, and once lines
//! went, so does a question heading with no line left under it, the newest aside). Only then
//! whole lines go, redundant before unique: findings whose every number, citation key and
//! identifier another kept line of their topic states (table rows first, then the topic's
//! last lines: a statement's later parts), then of the summary (newest topic first: a recap
//! before what it restates); findings whose every fact another kept line states (evidence
//! first, oldest topic first); then the unique ones — evidence without a citation, the
//! answer's findings without a citation, cited findings, the line with the most characters
//! per fact first — each topic keeping its headline (its answer's first finding); then the
//! headlines, oldest topic first, and the headings of topics left empty (the newest topic
//! stays). A kept finding keeps its numbers and sources; a note says how many
//! lines were left out. Corrections are pinned. What the citation ledger would carry forward
//! counts against the budget.
//!
//! **The receipt** ([`compaction_core::Receipt`]): how many findings the summary keeps, the
//! claims this fold corrected, and the findings it dropped (duplicate or budget).
//!
//! **The bibliography** ([`crate::bibliography`]): the sources the kept lines cite, one
//! compact line each (`Haddad & Rivas 2021 — Title — doi:…`), and every other citation in one
//! `Also cited` line. No citation of the ledger is ever lost.

use std::collections::BTreeSet;

use async_trait::async_trait;
use compaction_core::{
    AdapterError, DropReason, DroppedFinding, ModelInfo, Receipt, Summarizer, Summary,
    SummaryRequest,
};

mod budget;
mod correct;
mod merge;
mod read;
mod terse;

use budget::{condense, dedupe, drop_empty_headings, row_form};
use correct::apply_corrections;
use read::{parse_previous, topic_of};

use crate::bibliography;
use crate::corrections::{self, Entry};
use crate::findings::{self, facts};
use crate::ledger::CitationLedger;

/// The summary's first line.
pub(crate) const TITLE: &str = "## Comprehensive Conversation Summary";
/// The heading of the sources section.
pub(crate) const SOURCES_HEADING: &str = "## Cited Sources";
/// The model name reported.
pub(crate) const MODEL_NAME: &str = "offline-extractive";
/// The smallest budget, in tokens.
pub(crate) const MIN_BUDGET_TOKENS: usize = 200;

const TOPIC_PREFIX: &str = "### ";
const QUESTION_PREFIX: &str = "### Q: ";
const FOREIGN_HEADING: &str = "### Earlier summary";
const LINE: &str = "- ";
/// A line of a tool synthesis (evidence) rather than of the answer: also a Markdown bullet.
const EVIDENCE: &str = "* ";
const CONSTRAINT: &str = "- Constraint: ";
const DECISION: &str = "- Decision: ";
/// A pinned correction line of a summary written before claim-level corrections.
const OLD_CORRECTION: &str = "- Correction: ";
/// A superseded line of a summary written before claim-level corrections: not carried.
const OLD_SUPERSEDED: &str = "- Superseded by a later correction: ";
const NOTE_PREFIX: &str = "_Condensed to stay within";
/// Longest question heading, in characters.
const MAX_QUESTION_CHARS: usize = 160;
/// Longest prose line, in characters (findings are never cut).
const MAX_PROSE_CHARS: usize = 240;
/// Room kept for the condensation note when the budget bites, in characters.
const NOTE_RESERVE: usize = 200;

/// How a line fares when the budget bites: the first variant goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    /// States no fact.
    Prose,
    /// A tool synthesis's line that states numbers or identifiers, no citation.
    Evidence,
    /// An answer's line that states numbers or identifiers, no citation.
    Figure,
    /// States a citation.
    Cited,
    /// A constraint or decision: never dropped.
    Pinned,
}

#[derive(Debug, Clone, PartialEq)]
struct Line {
    rank: Rank,
    text: String,
    facts: BTreeSet<String>,
    /// The merged statement ([`merge`]) this line is a part of: rendered on one line with the
    /// statement's other parts next to it.
    part_of: Option<usize>,
    /// A Markdown table row as [`findings::table_rows`] writes it (`Label — Column: value; …`):
    /// when the budget bites, a row restating its topic's values goes before a sentence.
    row: bool,
}

impl Line {
    fn new(rank: Rank, text: String) -> Line {
        let facts = facts(&text);
        Line {
            rank,
            text,
            facts,
            part_of: None,
            row: false,
        }
    }

    /// A finding read from a Markdown table row.
    fn row(text: String) -> Line {
        Line {
            row: true,
            ..Line::finding(text)
        }
    }

    /// A finding's rank from its content and its origin (a line of a tool synthesis starts
    /// with [`EVIDENCE`]).
    fn finding(text: String) -> Line {
        let rank = if findings::is_cited(&text) {
            Rank::Cited
        } else if findings::is_finding(&text) && text.starts_with(EVIDENCE) {
            Rank::Evidence
        } else if findings::is_finding(&text) {
            Rank::Figure
        } else {
            Rank::Prose
        };
        Line {
            row: row_form(&text),
            ..Line::new(rank, text)
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Topic {
    heading: String,
    lines: Vec<Line>,
}

impl Topic {
    fn chars(&self) -> usize {
        self.heading.chars().count()
            + 2
            + self
                .lines
                .iter()
                .map(|l| l.text.chars().count() + 1)
                .sum::<usize>()
    }

    /// The line kept longest: the first finding of the answer, else the first finding.
    fn headline(&self) -> Option<usize> {
        self.lines
            .iter()
            .position(|l| {
                matches!(l.rank, Rank::Figure | Rank::Cited) && !l.text.starts_with(EVIDENCE)
            })
            .or_else(|| {
                self.lines
                    .iter()
                    .position(|l| matches!(l.rank, Rank::Evidence | Rank::Figure | Rank::Cited))
            })
    }

    fn render(&self, out: &mut String) {
        out.push_str(&self.heading);
        let mut previous = None;
        for line in &self.lines {
            let (separator, text) = merge::rendered(previous, line);
            // A statement's part follows the one before it in the same sentence.
            if separator == merge::PART && out.ends_with('.') {
                out.pop();
            }
            out.push_str(separator);
            out.push_str(text);
            previous = Some(line);
        }
    }
}

/// The deterministic, network-free summarizer.
#[derive(Debug, Clone)]
pub struct OfflineSummarizer {
    budget_tokens: usize,
}

impl OfflineSummarizer {
    /// A summarizer whose summaries stay within `budget_tokens` tokens (characters / 4; at
    /// least 200) whenever the bibliography leaves room for it.
    pub fn new(budget_tokens: usize) -> Self {
        OfflineSummarizer {
            budget_tokens: budget_tokens.max(MIN_BUDGET_TOKENS),
        }
    }

    /// The budget, in tokens.
    pub fn budget_tokens(&self) -> usize {
        self.budget_tokens
    }

    /// The consolidated summary of `request`, with its `## Cited Sources` section.
    pub fn consolidate(&self, request: &SummaryRequest) -> String {
        self.consolidate_with_receipt(request).0
    }

    /// The consolidated summary of `request` and its receipt.
    pub fn consolidate_with_receipt(&self, request: &SummaryRequest) -> (String, Receipt) {
        let (mut topics, mut entries) = request
            .previous_summary
            .as_deref()
            .map(parse_previous)
            .unwrap_or_default();
        // Corrections target the claims a merged statement joined, one by one.
        merge::split(&mut topics);
        let mut corrected = Vec::new();
        let mut dropped: Vec<DroppedFinding> = Vec::new();
        for (i, turn) in request.turns.iter().enumerate() {
            let number = request.first_turn.map(|first| first + i);
            let (mut topic, new_turn) = topic_of(turn);
            if let Some(n) = number {
                topic.heading.push_str(&format!(" (turn {n})"));
            }
            corrected.extend(apply_corrections(
                &mut topics,
                &mut entries,
                &mut topic,
                &new_turn,
                number,
                &mut dropped,
            ));
            topics.push(topic);
        }
        dropped.extend(
            dedupe(&mut topics)
                .into_iter()
                .map(|finding| DroppedFinding {
                    finding,
                    reason: DropReason::Duplicate,
                }),
        );
        merge::merge(&mut topics);
        let ledger = CitationLedger::from_request(request);
        let (text, budget_dropped) = self.fit(&mut topics, &entries, &ledger);
        dropped.extend(budget_dropped.into_iter().map(|finding| DroppedFinding {
            finding,
            reason: DropReason::Budget,
        }));
        let kept = topics.iter().map(merge::statements).sum();
        let receipt = Receipt {
            kept,
            corrected,
            dropped,
        };
        (text, receipt)
    }

    /// Fits the summary to the budget, the cheapest loss first: prose lines, then shorter
    /// question headings, the bibliography without titles and terse finding lines
    /// ([`terse`]), and only then whole findings ([`condense`]). Returns the summary and the
    /// findings dropped.
    fn fit(
        &self,
        topics: &mut Vec<Topic>,
        entries: &[Entry],
        ledger: &CitationLedger,
    ) -> (String, Vec<String>) {
        let budget_chars = self.budget_tokens * 4;
        let section = corrections::render(entries);
        let section_chars = if section.is_empty() {
            0
        } else {
            section.chars().count() + 2
        };
        let mut dropped = Vec::new();
        let titles = cheap_losses(topics, ledger, section_chars, budget_chars, &mut dropped);
        // The bibliography with every line kept; lines dropped from the prose can move
        // citations into its `Also cited` line, so the prose target shrinks by any overshoot.
        let bibliography_chars = bibliography::render(
            SOURCES_HEADING,
            ledger.entries(),
            &render_topics(topics),
            titles,
        )
        .chars()
        .count();
        let mut prose_budget = budget_chars.saturating_sub(bibliography_chars + section_chars + 2);
        let mut text;
        loop {
            let now = condense(
                topics,
                prose_budget.saturating_sub(NOTE_RESERVE),
                prose_budget,
                &mut dropped,
            );
            if !dropped.is_empty() {
                drop_empty_headings(topics);
            }
            let mut prose = render_topics(topics);
            if !section.is_empty() {
                prose.push_str("\n\n");
                prose.push_str(&section);
            }
            if !dropped.is_empty() {
                prose.push_str(&format!(
                    "\n\n{NOTE_PREFIX} summarizer_summary_max_tokens = {}: {} lines left \
                     out, every source kept._",
                    self.budget_tokens,
                    dropped.len()
                ));
            }
            let sources = bibliography::render(SOURCES_HEADING, ledger.entries(), &prose, titles);
            text = if sources.is_empty() {
                prose
            } else {
                format!("{prose}\n\n{sources}")
            };
            // What the citation ledger would carry forward counts against the budget too.
            text = ledger.reconcile(&text);
            let overshoot = text.chars().count().saturating_sub(budget_chars);
            // Over the budget: shrink the prose target by the overshoot while lines still go.
            if overshoot == 0 || (now == 0 && prose_budget == 0) {
                break;
            }
            let next = prose_budget.saturating_sub(overshoot.max(NOTE_RESERVE));
            if now == 0 && next == prose_budget {
                break;
            }
            prose_budget = next;
        }
        let findings = dropped
            .into_iter()
            .filter(|l: &Line| !l.facts.is_empty())
            .map(|l| l.text)
            .collect();
        (text, findings)
    }
}

/// The cheapest losses, each only while the summary is still over `budget_chars`: prose
/// lines, shorter question headings, the bibliography without titles, terse finding lines.
/// Returns whether the bibliography keeps its titles.
fn cheap_losses(
    topics: &mut [Topic],
    ledger: &CitationLedger,
    section_chars: usize,
    budget_chars: usize,
    dropped: &mut Vec<Line>,
) -> bool {
    let whole = |topics: &[Topic], titles: bool| {
        let prose = render_topics(topics);
        let sources = bibliography::render(SOURCES_HEADING, ledger.entries(), &prose, titles);
        prose.chars().count() + section_chars + sources.chars().count() + 2 + NOTE_RESERVE
    };
    let mut titles = true;
    if whole(topics, titles) > budget_chars {
        drop_prose(topics, dropped);
    }
    if whole(topics, titles) > budget_chars {
        terse::shorten_headings(topics);
    }
    if whole(topics, titles) > budget_chars {
        titles = false;
    }
    if whole(topics, titles) > budget_chars {
        terse::shorten_findings(topics);
        terse::drop_factless(topics, dropped);
    }
    titles
}

/// Drops the lines that state no fact (prose), pinned lines aside.
fn drop_prose(topics: &mut [Topic], dropped: &mut Vec<Line>) {
    for topic in topics.iter_mut() {
        let (gone, kept): (Vec<Line>, Vec<Line>) = std::mem::take(&mut topic.lines)
            .into_iter()
            .partition(|l| l.rank == Rank::Prose);
        topic.lines = kept;
        dropped.extend(gone);
    }
}

fn render_topics(topics: &[Topic]) -> String {
    let mut out = String::from(TITLE);
    for topic in topics {
        out.push_str("\n\n");
        topic.render(&mut out);
    }
    out
}

#[async_trait]
impl Summarizer for OfflineSummarizer {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("offline", "local", MODEL_NAME)
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        let (text, receipt) = self.consolidate_with_receipt(request);
        Ok(Summary::new(text)
            .with_served_model(MODEL_NAME)
            .with_receipt(receipt))
    }
}

#[cfg(test)]
mod tests {
    use compaction_core::{CharsPerToken, TokenEstimator, TurnDigest};

    use super::*;
    use crate::text::sentences;

    fn tokens(text: &str) -> usize {
        CharsPerToken.estimate(text)
    }

    fn turn(user: &str, assistant: &str, synthesis: &str) -> TurnDigest {
        TurnDigest {
            invocation_id: user.into(),
            user: user.into(),
            assistant: assistant.into(),
            tool_outputs: if synthesis.is_empty() {
                Vec::new()
            } else {
                vec![synthesis.into()]
            },
        }
    }

    fn request(previous: Option<&str>, turns: Vec<TurnDigest>) -> SummaryRequest {
        SummaryRequest::new(
            String::new(),
            String::new(),
            previous.map(str::to_owned),
            String::new(),
            turns,
        )
    }

    #[test]
    fn each_topic_names_its_turn_and_keeps_it_when_rolled() {
        let first = request(
            None,
            vec![
                turn("What is plating?", "Plating starts at 4C (Lee 2021).", ""),
                turn("And SEI?", "SEI grows 3 nm per cycle (Kim 2020).", ""),
            ],
        )
        .with_first_turn(Some(6));
        let text = OfflineSummarizer::new(4_000).consolidate(&first);
        assert!(text.contains("### Q: What is plating? (turn 6)"), "{text}");
        assert!(text.contains("### Q: And SEI? (turn 7)"), "{text}");
        let next = request(Some(&text), vec![turn("Dendrites?", "Seen at 2C.", "")])
            .with_first_turn(Some(8));
        let rolled = OfflineSummarizer::new(4_000).consolidate(&next);
        for pointer in ["(turn 6)", "(turn 7)", "(turn 8)"] {
            assert!(rolled.contains(pointer), "{pointer}: {rolled}");
        }
        let unnumbered = OfflineSummarizer::new(4_000).consolidate(&request(
            None,
            vec![turn("Plating?", "Plating starts at 4.5 C (Lee 2021).", "")],
        ));
        assert!(!unnumbered.contains("(turn "), "{unnumbered}");
        assert_eq!(correct::without_pointer("### Q: x? (turn 12)"), "### Q: x?");
        assert_eq!(
            correct::without_pointer("### Q: x (turn of phrase)"),
            "### Q: x (turn of phrase)"
        );
    }

    #[test]
    fn a_question_contesting_a_corrected_value_no_longer_states_it() {
        let turns = vec![
            turn(
                "How dense are the hives?",
                "Hive density was 12.5 colonies per km² across the valley.",
                "",
            ),
            turn(
                "Hang on — 12.5 colonies per km² across the whole valley?",
                "Let me re-check the survey.",
                "",
            ),
            turn(
                "And?",
                "My mistake: 12.5 colonies per km² is the ridge density; the valley had 8.5 colonies per km².",
                "",
            ),
        ];
        let text = OfflineSummarizer::new(4_000).consolidate(&request(None, turns));
        assert!(
            text.contains("### Q: Hang on — [corrected] colonies per km²"),
            "{text}"
        );
        assert!(text.contains("## Corrections"), "{text}");
    }

    /// Under a tight budget, constraints and decisions stay and no kept line is cut.
    #[test]
    fn a_tight_budget_keeps_pinned_lines_and_whole_findings() {
        let mut turns = vec![turn(
            "Please exclude pre-2015 studies from the review.",
            "Decision: we will use a random-effects model. Understood.",
            "",
        )];
        for i in 0..30 {
            turns.push(turn(
                &format!("Question {i}?"),
                &format!(
                    "Site {i} recorded {i}1.5 mm of growth over {i}2 days (Smith et al., 2020)."
                ),
                &format!("Plot {i} held {i}3.5 kg of biomass. Plot {i} lost {i}4 % of cover."),
            ));
        }
        let text = OfflineSummarizer::new(600).consolidate(&request(None, turns.clone()));
        assert!(tokens(&text) <= 600, "{} tokens\n{text}", tokens(&text));
        assert!(text.contains("- Constraint: Please exclude pre-2015 studies from the review."));
        assert!(text.contains("- Decision: Decision: we will use a random-effects model."));
        assert!(text.contains("_Condensed to stay within summarizer_summary_max_tokens = 600"));
        // The note names the key and the count, nothing the summary's own lines say.
        let note = text
            .lines()
            .find(|l| l.starts_with(NOTE_PREFIX))
            .unwrap_or_default();
        assert!(
            note.ends_with("lines left out, every source kept._"),
            "{note}"
        );
        let sources: Vec<String> = turns
            .iter()
            .flat_map(|t| {
                sentences(&t.assistant)
                    .into_iter()
                    .chain(t.tool_outputs.iter().flat_map(|o| sentences(o)))
            })
            .collect();
        for line in text
            .lines()
            .filter(|l| l.starts_with(LINE) || l.starts_with(EVIDENCE))
        {
            let body = line
                .trim_start_matches(LINE)
                .trim_start_matches(EVIDENCE)
                .trim_start_matches("Constraint: ")
                .trim_start_matches("Decision: ");
            assert!(
                sources
                    .iter()
                    .any(|s| s.contains(body) || user_sentence(&turns, body)),
                "a kept line was cut: {line}"
            );
        }
    }

    fn user_sentence(turns: &[TurnDigest], body: &str) -> bool {
        turns.iter().any(|t| t.user.contains(body))
    }
}
