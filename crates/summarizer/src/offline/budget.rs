//! The offline summarizer's budget and its one-statement rule: which lines go when the
//! summary is over `summarizer_summary_max_tokens`, and which lines only restate what another
//! kept line states (see the module docs of [`super`] for the order).
//!
//! What this module must never do: cut a kept line, or drop a pinned one.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::merge::DIGITS;
use super::{EVIDENCE, LINE, Line, Rank, TITLE, Topic};
use crate::findings;
use crate::text::collapse;

/// The order lines go in, after the lines whose values another line states ([`values`]):
/// (rank, only lines whose every fact another line states, keep each topic's headline).
/// First every topic keeps its headline (its first finding), so that an old topic shrinks to
/// its question and one finding before any topic loses its last one — the unique findings of
/// a rank going the line with the most characters per fact first ([`drop_least_dense`]);
/// then headlines go, oldest topic first.
const PASSES: [(Rank, bool, bool); 10] = [
    (Rank::Prose, false, true),
    (Rank::Evidence, true, true),
    (Rank::Figure, true, true),
    (Rank::Cited, true, true),
    (Rank::Evidence, false, true),
    (Rank::Figure, false, true),
    (Rank::Cited, false, true),
    (Rank::Evidence, false, false),
    (Rank::Figure, false, false),
    (Rank::Cited, false, false),
];

/// How many kept lines state each fact.
fn fact_counts(topics: &[Topic]) -> HashMap<String, usize> {
    let mut count: HashMap<String, usize> = HashMap::new();
    for line in topics.iter().flat_map(|t| &t.lines) {
        for f in &line.facts {
            *count.entry(f.clone()).or_default() += 1;
        }
    }
    count
}

/// True when another kept line states every fact of `line`.
fn restated(line: &Line, count: &HashMap<String, usize>) -> bool {
    !line.facts.is_empty()
        && line
            .facts
            .iter()
            .all(|f| count.get(f).copied().unwrap_or(0) > 1)
}

/// Counts `line`'s facts as stated once less (it left the summary).
fn forget(count: &mut HashMap<String, usize>, line: &Line) {
    for f in &line.facts {
        if let Some(c) = count.get_mut(f) {
            *c -= 1;
        }
    }
}

