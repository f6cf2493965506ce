//! One statement per finding, within a topic: a finding line (an answer's sentence or table
//! row, a synthesis's line) that states a fact an earlier finding line of the same topic
//! states is **merged** into that line — the earlier line gains the clauses of the later one
//! that state what it does not (with their labels and qualifiers), and the later line goes.
//! The prose bullet, the table row and the synthesis bullet that carry the same figure become
//! one statement.
//!
//! What this module must never do: lose a fact (a merged line states every fact of the two
//! lines it replaces, or both stay as they were), merge across topics (each topic names the
//! turn its lines came from), or touch a pinned line.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::terse::{QUALIFIES, clauses};
use super::{EVIDENCE, LINE, Line, Rank, Topic};
use crate::findings::facts;

/// Longest merged line, in characters: a statement the budget can still drop or shorten as
/// one finding without taking a whole topic with it.
pub(super) const MAX_MERGED_CHARS: usize = 600;
/// A run of digits (with its decimal or thousands marks): a number a merge must not lose, nor
/// its label, even one too short to count as a fact.
pub(super) static DIGITS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d+(?:[.,]\d+)*").expect("the pattern is valid"));
/// Where clauses left out were.
const GAP: &str = " … ";
/// Between the parts of a merged statement: where [`split`] cuts it again.
pub(super) const PART: &str = " · ";
/// Separators after which a clause that states no fact labels the next one (`Field — k: 10`).
const LABEL_SEPARATORS: [&str; 3] = [": ", " — ", " – "];

fn mergeable(line: &Line) -> bool {
    matches!(line.rank, Rank::Evidence | Rank::Figure | Rank::Cited)
}

/// The statement ids already in use, plus one.
fn next_id(topics: &[Topic]) -> usize {
    topics
        .iter()
        .flat_map(|t| &t.lines)
        .filter_map(|l| l.part_of)
        .max()
        .map_or(0, |m| m + 1)
}

/// The lines `[start, end)` of the statement that line `j` belongs to.
fn statement(lines: &[Line], j: usize) -> (usize, usize) {
    let Some(id) = lines[j].part_of else {
        return (j, j + 1);
    };
    let start = (0..=j)
        .rev()
        .take_while(|&k| lines[k].part_of == Some(id))
        .last()
        .unwrap_or(j);
    let end = (j..lines.len())
        .take_while(|&k| lines[k].part_of == Some(id))
        .last()
        .map_or(j + 1, |k| k + 1);
    (start, end)
}

/// Merges, in every topic, each finding line into the first earlier statement of the topic
/// that shares a fact with it (see the module docs): the line becomes the statement's last
/// part. Returns how many lines were merged.
pub(super) fn merge(topics: &mut [Topic]) -> usize {
    let mut id = next_id(topics);
    let mut merged = 0;
    for topic in topics.iter_mut() {
        let mut i = 0;
        while i < topic.lines.len() {
            let line = &topic.lines[i];
            let found = if line.part_of.is_none() && mergeable(line) {
                (0..i).find_map(|j| {
                    let (start, end) = statement(&topic.lines, j);
                    (start == j)
                        .then(|| merged_part(&topic.lines[start..end], line))
                        .flatten()
                        .map(|part| (start, end, part))
                })
            } else {
                None
            };
            let Some((start, end, part)) = found else {
                i += 1;
                continue;
            };
            let group = topic.lines[start].part_of.unwrap_or_else(|| {
                id += 1;
                id - 1
            });
            for l in &mut topic.lines[start..end] {
                l.part_of = Some(group);
            }
            topic.lines.remove(i);
            topic.lines.insert(end, part);
            topic.lines[end].part_of = Some(group);
            merged += 1;
            i += 1;
        }
    }
    merged
}

/// The part `from` adds to the statement `parts`: the clauses of `from` that state a fact the
/// statement does not; `None` when the two share no fact, when nothing would be added, when
/// the statement would grow over [`MAX_MERGED_CHARS`], or when it would not state every fact
/// of both.
fn merged_part(parts: &[Line], from: &Line) -> Option<Line> {
    if !parts.iter().all(mergeable) {
        return None;
    }
    let stated: BTreeSet<String> = parts.iter().flat_map(|p| p.facts.iter().cloned()).collect();
    if stated.is_disjoint(&from.facts) {
        return None;
    }
    let mut text = String::new();
    for p in parts {
        let t = if text.is_empty() {
            p.text.as_str()
        } else {
            body(&p.text)
        };
        if !text.is_empty() {
            text.push_str(PART);
        }
        text.push_str(t.strip_suffix('.').unwrap_or(t));
    }
    let rest = new_clauses(body(&from.text), &stated, &text)?;
    text.push_str(PART);
    text.push_str(&rest);
    let wanted: BTreeSet<String> = stated.union(&from.facts).cloned().collect();
    let fits = text.chars().count() <= MAX_MERGED_CHARS && facts(&text).is_superset(&wanted);
    let prefix = if parts[0].text.starts_with(EVIDENCE) {
        EVIDENCE
    } else {
        LINE
    };
    fits.then(|| Line::finding(format!("{prefix}{rest}")))
}

