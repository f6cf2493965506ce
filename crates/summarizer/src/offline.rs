//! The offline extractive summarizer: the embedded default when no API key is configured.
//!
//! Deterministic and network-free. For each new turn it keeps a **topic**: the user's
//! question as a `### Q:` heading; from the answer, every sentence that states a number with
//! its unit and the three best other key sentences (results, comparisons, conclusions); and
//! each sentence of the tool syntheses that states a number with its unit the answer does
//! not (`- Evidence:`). Rolling consolidation parses the previous summary back into topics (a
//! summary written by another summarizer becomes one `### Earlier summary` topic) and puts
//! the new topics after them. Every citation of the previous summary and of the turns is
//! listed once under `## Cited Sources`, from the [`CitationLedger`].
//!
//! **The bound:** the prose (title, topics and the condensation note) never exceeds
//! `summarizer_offline_max_chars` characters. Over the bound it drops, oldest topic first,
//! evidence lines, then key sentences without numbers, then numeric answer sentences — each
//! topic keeping its headline, its first numeric answer sentence or else its first line —
//! then the headlines in the same order, then whole topics (never the newest), and finally
//! cuts the text; a note says how much was left out. The `## Cited Sources` section is never bounded: sources are the one thing a
//! summary may not lose.

use async_trait::async_trait;
use compaction_core::{AdapterError, ModelInfo, Summarizer, Summary, SummaryRequest, TurnDigest};

use crate::citation;
use crate::ledger::CitationLedger;
use std::collections::HashSet;

use crate::text::{collapse, cut, has_numeric_finding, numeric_findings, sentences};

/// The summary's first line.
pub const TITLE: &str = "## Comprehensive Conversation Summary";
/// The heading of the sources section.
pub const SOURCES_HEADING: &str = "## Cited Sources";
/// The model name reported.
pub const MODEL_NAME: &str = "offline-extractive";

const TOPIC_PREFIX: &str = "### ";
const QUESTION_PREFIX: &str = "### Q: ";
const FOREIGN_HEADING: &str = "### Earlier summary";
const LINE: &str = "- ";
const EVIDENCE: &str = "- Evidence: ";
const NOTE_PREFIX: &str = "_Condensed to stay within";
/// Key sentences kept per answer, besides the numeric ones.
const FINDINGS_PER_TURN: usize = 3;
/// Longest question heading, in characters.
const MAX_QUESTION_CHARS: usize = 240;
/// Longest finding or figure line, in characters.
const MAX_LINE_CHARS: usize = 400;
/// Room kept for the condensation note when the bound bites.
const NOTE_RESERVE: usize = 160;

/// Words that mark a sentence as a result or conclusion.
const SIGNAL_WORDS: [&str; 24] = [
    "found",
    "find",
    "finds",
    "show",
    "shows",
    "showed",
    "demonstrate",
    "indicate",
    "suggest",
    "conclude",
    "result",
    "achieve",
    "improve",
    "reduce",
    "increase",
    "decrease",
    "outperform",
    "compared",
    "higher",
    "lower",
    "because",
    "therefore",
    "limit",
    "whereas",
];

/// How a line fares when the bound bites: the first variant is dropped first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Priority {
    /// A numeric sentence of a tool synthesis.
    Evidence,
    /// A key sentence of the answer without a number.
    Finding,
    /// A sentence of the answer that states a number with its unit.
    Figure,
}

#[derive(Debug, Clone, PartialEq)]
struct Topic {
    heading: String,
    lines: Vec<(Priority, String)>,
}

impl Topic {
    fn chars(&self) -> usize {
        // Heading, its newline, each line with its newline, and the blank separator line.
        self.heading.chars().count()
            + 2
            + self
                .lines
                .iter()
                .map(|(_, l)| l.chars().count() + 1)
                .sum::<usize>()
    }

    /// The line kept longest when the bound bites: the first numeric answer sentence, or
    /// else the first line.
    fn headline(&self) -> Option<usize> {
        self.lines
            .iter()
            .position(|(p, _)| *p == Priority::Figure)
            .or(if self.lines.is_empty() { None } else { Some(0) })
    }

    fn render(&self, out: &mut String) {
        out.push_str(&self.heading);
        for (_, line) in &self.lines {
            out.push('\n');
            out.push_str(line);
        }
    }
}

/// The deterministic, network-free summarizer.
#[derive(Debug, Clone)]
pub struct OfflineSummarizer {
    max_chars: usize,
}

impl OfflineSummarizer {
    /// A summarizer whose prose stays within `max_chars` characters (at least 200).
    pub fn new(max_chars: usize) -> Self {
        OfflineSummarizer {
            max_chars: max_chars.max(200),
        }
    }

    /// The prose bound.
    pub fn max_chars(&self) -> usize {
        self.max_chars
    }

    /// The consolidated summary of `request`, with its `## Cited Sources` section.
    pub fn consolidate(&self, request: &SummaryRequest) -> String {
        let mut topics = request
            .previous_summary
            .as_deref()
            .map(parse_previous)
            .unwrap_or_default();
        topics.extend(request.turns.iter().map(topic_of));
        let prose = self.bounded_prose(topics);
        let sources = CitationLedger::from_request(request).render_all(SOURCES_HEADING);
        if sources.is_empty() {
            prose
        } else {
            format!("{prose}\n\n{sources}")
        }
    }

