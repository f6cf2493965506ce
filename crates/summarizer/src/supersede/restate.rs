//! What follows a correction ([`super`] finds it): which clauses of a claim line it
//! retracts, which values it retracted, and which later lines only restate the old claim.
//!
//! What this module must never do: call a line a restatement when it states a value the
//! correction brought.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::{MIN_SHARED_WORDS, core_value, disputed_words, negated_values, sources, values, words};
use crate::findings;

/// Where a sentence divides into clauses.
static CLAUSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"; | — | – |, (?:yet|but|while|whereas|and) ").expect("the pattern is valid")
});

/// A claim line split into the clauses a correction retracts (those that state a value the
/// correction negates, or, when it negates none, one it restates, or, when it speaks of no
/// value of the claim, those naming a word it disputes) and the rest, which stays a valid finding; `None` for the rest when every
/// clause, or none, states a retracted value (the whole line is the claim).
pub(crate) fn split_claim(claim: &str, by: &str) -> (String, Option<String>) {
    // The values the correction speaks of: those it negates and those it restates.
    let negated = negated_values(by);
    let by_values = values(by);
    let retracted: BTreeSet<String> = if negated.is_empty() {
        values(claim)
            .into_iter()
            .filter(|v| by_values.contains(v))
            .collect()
    } else {
        negated
    };
    let clauses: Vec<&str> = CLAUSE
        .split(claim)
        .filter(|c| !c.trim().is_empty())
        .collect();
    // A correction that disputes a word and no value retracts the clauses naming the word.
    let disputed = if retracted.is_empty() {
        disputed_words(by)
    } else {
        BTreeSet::new()
    };
    let mut retracts: Vec<bool> = clauses
        .iter()
        .map(|c| {
            values(c).iter().any(|v| retracted.contains(v)) || !words(c).is_disjoint(&disputed)
        })
        .collect();
    // A value-less clause right before a retracted figure is its subject (`The strongest
    // association — an rsFC edge — was 0.26`): it goes with it.
    if disputed.is_empty() {
        for i in (0..clauses.len().saturating_sub(1)).rev() {
            if retracts[i + 1] && values(clauses[i]).is_empty() {
                retracts[i] = true;
            }
        }
    }
    let (mut gone, mut kept): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for (c, r) in clauses.iter().zip(&retracts) {
        if *r { gone.push(c) } else { kept.push(c) }
    }
    if gone.is_empty() || kept.is_empty() || kept.iter().all(|c| values(c).is_empty()) {
        return (claim.to_owned(), None);
    }
    (gone.join("; "), Some(kept.join("; ")))
}

/// True when `line` only restates `claim` after `by` corrected it: [`restates`], and every
/// value it states is the claim's or the correction's (it brings nothing new).
pub(crate) fn only_restates(line: &str, claim: &str, by: &str) -> bool {
    let known: BTreeSet<String> = values(claim).union(&values(by)).cloned().collect();
    restates(line, claim, by) && values(line).is_subset(&known)
}

/// `text` with each number whose value is in `retracted` replaced by `[corrected]`.
pub(crate) fn mask_values(text: &str, retracted: &BTreeSet<String>) -> String {
    let mut out = text.to_owned();
    for raw in findings::numbers(text) {
        if retracted.contains(&core_value(&raw)) {
            out = out.replace(&raw, "[corrected]");
        }
    }
    out
}

/// The values a correction retracted: those the claim states and the correction does not,
/// and those the correction negates.
pub(crate) fn retracted_values(claim: &str, by: &str) -> BTreeSet<String> {
    let by_values = values(by);
    let negated = negated_values(by);
    values(claim)
        .into_iter()
        .filter(|v| !by_values.contains(v) || negated.contains(v))
        .collect()
}

/// True when `line` states `claim` as valid after `by` corrected it: it names the claim's
/// subject, states a value the correction retracted (one the claim states and the correction
/// does not, or one the correction negates) and none of the values the correction brought.
pub(crate) fn restates(line: &str, claim: &str, by: &str) -> bool {
    let claim_values = values(claim);
    let by_values = values(by);
    let negated = negated_values(by);
    let retracted: BTreeSet<&String> = claim_values
        .iter()
        .filter(|v| !by_values.contains(*v) || negated.contains(*v))
        .collect();
    let brought: BTreeSet<&String> = by_values
        .iter()
        .filter(|v| !claim_values.contains(*v))
        .collect();
    let line_values = values(line);
    let subject = words(claim).intersection(&words(line)).count() >= MIN_SHARED_WORDS
        || !sources(claim).is_disjoint(&sources(line));
    subject
        && line_values.iter().any(|v| retracted.contains(v))
        && !line_values.iter().any(|v| brought.contains(v))
}
