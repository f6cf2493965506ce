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
    // Claims: each topic's finding lines, then each entry's current value.
    let mut places = Vec::new();
    let mut claims = Vec::new();
    for (t, tp) in topics.iter().enumerate() {
        for (l, line) in tp.lines.iter().enumerate() {
            if line.rank != Rank::Pinned && !line.facts.is_empty() {
                places.push((Some((t, l)), None));
                claims.push(Claim {
                    text: &line.text,
                    topic: t,
                });
            }
        }
    }
    for (e, entry) in entries.iter().enumerate() {
        places.push((None, Some(e)));
        claims.push(Claim {
            text: entry.now(),
            topic: usize::MAX - e,
        });
    }
    let found = supersede::supersessions(&claims, new_turn);
    let mut out = Vec::new();
    let mut gone: Vec<(usize, usize)> = Vec::new();
    let mut kept_part: Vec<(usize, usize, String)> = Vec::new();
    let mut used: Vec<String> = Vec::new();
    for s in found {
        let entry = match places[s.claim] {
            (Some((t, l)), _) => {
                let line = &topics[t].lines[l].text;
                let (was, rest) = supersede::split_claim(line, &s.by);
                match rest {
                    // The clauses the correction does not touch stay a finding.
                    Some(rest) => {
                        let prefix = if line.starts_with(EVIDENCE) {
                            EVIDENCE
                        } else {
                            LINE
                        };
                        kept_part.push((t, l, format!("{prefix}{rest}")));
                    }
                    None => gone.push((t, l)),
                }
                let entry = Entry::new(&was, number, &s.by);
                // One statement per correction: claims the same sentence corrects share
                // an entry.
                match entries.iter().position(|e| e.chain == entry.chain) {
                    Some(e) => {
                        entries[e].absorb(&entry.was);
                        out.push(entry.receipt());
                        used.extend(
                            crate::text::sentences(&s.by)
                                .iter()
                                .map(|b| collapse(b).to_lowercase()),
                        );
                        continue;
                    }
                    None => {
                        entries.push(entry);
                        entries.len() - 1
                    }
                }
            }
            (None, Some(e)) => {
                entries[e]
                    .chain
                    .push((number, Entry::new("", None, &s.by).now().to_owned()));
                e
            }
            _ => continue,
        };
        out.push(entries[entry].receipt());
        used.extend(
            crate::text::sentences(&s.by)
                .iter()
                .map(|b| collapse(b).to_lowercase()),
        );
    }
    for (t, l, text) in kept_part {
        topics[t].lines[l] = Line::finding(text);
    }
    gone.sort_unstable();
    for (t, l) in gone.into_iter().rev() {
        topics[t].lines.remove(l);
    }
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
