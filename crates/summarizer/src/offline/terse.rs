//! The offline summary's **terse forms**, used before any finding is dropped when the summary
//! is over its budget: a question heading cut short, and a finding line without the clauses
//! that state no fact (what it restates of its context), keeping its subject (the first
//! clause), every value, unit, citation and identifier, and every clause that negates.
//!
//! What this module must never do: change a line's facts (a terse line states every fact of
//! the line it replaces, or the line stays as it was), or cut inside parentheses.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::correct::without_pointer;
use super::{EVIDENCE, LINE, Line, QUESTION_PREFIX, Rank, Topic};
use crate::findings::facts;
use crate::text::cut;

/// Longest question heading once the budget bites, in characters (its pointer and `…` aside).
pub(super) const SHORT_QUESTION_CHARS: usize = 24;
/// Where clauses left out were.
const GAP: &str = " … ";

/// A clause that negates or restricts: kept even without a fact, since leaving it out could
/// turn a qualified finding into an unqualified one.
pub(super) static QUALIFIES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:not|no|never|without|nor|none|only|except|unless|but)\b")
        .expect("the pattern is valid")
});

/// Cuts each question heading to its first words within [`SHORT_QUESTION_CHARS`] (its turn
/// pointer kept; [`short_question`]). Returns the characters saved.
pub(super) fn shorten_headings(topics: &mut [Topic]) -> usize {
    let mut saved = 0;
    for topic in topics.iter_mut() {
        let Some(question) = without_pointer(&topic.heading).strip_prefix(QUESTION_PREFIX) else {
            continue;
        };
        let short = short_question(question);
        if short.len() < question.len() {
            let pointer = &topic.heading[QUESTION_PREFIX.len() + question.len()..];
            let heading = format!("{QUESTION_PREFIX}{short}{pointer}");
            saved += topic.heading.chars().count() - heading.chars().count();
            topic.heading = heading;
        }
    }
    saved
}

/// The question's first whole words that fit in [`SHORT_QUESTION_CHARS`], then `…`: a heading
/// only points at its turn, so a cut word buys nothing. A question that fits is left as it is
/// (a heading cut once is not cut again); a first word longer than the limit is cut inside.
pub(super) fn short_question(question: &str) -> String {
    if question.chars().count() <= SHORT_QUESTION_CHARS + 1 {
        return question.to_owned();
    }
    let mut end = 0;
    for (i, _) in question.match_indices(' ') {
        if question[..i].chars().count() > SHORT_QUESTION_CHARS {
            break;
        }
        end = i;
    }
    if end == 0 {
        return cut(question, SHORT_QUESTION_CHARS);
    }
    let words = question[..end].trim_end_matches(|c: char| !c.is_alphanumeric());
    format!("{words}…")
}

/// Replaces every finding line by its terse form ([`terse`]), one statement per finding: a
/// clause whose every fact a line before it states goes too (pinned lines first, then the
/// answers' lines, then the syntheses', oldest topic first, as in [`super::budget::dedupe`]).
/// Returns the characters saved.
pub(super) fn shorten_findings(topics: &mut [Topic]) -> usize {
    let mut stated: BTreeSet<String> = topics
        .iter()
        .flat_map(|t| &t.lines)
        .filter(|l| l.rank == Rank::Pinned)
        .flat_map(|l| l.facts.iter().cloned())
        .collect();
    let mut saved = 0;
    for evidence in [false, true] {
        for line in topics.iter_mut().flat_map(|t| t.lines.iter_mut()) {
            if matches!(line.rank, Rank::Pinned | Rank::Prose)
                || line.text.starts_with(EVIDENCE) != evidence
            {
                continue;
            }
            if let Some(short) = terse(&line.text, &stated) {
                saved += line.text.chars().count() - short.chars().count();
                stated.extend(line.facts.iter().cloned());
                line.facts = facts(&short);
                line.text = short;
            } else {
                stated.extend(line.facts.iter().cloned());
            }
        }
    }
    saved
}

/// Drops the finding lines the terse forms left without a fact of their own (every fact they
/// stated, lines before them state; [`shorten_findings`]), unless they qualify: a
/// subject and `…` alone tell the reader nothing.
pub(super) fn drop_factless(topics: &mut [Topic], dropped: &mut Vec<Line>) {
    for topic in topics.iter_mut() {
        let (gone, kept): (Vec<Line>, Vec<Line>) =
            std::mem::take(&mut topic.lines).into_iter().partition(|l| {
                l.rank != Rank::Pinned && l.facts.is_empty() && !QUALIFIES.is_match(&l.text)
            });
        topic.lines = kept;
        dropped.extend(gone);
    }
}

/// The clauses of `body` at the top level (outside parentheses and brackets), each with the
/// separator that follows it.
pub(super) fn clauses(body: &str) -> Vec<(&str, &str)> {
    const SEPARATORS: [&str; 5] = ["; ", " — ", " – ", ": ", ", "];
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        let Some(c) = body[i..].chars().next() else {
            break;
        };
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        let separator = SEPARATORS.iter().find(|s| body[i..].starts_with(**s));
        if let (0, Some(sep)) = (depth, separator) {
            // `Smith et al., 2020` and `2, 3` are not clause ends.
            if !body[i + sep.len()..].starts_with(|c: char| c.is_ascii_digit()) {
                out.push((&body[start..i], *sep));
                i += sep.len();
                start = i;
                continue;
            }
        }
        i += c.len_utf8();
    }
    out.push((&body[start..], ""));
    out
}