/// Drops lines until the prose fits `target` characters (when it is over `limit`): see the
/// module docs for the order. Returns how many lines went.
pub(super) fn condense(
    topics: &mut Vec<Topic>,
    target: usize,
    limit: usize,
    gone: &mut Vec<Line>,
) -> usize {
    let mut total = TITLE.chars().count() + topics.iter().map(Topic::chars).sum::<usize>();
    if total <= limit {
        return 0;
    }
    let mut dropped = 0;
    let mut count = fact_counts(topics);
    // Redundant before unique: first the findings whose every value another kept line of
    // their topic states, then of the summary, then the passes by rank.
    for in_topic in [true, false] {
        for line in drop_restated(topics, in_topic, &mut total, target) {
            forget(&mut count, &line);
            gone.push(line);
            dropped += 1;
        }
    }
    for (rank, only_restated, keep_headline) in PASSES {
        if !only_restated && keep_headline {
            dropped += drop_least_dense(topics, rank, &mut count, &mut total, target, gone);
            continue;
        }
        for topic in topics.iter_mut() {
            let mut i = 0;
            while total > target && i < topic.lines.len() {
                let headline = keep_headline.then(|| topic.headline()).flatten();
                let line = &topic.lines[i];
                if line.rank == rank
                    && Some(i) != headline
                    && (!only_restated || restated(line, &count))
                {
                    forget(&mut count, line);
                    total -= line.text.chars().count() + 1;
                    gone.push(topic.lines.remove(i));
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

/// Once lines went, a question heading with no line left under it points at nothing: it goes,
/// the newest topic's aside (as in [`condense`]).
pub(super) fn drop_empty_headings(topics: &mut Vec<Topic>) {
    let newest = topics.len().saturating_sub(1);
    let mut i = 0;
    topics.retain(|t| {
        i += 1;
        i - 1 == newest || !t.lines.is_empty()
    });
}

/// One statement per finding: removes repeated lines (same text up to case) and lines whose
/// every fact a line kept before states — pinned lines first, then the answers' lines, then
/// the syntheses' (`* `), oldest topic first. Returns the findings removed.
pub(super) fn dedupe(topics: &mut [Topic]) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut stated: HashSet<String> = HashSet::new();
    let mut removed = Vec::new();
    let passes: [fn(&Line) -> bool; 3] = [
        |l| l.rank == Rank::Pinned,
        |l| l.rank != Rank::Pinned && !l.text.starts_with(EVIDENCE),
        |l| l.text.starts_with(EVIDENCE),
    ];
    let mut keep: Vec<Vec<bool>> = topics.iter().map(|t| vec![true; t.lines.len()]).collect();
    for pass in passes {
        for (t, topic) in topics.iter().enumerate() {
            for (i, line) in topic.lines.iter().enumerate() {
                if !pass(line) {
                    continue;
                }
                let repeated = !seen.insert(collapse(&line.text).to_lowercase());
                let restated = line.rank != Rank::Pinned
                    && !line.facts.is_empty()
                    && line.facts.iter().all(|f| stated.contains(f));
                if repeated || restated {
                    keep[t][i] = false;
                } else {
                    stated.extend(line.facts.iter().cloned());
                }
            }
        }
    }
    for (topic, keep) in topics.iter_mut().zip(keep) {
        let mut k = keep.into_iter();
        topic.lines.retain(|line| {
            let kept = k.next().unwrap_or(true);
            if !kept && !line.facts.is_empty() {
                removed.push(line.text.clone());
            }
            kept
        });
    }
    removed
}

/// Drops the findings of `rank`, each topic's headline aside, until `total` is within
/// `target`: the line with the most characters per fact first (one long line before several
/// short ones that state more between them), the oldest on a tie. Returns how many went.
fn drop_least_dense(
    topics: &mut [Topic],
    rank: Rank,
    count: &mut HashMap<String, usize>,
    total: &mut usize,
    target: usize,
    gone: &mut Vec<Line>,
) -> usize {
    let mut dropped = 0;
    while *total > target {
        let mut best: Option<(usize, usize, usize)> = None;
        for (t, topic) in topics.iter().enumerate() {
            let headline = topic.headline();
            for (i, line) in topic.lines.iter().enumerate() {
                if line.rank != rank || Some(i) == headline {
                    continue;
                }
                let cost = line.text.chars().count() / line.facts.len().max(1);
                if best.is_none_or(|(_, _, c)| cost > c) {
                    best = Some((t, i, cost));
                }
            }
        }
        let Some((t, i, _)) = best else { break };
        let line = topics[t].lines.remove(i);
        forget(count, &line);
        *total -= line.text.chars().count() + 1;
        gone.push(line);
        dropped += 1;
    }
    dropped
}

/// True when a finding line has the form [`crate::findings::table_rows`] gives a table row: its
/// first cell, ` — `, then `Column: value` cells (a previous summary's row, whose origin the
/// text no longer says).
pub(super) fn row_form(text: &str) -> bool {
    let body = text
        .strip_prefix(LINE)
        .or_else(|| text.strip_prefix(EVIDENCE))
        .unwrap_or(text);
    body.split_once(" — ").is_some_and(|(label, cells)| {
        !label.contains(". ")
            && cells.split("; ").next().is_some_and(|cell| {
                cell.split_once(": ")
                    .is_some_and(|(name, _)| !name.is_empty() && name.len() <= 60)
            })
    })
}

/// True when the fact `f` ([`crate::findings::facts`]) is a number, not a citation or an
/// identifier (a DOI starts with digits too, but holds a `/`).
fn is_number(f: &str) -> bool {
    f.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '±')) && !f.contains('/')
}

/// What a line states, for the rule "redundant before unique" within a topic: every number
/// as written, whatever its label or unit (`p = 0.34` and `p: 0.34`, `1.9 km` and `1.9 vs`
/// state the same value; a range is one value), every single digit, and every fact that is
/// not a number (citation keys, identifiers).
fn values(line: &Line) -> BTreeSet<String> {
    findings::numbers(&line.text)
        .into_iter()
        .map(|n| n.split_whitespace().collect::<String>().replace('−', "-"))
        .chain(
            DIGITS
                .find_iter(&line.text)
                .filter(|m| m.as_str().len() == 1)
                .map(|m| m.as_str().to_owned()),
        )
        .chain(line.facts.iter().filter(|f| !is_number(f)).cloned())
        .collect()
}

/// Drops the findings of `topics` that state a number and whose every value ([`values`])
/// another kept line states — within their own topic (`in_topic`) or anywhere — each topic's
/// headline aside, until `total` is within `target`: table rows first, then the other lines;
/// newest topic first and each topic's last line first (a recap, a statement's later parts
/// and a turn's syntheses go before what they restate). Returns the lines dropped.
fn drop_restated(
    topics: &mut [Topic],
    in_topic: bool,
    total: &mut usize,
    target: usize,
) -> Vec<Line> {
    let mut gone = Vec::new();
    let mut everywhere: HashMap<String, usize> = HashMap::new();
    for line in topics.iter().flat_map(|t| &t.lines) {
        for v in values(line) {
            *everywhere.entry(v).or_default() += 1;
        }
    }
    for rows in [true, false] {
        for topic in topics.iter_mut().rev() {
            let mut count = if in_topic {
                let mut count: HashMap<String, usize> = HashMap::new();
                for line in &topic.lines {
                    for v in values(line) {
                        *count.entry(v).or_default() += 1;
                    }
                }
                count
            } else {
                std::mem::take(&mut everywhere)
            };
            let headline = topic.headline();
            for i in (0..topic.lines.len()).rev() {
                if *total <= target {
                    break;
                }
                let line = &topic.lines[i];
                let values = values(line);
                let redundant = line.row == rows
                    && line.rank != Rank::Pinned
                    && Some(i) != headline
                    && line.facts.iter().any(|f| is_number(f))
                    && values
                        .iter()
                        .all(|v| count.get(v).copied().unwrap_or(0) > 1);
                if redundant {
                    for v in &values {
                        if let Some(c) = count.get_mut(v) {
                            *c -= 1;
                        }
                    }
                    *total -= line.text.chars().count() + 1;
                    gone.push(topic.lines.remove(i));
                }
            }
            if !in_topic {
                everywhere = count;
            }
        }
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(question: &str, lines: Vec<Line>) -> Topic {
        Topic {
            heading: format!("### Q: {question}"),
            lines,
        }
    }

    fn texts(topics: &[Topic]) -> Vec<&str> {
        topics
            .iter()
            .flat_map(|t| &t.lines)
            .map(|l| l.text.as_str())
            .collect()
    }

    fn total(topics: &[Topic]) -> usize {
        TITLE.chars().count() + topics.iter().map(Topic::chars).sum::<usize>()
    }

    /// A table row whose every value the answer's sentence states (in other words: `12
    /// orchards`, `Orchards: 12`) goes before a finding no other line states, though both
    /// are uncited and the row is older.
    #[test]
    fn a_row_restating_its_topics_values_goes_before_a_unique_finding() {
        let mut topics = vec![
            topic(
                "Thinning?",
                vec![
                    Line::finding(
                        "- Thinning raised yield by 14.6 kg per tree in 12 orchards (Marlow & Eze 2019)."
                            .into(),
                    ),
                    Line::row("- Thinned — Yield: 14.6 kg; Orchards: 12".into()),
                ],
            ),
            topic(
                "Frost?",
                vec![
                    Line::finding("- Frost losses were 31 % lower in 2021.".into()),
                    Line::finding("* Frost damage fell to 23 % on north slopes.".into()),
                ],
            ),
        ];
        let all = total(&topics);
        let mut gone = Vec::new();
        let dropped = condense(&mut topics, all - 10, all - 10, &mut gone);
        assert_eq!(dropped, 1);
        assert_eq!(gone[0].text, "- Thinned — Yield: 14.6 kg; Orchards: 12");
        assert!(texts(&topics).contains(&"* Frost damage fell to 23 % on north slopes."));
    }

    /// A later recap that restates an earlier topic's figure goes before the earlier topic's
    /// own statement of it.
    #[test]
    fn a_recap_goes_before_the_finding_it_restates() {
        let original = "- Thinning raised yield by 14.6 kg per tree (Marlow & Eze 2019).";
        let recap = "- Yield: 14.6 kg per tree with thinning (Marlow & Eze 2019).";
        let mut topics = vec![
            topic(
                "Thinning?",
                vec![
                    Line::finding("- Frost losses were 31 % lower in 2021.".into()),
                    Line::finding(original.into()),
                ],
            ),
            topic(
                "Recap?",
                vec![
                    Line::finding("- Nitrate stayed at 41 ppm (Ruiz 2021).".into()),
                    Line::finding(recap.into()),
                ],
            ),
        ];
        let all = total(&topics);
        let mut gone = Vec::new();
        condense(&mut topics, all - 10, all - 10, &mut gone);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].text, recap);
        assert!(texts(&topics).contains(&original));
    }

    /// Among unique findings of one rank, one long line goes before a short older one: the
    /// same room keeps more facts.
    #[test]
    fn a_long_line_goes_before_a_short_older_one() {
        let long = format!(
            "* Pollen loads were {} 18 % lighter on successful trips.",
            "measured by weighing the corbiculae of returning foragers at the hive entrance,"
                .repeat(2)
        );
        let mut topics = vec![
            topic(
                "Frost?",
                vec![
                    Line::finding("- Frost losses were 31 % lower in 2021.".into()),
                    Line::finding("* Frost damage fell to 23 % on north slopes.".into()),
                ],
            ),
            topic(
                "Pollen?",
                vec![
                    Line::finding("- Trips fell from 63 % to 41 %.".into()),
                    Line::finding(long.clone()),
                ],
            ),
        ];
        let all = total(&topics);
        let mut gone = Vec::new();
        condense(&mut topics, all - 10, all - 10, &mut gone);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].text, long);
        assert!(texts(&topics).contains(&"* Frost damage fell to 23 % on north slopes."));
    }

    /// A previous summary's table row is known by the form `findings::table_rows` writes.
    #[test]
    fn a_row_is_known_by_its_form() {
        assert!(row_form("- Thinned — Yield: 14.6 kg; Orchards: 12"));
        assert!(row_form("* P3 — Gain: 31.5 mm"));
        assert!(!row_form("- Yield rose by 14.6 kg — more than expected."));
        assert!(!row_form("- Yield rose. Then — Later: 14.6 kg"));
        assert!(Line::finding("- Thinned — Yield: 14.6 kg; Orchards: 12".into()).row);
    }

    #[test]
    fn values_read_numbers_whatever_their_label_or_unit() {
        let a = values(&Line::finding(
            "- Netting reached p = 0.34 in 8 visits.".into(),
        ));
        let b = values(&Line::row(
            "- Netting — Per-visit p: 0.34; Visits: 8".into(),
        ));
        assert_eq!(a, b);
        // A range is one value, not its two ends.
        let range = values(&Line::finding("- Cover spanned 12–31 % of plots.".into()));
        assert!(range.contains("12–31%"), "{range:?}");
        assert!(!range.contains("12"), "{range:?}");
        // A citation key is a value; a number inside it is not read on its own.
        let cited = values(&Line::finding(
            "- Yield rose 14.6 kg (Marlow & Eze 2019).".into(),
        ));
        assert!(cited.iter().any(|v| v.contains("marlow")), "{cited:?}");
    }
}
