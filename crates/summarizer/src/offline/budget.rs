//! The offline summarizer's budget and its one-statement rule: which lines go when the
//! summary is over `summarizer_summary_max_tokens`, and which lines only restate what another
//! kept line states (see the module docs of [`super`] for the order).
//!
//! What this module must never do: cut a kept line, or drop a pinned one.

use std::collections::{HashMap, HashSet};

use super::{EVIDENCE, Line, Rank, TITLE, Topic};
use crate::text::collapse;

/// The order lines go in: (rank, only lines whose every fact another line states, keep
/// each topic's headline). First every topic keeps its headline (its first finding), so that
/// an old topic shrinks to its question and one finding before any topic loses its last one;
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
    for (rank, only_restated, keep_headline) in PASSES {
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
