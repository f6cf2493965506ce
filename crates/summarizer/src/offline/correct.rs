//! The offline summarizer's side of claim-level corrections ([`crate::supersede`] finds
//! them): a corrected line leaves its topic (or only its retracted clauses do), the
//! Corrections section records it, lines that only restate it go, and the correcting turn's
//! question no longer states the figure it asked about.
//!
//! What this module must never do: drop a line a correction does not target.

use std::collections::BTreeSet;

use compaction_core::{DropReason, DroppedFinding};

use super::{EVIDENCE, LINE, Line, Rank, Topic};
use crate::corrections::Entry;
use crate::supersede::{self, Claim, NewTurn};
use crate::text::collapse;

/// A topic heading without its turn pointer (` (turn 7)`): the pointer states no figure.
pub(super) fn without_pointer(heading: &str) -> &str {
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

/// `heading` with the numbers of `values` masked in its question, its turn pointer kept.
fn mask_heading(heading: &str, values: &BTreeSet<String>) -> String {
    let question = without_pointer(heading);
    let pointer = &heading[question.len()..];
    format!("{}{pointer}", supersede::mask_values(question, values))
}

/// Removes from `topic` the lines that only restate a corrected claim (the Corrections
/// section states it once), and masks a corrected value in its heading.
fn drop_restatements(
    topic: &mut Topic,
    pairs: &[(String, String)],
    dropped: &mut Vec<DroppedFinding>,
) {
    for (was, now) in pairs {
        let retracted = supersede::retracted_values(was, now);
        if supersede::values(without_pointer(&topic.heading))
            .iter()
            .any(|v| retracted.contains(v))
        {
            topic.heading = mask_heading(&topic.heading, &retracted);
        }
    }
    topic.lines.retain(|line| {
        let restating = line.rank != Rank::Pinned
            && pairs
                .iter()
                .any(|(was, now)| supersede::only_restates(&line.text, was, now));
        if restating {
            dropped.push(DroppedFinding {
                finding: line.text.clone(),
                reason: DropReason::Superseded,
            });
        }
        !restating
    });
}

/// Where a claim sits: a finding line of a topic (topic, line), or an entry's current value.
#[derive(Clone, Copy)]
enum Place {
    Line(usize, usize),
    Entry(usize),
}

/// The claims a new turn may correct: each topic's finding lines, then each entry's current
/// value.
fn claims_of<'a>(topics: &'a [Topic], entries: &'a [Entry]) -> (Vec<Place>, Vec<Claim<'a>>) {
    let mut places = Vec::new();
    let mut claims = Vec::new();
    for (t, tp) in topics.iter().enumerate() {
        for (l, line) in tp.lines.iter().enumerate() {
            if line.rank != Rank::Pinned && !line.facts.is_empty() {
                places.push(Place::Line(t, l));
                claims.push(Claim {
                    text: &line.text,
                    topic: t,
                });
            }
        }
    }
    for (e, entry) in entries.iter().enumerate() {
        places.push(Place::Entry(e));
        claims.push(Claim {
            text: entry.now(),
            topic: usize::MAX - e,
        });
    }
    (places, claims)
}

/// What one turn's corrections do to the findings: lines that leave, lines that keep only
/// their untouched clauses, and the correcting sentences now stated in entries.
#[derive(Default)]
struct Edits {
    gone: Vec<(usize, usize)>,
    kept_part: Vec<(usize, usize, String)>,
    used: Vec<String>,
    /// The topic of each corrected line and what it said.
    asked: Vec<(usize, String)>,
}

impl Edits {
    fn use_sentences(&mut self, by: &str) {
        self.used.extend(
            crate::text::sentences(by)
                .iter()
                .map(|b| collapse(b).to_lowercase()),
        );
    }

