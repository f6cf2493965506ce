//! The offline summarizer: the embedded default when no API key is configured, built around
//! **findings**.
//!
//! Deterministic and network-free. Each new turn becomes a **topic**: the user's question as
//! a `### Q:` heading that names the session's turn it came from (`### Q: … (turn 7)`, when
//! the request carries turn numbers: what `compaction recall --turns 7..7` expands), then
//! - the user's **constraints** (`- Constraint: exclude pre-2015 studies …`), the
//!   **decisions** of the turn (`- Decision: …`) and the answer's **corrections**
//!   (`- Correction: …`): pinned, never dropped;
//! - the answer's first sentence, when it states no fact (prose, dropped first);
//! - every **finding** (a sentence or a Markdown table row that states a number, a citation or
//!   an identifier, see [`crate::findings`]) of the answer (`- `) and of the tool syntheses
//!   (`* `, evidence), each once.
//!
//! **Corrections honoured:** when a new turn corrects an earlier figure, every earlier line
//! (of the previous summary or of the slice) that states a retracted figure is kept but marked
//! `- Superseded by a later correction: …` (a heading gets `(figures corrected later)`), so
//! the old claim is never stated as valid; the correction itself is pinned, and the correcting
//! turn's synthesis sentences that state a retracted figure read `- About a corrected figure:
//! …` (its table rows and its answer are the corrected record and stay as they are).
//!
//! Rolling consolidation parses the previous summary back into its topics (a summary written by
//! another summarizer becomes one `### Earlier summary` topic) and puts the new topics after
//! them.
//!
//! **The budget** (`summarizer_summary_max_tokens`, characters / 4): over it, lines go in this
//! order, oldest topic first: prose; findings whose every fact another kept line states
//! (evidence first); superseded lines; evidence without a citation; the answer's findings
//! without a citation; cited findings — each topic keeping its headline (its answer's first
//! finding) — then the headlines, and the headings of topics left empty (the newest topic
//! stays). A kept line is never cut, so a kept finding keeps its numbers and sources; a note
//! says how many lines were left out.
//!
//! **The bibliography** ([`crate::bibliography`]): the sources the kept lines cite, one
//! compact line each (`Haddad & Rivas 2021 — Title — doi:…`), and every other citation in one
//! `Also cited` line. No citation of the ledger is ever lost.

use std::collections::{BTreeSet, HashMap, HashSet};

use async_trait::async_trait;
use compaction_core::{
    AdapterError, CharsPerToken, ModelInfo, Summarizer, Summary, SummaryRequest, TokenEstimator,
    TurnDigest,
};

use crate::bibliography;
use crate::citation;
use crate::findings::{self, facts};
use crate::ledger::CitationLedger;
use crate::text::{collapse, cut, sentences};

/// The summary's first line.
pub const TITLE: &str = "## Comprehensive Conversation Summary";
/// The heading of the sources section.
pub const SOURCES_HEADING: &str = "## Cited Sources";
/// The model name reported.
pub const MODEL_NAME: &str = "offline-extractive";
/// The smallest budget, in tokens.
pub const MIN_BUDGET_TOKENS: usize = 200;

const TOPIC_PREFIX: &str = "### ";
const QUESTION_PREFIX: &str = "### Q: ";
const FOREIGN_HEADING: &str = "### Earlier summary";
const CORRECTED_MARK: &str = "(figures corrected later) ";
const LINE: &str = "- ";
/// A line of a tool synthesis (evidence) rather than of the answer: also a Markdown bullet.
const EVIDENCE: &str = "* ";
const CONSTRAINT: &str = "- Constraint: ";
const DECISION: &str = "- Decision: ";
const CORRECTION: &str = "- Correction: ";
const SUPERSEDED: &str = "- Superseded by a later correction: ";
const REFERS: &str = "- About a corrected figure: ";
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
    /// An earlier claim a later turn corrected.
    Superseded,
    /// A tool synthesis's line that states numbers or identifiers, no citation.
    Evidence,
    /// An answer's line that states numbers or identifiers, no citation.
    Figure,
    /// States a citation.
    Cited,
    /// A constraint, decision or correction: never dropped.
    Pinned,
}

#[derive(Debug, Clone, PartialEq)]
struct Line {
    rank: Rank,
    text: String,
    facts: BTreeSet<String>,
}