/// The terse form of a finding line: its first clause, the clauses that state a fact
/// `stated` does not hold or that qualify one, and ` … ` where clauses were left out; `None`
/// when nothing would go or when the terse line and `stated` would not hold every fact of the
/// line.
pub(super) fn terse(text: &str, stated: &BTreeSet<String>) -> Option<String> {
    let (prefix, body) = [LINE, EVIDENCE]
        .iter()
        .find_map(|p| text.strip_prefix(p).map(|b| (*p, b)))
        .unwrap_or(("", text));
    let parts = clauses(body);
    let keep: Vec<bool> = parts
        .iter()
        .enumerate()
        .map(|(i, (c, _))| i == 0 || !facts(c).is_subset(stated) || QUALIFIES.is_match(c))
        .collect();
    if keep.iter().all(|k| *k) {
        return None;
    }
    let mut out = String::from(prefix);
    let mut gap = false;
    for (i, (clause, _)) in parts.iter().enumerate() {
        if !keep[i] {
            gap = true;
            continue;
        }
        if i > 0 {
            out.push_str(if gap { GAP } else { parts[i - 1].1 });
        }
        out.push_str(clause);
        gap = false;
    }
    if gap {
        out.push('…');
    }
    let held: BTreeSet<String> = facts(&out).union(stated).cloned().collect();
    (held.is_superset(&facts(text)) && out.len() < text.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terse_line_keeps_subject_values_and_sources() {
        let none = BTreeSet::new();
        let line = "- Orchard thinning, which the growers had long resisted, raised apple yield \
                    by 14.6 kg per tree (Marlow & Eze 2019), a gain seen in every block.";
        assert_eq!(
            terse(line, &none).as_deref(),
            Some(
                "- Orchard thinning … raised apple yield by 14.6 kg per tree (Marlow & Eze 2019)…"
            )
        );
        // Parentheses are never cut, and `et al., 2020` is not a clause end.
        let cited = "* Frost damage fell to 23% (range 12–31%, three sites), as Quint et al., \
                     2020 reported, in thinned rows.";
        assert_eq!(
            terse(cited, &none).as_deref(),
            Some(
                "* Frost damage fell to 23% (range 12–31%, three sites), as Quint et al., 2020 reported…"
            )
        );
    }

    #[test]
    fn qualifying_clauses_stay_and_a_factless_line_is_left_alone() {
        let none = BTreeSet::new();
        let line = "- Nitrate stayed at 41 ppm, but not in the manured strip, as expected.";
        assert_eq!(
            terse(line, &none).as_deref(),
            Some("- Nitrate stayed at 41 ppm, but not in the manured strip…")
        );
        assert_eq!(terse("- Nitrate stayed at 41 ppm.", &none), None);
    }

    #[test]
    fn a_clause_another_line_states_goes() {
        let stated = facts("- Plots held 35 beetles per trap (Ruiz 2021).");
        let line =
            "* Ruiz 2021 trapped in 12 orchards, with 35 beetles per trap, over two summers.";
        assert_eq!(
            terse(line, &stated).as_deref(),
            Some("* Ruiz 2021 trapped in 12 orchards…")
        );
    }

    #[test]
    fn headings_are_cut_with_their_pointer_kept() {
        let mut topics = vec![Topic {
            heading: format!("{QUESTION_PREFIX}{} (turn 7)", "why ".repeat(30)),
            lines: Vec::new(),
        }];
        assert!(shorten_headings(&mut topics) > 0);
        assert!(
            topics[0].heading.ends_with("… (turn 7)"),
            "{}",
            topics[0].heading
        );
        assert!(
            topics[0].heading.chars().count()
                <= QUESTION_PREFIX.len() + SHORT_QUESTION_CHARS + "… (turn 7)".len()
        );
    }

    #[test]
    fn a_short_heading_keeps_whole_words_and_is_cut_once() {
        let question = "Could you compare the moth counts across both valleys for me?";
        let short = short_question(question);
        assert_eq!(short, "Could you compare the…");
        assert_eq!(
            short_question(&short),
            short,
            "a cut heading is not cut again"
        );
        assert_eq!(short_question("Why so few moths?"), "Why so few moths?");
        assert_eq!(
            short_question("Supercalifragilisticexpialidocious moths"),
            cut(
                "Supercalifragilisticexpialidocious moths",
                SHORT_QUESTION_CHARS
            )
        );
    }

    /// A finding the terse forms leave with only its subject (every value a line before it
    /// states) goes once the budget bites; a qualifying one and a pinned one stay.
    #[test]
    fn a_line_the_terse_form_leaves_factless_goes() {
        let topic = |heading: &str, lines: Vec<Line>| Topic {
            heading: heading.to_owned(),
            lines,
        };
        let mut topics = vec![
            topic(
                "### Q: Beetles? (turn 1)",
                vec![Line::finding(
                    "- Plots held 35 beetles per trap (Ruiz 2021).".into(),
                )],
            ),
            topic(
                "### Q: Tabulate? (turn 2)",
                vec![
                    Line::finding("- Beetle count: about 35 beetles per trap".into()),
                    Line::finding(
                        "- Trap yield: about 35 beetles per trap, but not in frost".into(),
                    ),
                    Line::finding(
                        "- Nets: about 35 beetles per trap, and 12.5 moths per trap".into(),
                    ),
                ],
            ),
        ];
        shorten_findings(&mut topics);
        let mut dropped = Vec::new();
        drop_factless(&mut topics, &mut dropped);
        let texts: Vec<&str> = topics
            .iter()
            .flat_map(|t| &t.lines)
            .map(|l| l.text.as_str())
            .collect();
        assert_eq!(
            texts,
            [
                "- Plots held 35 beetles per trap (Ruiz 2021).",
                "- Trap yield … but not in frost",
                "- Nets … and 12.5 moths per trap",
            ]
        );
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].text, "- Beetle count…");
    }
}