    /// Removes the corrected lines and keeps the untouched clauses of the split ones; a later
    /// question that states a value of a corrected claim (the user contesting it) no longer
    /// states it: the Corrections entry answers it.
    fn apply(mut self, topics: &mut [Topic]) -> Vec<String> {
        for (t, was) in &self.asked {
            let values = supersede::values(was);
            for later in topics.iter_mut().skip(t + 1) {
                let question = without_pointer(&later.heading);
                if question.contains('?') && !supersede::values(question).is_disjoint(&values) {
                    later.heading = mask_heading(&later.heading, &values);
                }
            }
        }
        for (t, l, text) in self.kept_part {
            topics[t].lines[l] = Line::finding(text);
        }
        self.gone.sort_unstable();
        for (t, l) in self.gone.into_iter().rev() {
            topics[t].lines.remove(l);
        }
        self.used
    }
}

/// Records the correction of line `(t, l)` by `by`: its retracted clauses go to an entry
/// (shared with the other claims the same sentence corrects), the rest stays a finding.
/// Returns the receipt's record.
fn correct_line(
    topics: &[Topic],
    entries: &mut Vec<Entry>,
    (t, l): (usize, usize),
    by: &str,
    number: Option<usize>,
    edits: &mut Edits,
) -> compaction_core::CorrectedClaim {
    let line = &topics[t].lines[l].text;
    let (was, rest) = supersede::split_claim(line, by);
    match rest {
        // The clauses the correction does not touch stay a finding.
        Some(rest) => {
            let prefix = if line.starts_with(EVIDENCE) {
                EVIDENCE
            } else {
                LINE
            };
            // The untouched clause may be the line's first, bullet and all.
            let rest = rest
                .strip_prefix(LINE)
                .or_else(|| rest.strip_prefix(EVIDENCE))
                .unwrap_or(&rest);
            edits.kept_part.push((t, l, format!("{prefix}{rest}")));
        }
        None => edits.gone.push((t, l)),
    }
    let entry = Entry::new(&was, number, by);
    edits.use_sentences(by);
    edits.asked.push((t, was.clone()));
    // One statement per correction: claims the same sentence corrects share an entry.
    match entries.iter().position(|e| e.chain == entry.chain) {
        Some(e) => {
            entries[e].absorb(&entry.was);
            entry.receipt()
        }
        None => {
            entries.push(entry);
            entries[entries.len() - 1].receipt()
        }
    }
}

/// Applies the corrections `new_turn` makes to the earlier claims (the lines of `topics` and
/// the last correction of each entry): a corrected line leaves its topic, a new entry (or a
/// longer chain) records it, and the correcting sentence moves from `topic` into the entry.
/// Returns the receipt's records of this turn's corrections.
pub(super) fn apply_corrections(
    topics: &mut [Topic],
    entries: &mut Vec<Entry>,
    topic: &mut Topic,
    new_turn: &NewTurn,
    number: Option<usize>,
    dropped: &mut Vec<DroppedFinding>,
) -> Vec<compaction_core::CorrectedClaim> {
    let (places, found) = {
        let (places, claims) = claims_of(topics, entries);
        (places, supersede::supersessions(&claims, new_turn))
    };
    let mut out = Vec::new();
    let mut edits = Edits::default();
    for s in found {
        match places[s.claim] {
            Place::Line(t, l) => {
                out.push(correct_line(
                    topics,
                    entries,
                    (t, l),
                    &s.by,
                    number,
                    &mut edits,
                ));
            }
            Place::Entry(e) => {
                entries[e]
                    .chain
                    .push((number, Entry::new("", None, &s.by).now().to_owned()));
                edits.use_sentences(&s.by);
                out.push(entries[e].receipt());
            }
        }
    }
    let used = edits.apply(topics);
    let pairs: Vec<(String, String)> = out.iter().map(|c| (c.was.clone(), c.now.clone())).collect();
    // The correcting turn's question states no corrected figure: it asked about it.
    for (was, _) in &pairs {
        topic.heading = mask_heading(&topic.heading, &supersede::values(was));
    }
    for tp in topics.iter_mut().chain(std::iter::once(&mut *topic)) {
        drop_restatements(tp, &pairs, dropped);
    }
    // The correcting sentences are stated in their entries.
    topic.lines.retain(|line| {
        let body = line
            .text
            .strip_prefix(LINE)
            .or_else(|| line.text.strip_prefix(EVIDENCE))
            .unwrap_or(&line.text);
        !used.contains(&collapse(body).to_lowercase())
    });
    out
}