/// Cuts every merged statement of a previous summary back into its parts, one finding line
/// each with the statement's id: what the correction step and the budget read, claim by
/// claim; [`super::Topic::render`] joins them again.
pub(super) fn split(topics: &mut [Topic]) {
    let mut id = next_id(topics);
    for topic in topics.iter_mut() {
        let lines = std::mem::take(&mut topic.lines);
        for line in lines {
            if !mergeable(&line) || !line.text.contains(PART) {
                topic.lines.push(line);
                continue;
            }
            let prefix = if line.text.starts_with(EVIDENCE) {
                EVIDENCE
            } else {
                LINE
            };
            for part in body(&line.text).split(PART) {
                let mut part = Line::finding(format!("{prefix}{part}"));
                part.part_of = Some(id);
                topic.lines.push(part);
            }
            id += 1;
        }
    }
}

/// The text a line adds to a rendered statement: its text, or after the statement's first
/// part, [`PART`] and its body.
pub(super) fn rendered<'a>(previous: Option<&Line>, line: &'a Line) -> (&'static str, &'a str) {
    match (previous.and_then(|p| p.part_of), line.part_of) {
        (Some(a), Some(b)) if a == b => (PART, body(&line.text)),
        _ => ("\n", line.text.as_str()),
    }
}

/// How many statements of `topic` state a fact (a merged statement counts once).
pub(super) fn statements(topic: &Topic) -> usize {
    let mut previous = None;
    let mut count = 0;
    for line in &topic.lines {
        let (separator, _) = rendered(previous, line);
        count += usize::from(separator != PART && !line.facts.is_empty());
        previous = Some(line);
    }
    count
}

/// The number at `start..end` of `clause` with its label and unit: the two words before it
/// (`|r| = 0.16`, `HR 0.83`) and the word after it (`27% of`), within the clause.
fn in_context(clause: &str, start: usize, end: usize) -> &str {
    let before = clause[..start].trim_end();
    let from = before
        .rfind(char::is_whitespace)
        .map(|i| before[..i].trim_end())
        .and_then(|b| b.rfind(char::is_whitespace).map(|i| i + 1))
        .unwrap_or(0);
    let after = &clause[end..];
    let word = after.trim_start();
    let to = word
        .find(char::is_whitespace)
        .map_or(clause.len(), |i| clause.len() - word.len() + i);
    &clause[from..to]
}

fn body(text: &str) -> &str {
    text.strip_prefix(LINE)
        .or_else(|| text.strip_prefix(EVIDENCE))
        .unwrap_or(text)
}