    /// Renders the topics within the bound, condensing oldest-first when needed.
    fn bounded_prose(&self, mut topics: Vec<Topic>) -> String {
        // An upper bound of the rendered length, kept current as lines are dropped.
        let mut total = TITLE.chars().count() + 2 + topics.iter().map(Topic::chars).sum::<usize>();
        let mut dropped_lines = 0usize;
        let mut dropped_topics = 0usize;
        if total > self.max_chars {
            let budget = self.max_chars.saturating_sub(NOTE_RESERVE);
            // First every topic keeps its headline (see `Topic::headline`), so that an old
            // topic shrinks to its question and one answer line before any topic loses its
            // last line; then the headlines go, oldest topic first.
            for keep_headline in [true, false] {
                for priority in [Priority::Evidence, Priority::Finding, Priority::Figure] {
                    let mut i = 0;
                    while total > budget && i < topics.len() {
                        let kept = topics[i].headline().filter(|_| keep_headline);
                        let last = topics[i]
                            .lines
                            .iter()
                            .enumerate()
                            .rev()
                            .find(|(pos, (p, _))| *p == priority && Some(*pos) != kept)
                            .map(|(pos, _)| pos);
                        match last {
                            Some(pos) => {
                                let (_, line) = topics[i].lines.remove(pos);
                                total -= line.chars().count() + 1;
                                dropped_lines += 1;
                            }
                            None => i += 1,
                        }
                    }
                }
            }
            while total > budget && topics.len() > 1 {
                total -= topics.remove(0).chars();
                dropped_topics += 1;
            }
        }
        let mut out = String::from(TITLE);
        for topic in &topics {
            out.push_str("\n\n");
            topic.render(&mut out);
        }
        if dropped_lines + dropped_topics > 0 {
            let budget = self.max_chars.saturating_sub(NOTE_RESERVE);
            let mut prose = cut(&out, budget);
            prose.push_str(&format!(
                "\n\n{NOTE_PREFIX} summarizer_offline_max_chars = {}: {dropped_lines} detail \
                 lines and {dropped_topics} earlier topics left out; every source is still \
                 listed._",
                self.max_chars
            ));
            cut(&prose, self.max_chars)
        } else {
            out
        }
    }
}

/// One turn as a topic: the question; from the answer, every sentence that states a number
/// with its unit and the best few other key sentences, in their order; then each sentence of
/// the tool syntheses that states a number the topic does not state yet.
fn topic_of(turn: &TurnDigest) -> Topic {
    let question = cut(&collapse(&plain_question(&turn.user)), MAX_QUESTION_CHARS);
    let answer = sentences(&turn.assistant);
    let mut scored: Vec<(i32, usize)> = answer
        .iter()
        .enumerate()
        .filter(|(_, s)| !has_numeric_finding(s))
        .map(|(i, s)| (score(s, i), i))
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let key: HashSet<usize> = scored
        .iter()
        .take(FINDINGS_PER_TURN)
        .map(|(_, i)| *i)
        .collect();
    let mut lines = Vec::new();
    let mut numbers: HashSet<String> = HashSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, sentence) in answer.iter().enumerate() {
        let found = numeric_findings(sentence);
        let priority = if !found.is_empty() {
            Priority::Figure
        } else if key.contains(&i) {
            Priority::Finding
        } else {
            continue;
        };
        if seen.insert(sentence.to_lowercase()) {
            numbers.extend(found);
            lines.push((priority, format!("{LINE}{}", cut(sentence, MAX_LINE_CHARS))));
        }
    }
    for sentence in turn.tool_outputs.iter().flat_map(|t| sentences(t)) {
        let found = numeric_findings(&sentence);
        let new = found.iter().any(|n| !numbers.contains(n));
        if new && seen.insert(sentence.to_lowercase()) {
            numbers.extend(found);
            lines.push((
                Priority::Evidence,
                format!("{EVIDENCE}{}", cut(&sentence, MAX_LINE_CHARS)),
            ));
        }
    }
    Topic {
        heading: format!("{QUESTION_PREFIX}{question}"),
        lines,
    }
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

/// How much a non-numeric answer sentence looks like a finding.
fn score(sentence: &str, position: usize) -> i32 {
    let lower = sentence.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    let mut score = 1;
    if words.iter().any(|w| SIGNAL_WORDS.contains(w)) {
        score += 3;
    }
    if !citation::extract(sentence).is_empty() {
        score += 1;
    }
    if position == 0 {
        score += 1;
    }
    if sentence.ends_with('?') || words.len() < 5 {
        score -= 2;
    }
    score
}

