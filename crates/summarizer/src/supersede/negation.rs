//! What a correcting sentence negates ([`super`] reads it): the values it negates, calls
//! wrong or revises away from, the words it negates (`reaction-limited, not
//! diffusion-limited`), and whether a negated property speaks of a given claim.
//!
//! What this module must never do: take a change in the world (`fell from 12 to 9`), new
//! information (`updated from 12 to 9`) or a cited source's year for a negated value.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::{core_value, values, words};
use crate::citation::{self, CitationKind};

/// A value a sentence negates: `not (per) 10`, `instead of 12`, `rather than 3.1`.
static NEGATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\b(?:not|instead of|rather than|no longer)\s+(?:(?:per|at|in|on|the|a|an|for|",
        r"from|about|around|~|≈)\s+){0,2}([−\-+±]?\d[\d,]*(?:\.\d+)?)"
    ))
    .expect("the pattern is valid")
});
/// A word a sentence negates: `reaction-controlled, not diffusion-controlled`.
static NEGATED_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\b(?:not|rather than|instead of)\s+(?:(?:a|an|the|per|in|at|on|for|by)\s+)?",
        r"(\p{L}[\p{L}\-]{2,})"
    ))
    .expect("the pattern is valid")
});
/// A word a sentence puts in place of a negated one: `reaction-limited, not diffusion-limited`
/// (group 1 replaces group 2).
static REPLACED_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(\p{L}[\p{L}\-]{2,})(?:,\s+not|,?\s+rather than|,?\s+instead of)\s+",
        r"(?:(?:a|an|the|per|in|at|on|for|by)\s+)?(\p{L}[\p{L}\-]{2,})"
    ))
    .expect("the pattern is valid")
});
/// `12.4 … was wrong` within a clause.
static VALUE_WAS_WRONG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)([−\-+±]?\d[\d,]*(?:\.\d+)?)[^.;:\d]{0,40}\b(?:was|were|is)\s+(?:wrong|",
        r"incorrect|an error|a mistake|mis\w+)"
    ))
    .expect("the pattern is valid")
});
/// A value a revision moves away from: `revises the total from 1,610 to 1,580` (group 1).
static MOVED_FROM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\bfrom\s+(?:about\s+|~)?([−\-+±]?\d[\d,]*(?:\.\d+)?)[^\d.;]{0,16}?\s+",
        r"(?:to|→|->)\s+[−\-+±]?\d"
    ))
    .expect("the pattern is valid")
});
/// The ordinary vocabulary of revising a stated figure — not of a change in the world
/// (`fell from 12 to 9`) nor of new information (`updated from 12 to 9`: the old value held
/// for its time).
static REVISES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:revis\w*|amend\w*|re-?calculat\w*|re-?comput\w*)")
        .expect("the pattern is valid")
});
/// A pointer to a turn of the conversation (`in turn 11`).
static TURN_POINTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bturns?\s+\d+").expect("the pattern is valid"));
/// The values a sentence negates, calls wrong, or revises away from (`revises the total from
/// 1,610 to 1,580`; not `fell from 12 to 9`, a change in the world). The year of a source the sentence cites is
/// not one (`I re-read Quint et al. 2020 and my figure was wrong`).
pub(crate) fn negated_values(sentence: &str) -> BTreeSet<String> {
    let years: BTreeSet<String> = citation::extract(sentence)
        .into_iter()
        .filter(|c| c.kind == CitationKind::AuthorYear)
        .filter_map(|c| {
            c.key.rsplit(':').next().map(|y| {
                y.trim_end_matches(|ch: char| ch.is_ascii_alphabetic())
                    .to_owned()
            })
        })
        .collect();
    let revised = REVISES.is_match(sentence);
    NEGATED
        .captures_iter(sentence)
        .chain(VALUE_WAS_WRONG.captures_iter(sentence))
        .chain(MOVED_FROM.captures_iter(sentence).filter(|_| revised))
        .filter_map(|c| c.get(1))
        .map(|m| core_value(m.as_str()))
        .filter(|v| v.chars().filter(char::is_ascii_digit).count() >= 2 && !years.contains(v))
        .collect()
}

/// True when a sentence negates a word of `claim_words`.
pub(super) fn negates_a_word_of(sentence: &str, claim_words: &BTreeSet<String>) -> bool {
    NEGATED_WORD.captures_iter(sentence).any(|m| {
        m.get(1)
            .is_some_and(|w| words(w.as_str()).iter().any(|p| claim_words.contains(p)))
    })
}

/// True when a sentence negates any word (`per decade, not per year`).
pub(super) fn negates_a_word(sentence: &str) -> bool {
    NEGATED_WORD.is_match(sentence)
}

/// The words a sentence negates and does not put back: `reaction-limited, not
/// diffusion-limited` disputes `diffusion`.
pub(super) fn disputed_words(sentence: &str) -> BTreeSet<String> {
    let mut negated: BTreeSet<String> = NEGATED_WORD
        .captures_iter(sentence)
        .filter_map(|m| m.get(1))
        .flat_map(|w| words(w.as_str()))
        .collect();
    for m in REPLACED_WORD.captures_iter(sentence) {
        if let Some(r) = m.get(1) {
            for w in words(r.as_str()) {
                negated.remove(&w);
            }
        }
    }
    negated
}

/// True when `claim_words` hold both sides of a replacement the sentence makes (`X, not Y`
/// and a claim naming X and Y): the claim already weighs the corrected word against the
/// wrong one, so the negation does not target it.
pub(super) fn weighs_replacement(sentence: &str, claim_words: &BTreeSet<String>) -> bool {
    REPLACED_WORD.captures_iter(sentence).any(|m| {
        let (Some(new), Some(old)) = (m.get(1), m.get(2)) else {
            return false;
        };
        let old = words(old.as_str());
        let new: BTreeSet<String> = words(new.as_str()).difference(&old).cloned().collect();
        !new.is_disjoint(claim_words) && !old.is_disjoint(claim_words)
    })
}

/// True when a sentence that negates a property (`the 0.26 is not a univariate effect`)
/// speaks of `claim`: it names no figure an earlier claim states, or one `claim` states. A
/// turn pointer (`in turn 11`) names no figure.
pub(super) fn names_its_figure(
    sentence: &str,
    claim_values: &BTreeSet<String>,
    claimed: &BTreeSet<String>,
) -> bool {
    let named: BTreeSet<String> = values(&TURN_POINTER.replace_all(sentence, ""))
        .into_iter()
        .filter(|v| claimed.contains(v))
        .collect();
    named.is_empty() || !named.is_disjoint(claim_values)
}