/// The clauses of `body` that state a fact `stated` does not hold or a number `text` does not
/// state with the same label and unit ([`in_context`]; also one too short to count as a
/// fact), each with the clause that labels it (one
/// stating no fact, just before it, ended by `:` or a dash) and every clause that negates or
/// restricts (as in a terse line); ` … ` where clauses were left out. `None` when no clause
/// states anything new.
fn new_clauses(body: &str, stated: &BTreeSet<String>, text: &str) -> Option<String> {
    let parts = clauses(body);
    let new: Vec<bool> = parts
        .iter()
        .map(|(c, _)| {
            !facts(c).is_subset(stated)
                || DIGITS
                    .find_iter(c)
                    .any(|d| !text.contains(in_context(c, d.start(), d.end())))
        })
        .collect();
    if !new.iter().any(|n| *n) {
        return None;
    }
    let keep: Vec<bool> = (0..parts.len())
        .map(|i| {
            let labels_next = facts(parts[i].0).is_empty()
                && LABEL_SEPARATORS.contains(&parts[i].1)
                && new.get(i + 1).copied().unwrap_or(false);
            new[i] || labels_next || QUALIFIES.is_match(parts[i].0)
        })
        .collect();
    let mut out = String::new();
    let mut gap = !keep[0];
    if gap {
        out.push_str("… ");
    }
    for (i, (clause, _)) in parts.iter().enumerate() {
        if !keep[i] {
            gap = true;
            continue;
        }
        if i > 0 && !out.is_empty() && out != "… " {
            out.push_str(if gap { GAP } else { parts[i - 1].1 });
        }
        out.push_str(clause);
        gap = false;
    }
    if gap {
        out.push('…');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(lines: &[&str]) -> Topic {
        Topic {
            heading: "### Q: Orchards? (turn 3)".into(),
            lines: lines
                .iter()
                .map(|l| Line::finding((*l).to_owned()))
                .collect(),
        }
    }

    fn rendered_lines(topics: &[Topic]) -> Vec<String> {
        let mut out = String::new();
        for t in topics {
            t.render(&mut out);
            out.push('\n');
        }
        out.lines().skip(1).map(str::to_owned).collect()
    }

    fn all_facts(topics: &[Topic]) -> BTreeSet<String> {
        let mut text = String::new();
        for t in topics {
            t.render(&mut text);
        }
        facts(&text)
    }

    #[test]
    fn a_sentence_a_row_and_a_synthesis_line_on_one_figure_become_one_statement() {
        let mut topics = vec![topic(&[
            "- Thinning raised apple yield by 14.6 kg per tree (Marlow & Eze 2019).",
            "- Soil nitrate stayed at 41 ppm.",
            "- Thinned rows — yield: 14.6 kg per tree; frost damage: 23%",
            "* Marlow & Eze 2019 thinned 12 orchards, raising apple yield by 14.6 kg per tree, but not on clay.",
        ])];
        let before = all_facts(&topics);
        assert_eq!(merge(&mut topics), 2);
        assert_eq!(
            rendered_lines(&topics),
            [
                "- Thinning raised apple yield by 14.6 kg per tree (Marlow & Eze 2019) · \
                 Thinned rows — yield: 14.6 kg per tree; frost damage: 23% · \
                 Marlow & Eze 2019 thinned 12 orchards … but not on clay.",
                "- Soil nitrate stayed at 41 ppm.",
            ]
        );
        assert!(all_facts(&topics).is_superset(&before));
        assert_eq!(statements(&topics[0]), 2);
        // Merging again changes nothing; read back from its rendering, it is the same.
        let again = rendered_lines(&topics);
        assert_eq!(merge(&mut topics), 0);
        assert_eq!(rendered_lines(&topics), again);
        let mut read = vec![topic(&again.iter().map(String::as_str).collect::<Vec<_>>())];
        split(&mut read);
        assert_eq!(read[0].lines.len(), 4);
        assert_eq!(merge(&mut read), 0);
        assert_eq!(rendered_lines(&read), again);
    }

    #[test]
    fn a_number_is_read_with_its_label_and_unit() {
        let c = "the tightest bound is |r| = 0.16 across plots";
        let at = c.find("0.16").expect("present");
        assert_eq!(in_context(c, at, at + 4), "|r| = 0.16 across");
        assert_eq!(in_context("0.16", 0, 4), "0.16");
        // A clause restating the bare number under another label is not a restatement.
        let stated = facts("- Power: n = 305 for r = 0.16.");
        let text = "- Power: n = 305 for r = 0.16";
        assert_eq!(
            new_clauses("Bound: |r| = 0.16", &stated, text).as_deref(),
            Some("Bound: |r| = 0.16")
        );
        assert_eq!(new_clauses("n = 305 for r = 0.16", &stated, text), None);
    }

    #[test]
    fn lines_sharing_no_fact_or_in_other_topics_stay_apart() {
        let mut topics = vec![
            topic(&[
                "- Yield rose by 14.6 kg per tree.",
                "* Frost damage fell to 23%.",
            ]),
            topic(&["- Later, yield rose by 14.6 kg per tree again."]),
        ];
        let same = topics.clone();
        assert_eq!(merge(&mut topics), 0);
        assert_eq!(topics, same);
    }

    #[test]
    fn a_merge_that_would_make_a_line_too_long_is_not_made() {
        let long = format!("- Yield rose by 14.6 kg per tree; {}.", "x".repeat(580));
        let mut topics = vec![topic(&[&long, "* Yield: 14.6 kg per tree, 31 orchards."])];
        assert_eq!(merge(&mut topics), 0);
        assert_eq!(topics[0].lines.len(), 2);
    }
}