impl Line {
    fn new(rank: Rank, text: String) -> Line {
        let facts = facts(&text);
        Line { rank, text, facts }
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
        Line::new(rank, text)
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
        for line in &self.lines {
            out.push('\n');
            out.push_str(&line.text);
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
    /// least [`MIN_BUDGET_TOKENS`]) whenever the bibliography leaves room for it.
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
        let mut topics = request
            .previous_summary
            .as_deref()
            .map(parse_previous)
            .unwrap_or_default();
        for (i, turn) in request.turns.iter().enumerate() {
            let (mut topic, retracted) = topic_of(turn);
            if let Some(first) = request.first_turn {
                topic.heading.push_str(&format!(" (turn {})", first + i));
            }
            if !retracted.is_empty() {
                mark_superseded(&mut topics, &retracted);
            }
            topics.push(topic);
        }
        dedupe(&mut topics);
        let ledger = CitationLedger::from_request(request);
        let budget_chars = self.budget_tokens * 4;
        // The bibliography with every line kept; lines dropped from the prose can move
        // citations into its `Also cited` line, so the prose target shrinks by any overshoot.
        let bibliography_chars =
            bibliography::render(SOURCES_HEADING, ledger.entries(), &render_topics(&topics))
                .chars()
                .count();
        let mut prose_budget = budget_chars.saturating_sub(bibliography_chars + 2);
        let mut dropped = 0;
        let mut text;
        loop {
            let now = condense(
                &mut topics,
                prose_budget.saturating_sub(NOTE_RESERVE),
                prose_budget,
            );
            dropped += now;
            let mut prose = render_topics(&topics);
            if dropped > 0 {
                prose.push_str(&format!(
                    "\n\n{NOTE_PREFIX} summarizer_summary_max_tokens = {}: {dropped} lines left \
                     out (prose and restated figures first); every source is still listed._",
                    self.budget_tokens
                ));
            }
            let sources = bibliography::render(SOURCES_HEADING, ledger.entries(), &prose);
            text = if sources.is_empty() {
                prose
            } else {
                format!("{prose}\n\n{sources}")
            };
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
        text
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

/// Drops lines until the prose fits `target` characters (when it is over `limit`): see the
/// module docs for the order. Returns how many lines went.
fn condense(topics: &mut Vec<Topic>, target: usize, limit: usize) -> usize {
    let mut total = TITLE.chars().count() + topics.iter().map(Topic::chars).sum::<usize>();
    if total <= limit {
        return 0;
    }
    let mut dropped = 0;
    let mut count: HashMap<String, usize> = HashMap::new();
    for line in topics.iter().flat_map(|t| &t.lines) {
        for f in &line.facts {
            *count.entry(f.clone()).or_default() += 1;
        }
    }
    let restated = |line: &Line, count: &HashMap<String, usize>| {
        !line.facts.is_empty()
            && line
                .facts
                .iter()
                .all(|f| count.get(f).copied().unwrap_or(0) > 1)
    };
    // (rank, only restated lines)
    let passes = [
        (Rank::Prose, false),
        (Rank::Evidence, true),
        (Rank::Figure, true),
        (Rank::Cited, true),
        (Rank::Superseded, false),
        (Rank::Evidence, false),
        (Rank::Figure, false),
        (Rank::Cited, false),
    ];
    // First every topic keeps its headline (its first finding), so that an old topic shrinks
    // to its question and one finding before any topic loses its last one; then headlines go,
    // oldest topic first.
    let last_resort = [
        (Rank::Evidence, false),
        (Rank::Figure, false),
        (Rank::Cited, false),
    ];
    let passes = passes
        .iter()
        .map(|&(rank, restated)| (rank, restated, true))
        .chain(
            last_resort
                .iter()
                .map(|&(rank, restated)| (rank, restated, false)),
        );
    for (rank, only_restated, keep_headline) in passes {
        for topic in topics.iter_mut() {
            let mut i = 0;
            while total > target && i < topic.lines.len() {
                let headline = keep_headline.then(|| topic.headline()).flatten();
                let line = &topic.lines[i];
                if line.rank == rank
                    && Some(i) != headline
                    && (!only_restated || restated(line, &count))
                {
                    for f in &line.facts {
                        if let Some(c) = count.get_mut(f) {
                            *c -= 1;
                        }
                    }
                    total -= line.text.chars().count() + 1;
                    topic.lines.remove(i);
                    dropped += 1;
                } else {
                    i += 1;
                }
            }
        }
    }
    // Then the headings of topics left empty, oldest first (the newest topic stays).
    let mut i = 0;
    while total > target && i + 1 < topics.len() {
        if topics[i].lines.is_empty() {
            total -= topics.remove(i).chars();
            dropped += 1;
        } else {
            i += 1;
        }
    }
    dropped
}

/// Removes repeated lines (same text up to case), keeping the first.
fn dedupe(topics: &mut [Topic]) {
    let mut seen: HashSet<String> = HashSet::new();
    for topic in topics {
        topic
            .lines
            .retain(|l| seen.insert(collapse(&l.text).to_lowercase()));
    }
}

/// A topic heading without its turn pointer (` (turn 7)`): the pointer states no figure.
fn without_pointer(heading: &str) -> &str {
    match heading.rsplit_once(" (turn ") {
        Some((rest, tail))
            if tail.ends_with(')')
                && tail[..tail.len() - 1].chars().all(|c| c.is_ascii_digit()) =>
        {
            rest
        }
        _ => heading,
    }
}

/// Marks every line of `topics` that states a retracted figure as superseded.
fn mark_superseded(topics: &mut [Topic], retracted: &BTreeSet<String>) {
    let states = |text: &str| retracted.iter().any(|f| findings::states_figure(text, f));
    for topic in topics {
        if states(without_pointer(&topic.heading)) && !topic.heading.contains(CORRECTED_MARK) {
            if let Some(rest) = topic.heading.strip_prefix(QUESTION_PREFIX) {
                topic.heading = format!("{QUESTION_PREFIX}{CORRECTED_MARK}{rest}");
            } else if let Some(rest) = topic.heading.strip_prefix(TOPIC_PREFIX) {
                topic.heading = format!("{TOPIC_PREFIX}{CORRECTED_MARK}{rest}");
            }
        }
        for line in &mut topic.lines {
            let markable = matches!(
                line.rank,
                Rank::Evidence | Rank::Figure | Rank::Cited | Rank::Prose
            );
            if markable && states(&line.text) {
                let body = line
                    .text
                    .strip_prefix(LINE)
                    .or_else(|| line.text.strip_prefix(EVIDENCE))
                    .unwrap_or(&line.text);
                line.text = format!("{SUPERSEDED}{body}");
                line.rank = Rank::Superseded;
            }
        }
    }
}

/// One turn as a topic, and the figures it retracts (empty unless it corrects).
fn topic_of(turn: &TurnDigest) -> (Topic, BTreeSet<String>) {
    let question = cut(&collapse(&plain_question(&turn.user)), MAX_QUESTION_CHARS);
    let mut lines = Vec::new();
    let user = sentences(&turn.user);
    for s in &user {
        if findings::is_constraint(s) {
            lines.push(Line::new(Rank::Pinned, format!("{CONSTRAINT}{s}")));
        } else if findings::is_decision(s) {
            lines.push(Line::new(Rank::Pinned, format!("{DECISION}{s}")));
        }
    }
    let answer = sentences(&turn.assistant);
    let cues = findings::correction_cues(&answer);
    let retracted = if cues.is_empty() {
        BTreeSet::new()
    } else {
        let mut texts = cues.clone();
        texts.extend(user.iter().filter(|s| s.ends_with('?')).cloned());
        findings::retracted_figures(&texts)
    };
    for (i, s) in answer.iter().enumerate() {
        if cues.contains(s) {
            lines.push(Line::new(Rank::Pinned, format!("{CORRECTION}{s}")));
        } else if findings::is_decision(s) {
            lines.push(Line::new(Rank::Pinned, format!("{DECISION}{s}")));
        } else if findings::is_finding(s) {
            lines.push(Line::finding(format!("{LINE}{s}")));
        } else if i == 0 {
            lines.push(Line::new(
                Rank::Prose,
                format!("{LINE}{}", cut(s, MAX_PROSE_CHARS)),
            ));
        }
    }
    let tables = std::iter::once((LINE, turn.assistant.as_str()))
        .chain(turn.tool_outputs.iter().map(|t| (EVIDENCE, t.as_str())));
    for (prefix, text) in tables {
        for row in findings::table_rows(text) {
            if findings::is_finding(&row) {
                lines.push(Line::finding(format!("{prefix}{row}")));
            }
        }
    }
    for output in &turn.tool_outputs {
        for s in sentences(output) {
            if findings::is_decision(&s) {
                lines.push(Line::new(Rank::Pinned, format!("{DECISION}{s}")));
            } else if findings::is_finding(&s) {
                // In a correction turn, the synthesis's sentences about a retracted figure
                // (how it was reported, why it cannot hold) say so.
                let about_retracted = retracted.iter().any(|f| findings::states_figure(&s, f));
                let prefix = if about_retracted { REFERS } else { EVIDENCE };
                lines.push(Line::finding(format!("{prefix}{s}")));
            }
        }
    }
    (
        Topic {
            heading: format!("{QUESTION_PREFIX}{question}"),
            lines,
        },
        retracted,
    )
}

/// The user's query on one line, without Markdown heading marks.
fn plain_question(user: &str) -> String {
    let text = user.trim();
    if text.is_empty() {
        "(no question text)".to_owned()
    } else {
        text.lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The previous summary's topics. Sources sections, the title and the condensation note are
/// left out (the ledger lists the sources again); prose before the first `### ` heading, or a
/// whole summary from another summarizer, becomes an `### Earlier summary` topic.
fn parse_previous(previous: &str) -> Vec<Topic> {
    let mut topics: Vec<Topic> = Vec::new();
    let mut foreign: Vec<Line> = Vec::new();
    for line in citation::prose_lines(previous) {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed == TITLE || trimmed.starts_with(NOTE_PREFIX) {
            continue;
        }
        if trimmed.starts_with(TOPIC_PREFIX) && trimmed != FOREIGN_HEADING {
            topics.push(Topic {
                heading: trimmed.to_owned(),
                lines: Vec::new(),
            });
            continue;
        }
        if trimmed == FOREIGN_HEADING {
            continue;
        }
        let entry = if [CONSTRAINT, DECISION, CORRECTION]
            .iter()
            .any(|p| trimmed.starts_with(p))
        {
            Line::new(Rank::Pinned, trimmed.to_owned())
        } else if trimmed.starts_with(SUPERSEDED) {
            Line::new(Rank::Superseded, trimmed.to_owned())
        } else if trimmed.starts_with('#') {
            // Another summarizer's heading becomes bold text inside the earlier-summary topic.
            Line::new(
                Rank::Prose,
                format!("**{}**", trimmed.trim_start_matches('#').trim()),
            )
        } else {
            Line::finding(trimmed.to_owned())
        };
        match topics.last_mut() {
            Some(topic) => topic.lines.push(entry),
            None => foreign.push(entry),
        }
    }
    if !foreign.is_empty() {
        topics.insert(
            0,
            Topic {
                heading: FOREIGN_HEADING.to_owned(),
                lines: foreign,
            },
        );
    }
    topics
}

/// The summary's estimated tokens (the core's estimator).
pub fn tokens(text: &str) -> usize {
    CharsPerToken.estimate(text)
}

#[async_trait]
impl Summarizer for OfflineSummarizer {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("offline", "local", MODEL_NAME)
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, AdapterError> {
        Ok(Summary::new(self.consolidate(request)).with_served_model(MODEL_NAME))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let unnumbered = OfflineSummarizer::new(4_000).consolidate(&request(None, vec![claim()]));
        assert!(!unnumbered.contains("(turn "), "{unnumbered}");
        assert_eq!(without_pointer("### Q: x? (turn 12)"), "### Q: x?");
        assert_eq!(
            without_pointer("### Q: x (turn of phrase)"),
            "### Q: x (turn of phrase)"
        );
    }

    fn claim() -> TurnDigest {
        turn(
            "Is there a meta-analysis of foraging effects?",
            "Their pooled effect is g = −0.84 (95% CI −1.07 to −0.61), a large effect.",
            "## Meta-analysis\n- Pooled effect: g = −0.84, a large effect.\n- Field studies (k = 10): g = −0.12.",
        )
    }

    fn correction() -> TurnDigest {
        turn(
            "Hold on. −0.84 as the pooled effect?",
            "You were right — **correction**: the pooled estimate is g = −0.42, not −0.84. \
             The −0.84 is the laboratory subgroup.\n\n| Subset | k | g |\n|---|---|---|\n| Laboratory | 21 | −0.84 |\n| Pooled | 47 | −0.42 |",
            "",
        )
    }

    /// Every earlier line stating the retracted figure is marked, in the same slice and across
    /// folds (the previous summary's evidence lines included); the correction is pinned and
    /// its own table keeps −0.84 as the laboratory figure.
    #[test]
    fn a_correction_marks_every_earlier_statement_of_the_retracted_figure() {
        let offline = OfflineSummarizer::new(7000);
        let same_slice = offline.consolidate(&request(None, vec![claim(), correction()]));
        let first = offline.consolidate(&request(None, vec![claim()]));
        assert!(first.contains("* Pooled effect: g = −0.84"), "{first}");
        let rolled = offline.consolidate(&request(Some(&first), vec![correction()]));
        for text in [&same_slice, &rolled] {
            let (earlier, later) = text
                .split_once("### Q: Hold on.")
                .expect("the correcting turn is a topic");
            for line in earlier.lines().filter(|l| l.contains("−0.84")) {
                assert!(line.starts_with(SUPERSEDED), "{line}\n{text}");
            }
            // The unrelated field figure stays valid.
            assert!(
                earlier.contains("\n* Field studies (k = 10): g = −0.12."),
                "{text}"
            );
            assert!(later.contains(
                "- Correction: You were right — correction: the pooled estimate is g = −0.42, not −0.84."
            ));
            assert!(later.contains("- Laboratory — k: 21; g: −0.84"), "{text}");
        }
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