/// The previous summary's topics. Sources sections, the title and the condensation note are
/// left out (the ledger lists the sources again); prose before the first `### ` heading, or a
/// whole summary from another summarizer, becomes an `### Earlier summary` topic.
fn parse_previous(previous: &str) -> Vec<Topic> {
    let mut topics: Vec<Topic> = Vec::new();
    let mut foreign: Vec<(Priority, String)> = Vec::new();
    for line in citation::prose_lines(previous) {
        let line = line.trim_end();
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
        let entry = if trimmed.starts_with(EVIDENCE) {
            (Priority::Evidence, trimmed.to_owned())
        } else if has_numeric_finding(trimmed) {
            (Priority::Figure, trimmed.to_owned())
        } else if trimmed.starts_with('#') {
            // Another summarizer's heading becomes bold text inside the earlier-summary topic.
            (
                Priority::Finding,
                format!("**{}**", trimmed.trim_start_matches('#').trim()),
            )
        } else {
            (Priority::Finding, trimmed.to_owned())
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

    fn request(previous: &str, turns: Vec<TurnDigest>) -> SummaryRequest {
        SummaryRequest::new(
            String::new(),
            String::new(),
            Some(previous.to_owned()),
            String::new(),
            turns,
        )
    }

    #[test]
    fn another_summarizers_summary_becomes_the_earlier_summary_topic() {
        let previous = "## Comprehensive Conversation Summary\n\
            The user studies sodium-ion cathodes.\n\
            ## Key findings\n\
            - Prussian white delivers 150 mAh/g (Wang et al., 2015).\n\
            ## Cited Sources\n\
            - Wang, L. et al. Rhombohedral Prussian White. JACS (2015). doi:10.1021/jacs.5b00021";
        let turn = TurnDigest {
            invocation_id: "inv-9".into(),
            user: "And hard carbon anodes?".into(),
            assistant: "Hard carbon stores about 300 mAh/g at 0.1 C.".into(),
            tool_outputs: Vec::new(),
        };
        let text = OfflineSummarizer::new(8000).consolidate(&request(previous, vec![turn]));
        assert_eq!(
            text,
            "## Comprehensive Conversation Summary\n\n\
             ### Earlier summary\n\
             The user studies sodium-ion cathodes.\n\
             **Key findings**\n\
             - Prussian white delivers 150 mAh/g (Wang et al., 2015).\n\n\
             ### Q: And hard carbon anodes?\n\
             - Hard carbon stores about 300 mAh/g at 0.1 C.\n\n\
             ## Cited Sources\n\
             - Wang, L. et al. Rhombohedral Prussian White. JACS (2015). doi:10.1021/jacs.5b00021"
        );
    }

    #[test]
    fn condensing_keeps_one_headline_per_topic_and_prefers_a_figure() {
        let turn = |i: usize| TurnDigest {
            invocation_id: format!("inv-{i}"),
            user: format!("Question {i} about anode number {i}?"),
            assistant: format!(
                "The study found that design {i} works because of its coating. \
                 It reaches {i}0 mAh/g after 100 cycles. \
                 It keeps {i}7 % at 2 C."
            ),
            tool_outputs: vec![format!("Evidence: the cell kept {i}5 % after 200 cycles.")],
        };
        let turns: Vec<TurnDigest> = (1..=6).map(turn).collect();
        let full = OfflineSummarizer::new(100_000).consolidate(&{
            let mut r = request("", turns.clone());
            r.previous_summary = None;
            r
        });
        // A bound that fits one line per topic but not two.
        let bound = full
            .lines()
            .filter(|l| !l.starts_with("- "))
            .map(|l| l.len() + 1)
            .sum::<usize>()
            + 6 * 60
            + NOTE_RESERVE;
        let text = OfflineSummarizer::new(bound).consolidate(&{
            let mut r = request("", turns);
            r.previous_summary = None;
            r
        });
        for i in 1..=6 {
            let topic = text
                .split("### Q: ")
                .find(|t| t.starts_with(&format!("Question {i} ")))
                .expect("every topic is kept");
            let lines: Vec<&str> = topic.lines().filter(|l| l.starts_with("- ")).collect();
            let figure = format!("- It reaches {i}0 mAh/g after 100 cycles.");
            // The first figure outlives the topic's other lines, the second figure included;
            // older topics shrink first.
            assert!(lines.contains(&figure.as_str()), "{text}");
            if i == 1 {
                assert_eq!(lines, [figure], "{text}");
            }
        }
    }

    #[test]
    fn rolling_an_offline_summary_keeps_its_topics_once() {
        let turn = |q: &str| TurnDigest {
            invocation_id: q.into(),
            user: q.into(),
            assistant: format!("The answer to {q} is 42 %."),
            tool_outputs: Vec::new(),
        };
        let offline = OfflineSummarizer::new(8000);
        let first = offline.consolidate(&{
            let mut r = request("", vec![turn("first question")]);
            r.previous_summary = None;
            r
        });
        let second = offline.consolidate(&request(&first, vec![turn("second question")]));
        let third = offline.consolidate(&request(&second, vec![turn("third question")]));
        assert_eq!(third.matches(TITLE).count(), 1);
        assert_eq!(third.matches("### Q: first question").count(), 1);
        assert!(third.find("first question") < third.find("third question"));
        assert!(!third.contains("Earlier summary"));
    }
}
