//! **Claim-level supersession** (issue 30): which earlier claims a new turn corrects, found
//! from the structure of the exchange rather than from a list of wordings.
//!
//! A **claim** is a line that states a value (a number of [`crate::findings`]). A new turn
//! **corrects** an earlier claim when one of its sentences (of the answer, or of the user
//! correcting their own earlier statement)
//! 1. names the claim's **subject** — shares a cited source, or at least
//!    [`MIN_SHARED_WORDS`] content words with it — and
//! 2. **disputes its value**: negates a value the claim states (`1.55 per 50, not per 10`,
//!    `instead of 12`, `41 mm/yr was wrong`), or restates a value of the claim with a different
//!    companion (the same figure for another arm, dataset or region: the claim says `A: 1.18 on
//!    30 mg`, the sentence `A: 1.18 on 60 mg`) in a turn that announces a correction, or says
//!    a source the claim cites was retracted or withdrawn.
//!
//! Phrase cues are supporting evidence only: a turn **announces a correction** when a sentence
//! uses the ordinary vocabulary of error (`wrong`, `mistake`, `correction`, `mis-read`,
//! `retracted`, …, see [`ERROR_WORDS`]); a sentence that **affirms** a value (`stands`,
//! `confirmed`, `unchanged`, `was right`) protects it, so a dispute the assistant rejects
//! supersedes nothing. A user's sentence counts only when it speaks of their own statement
//! (`I`, `my`) and is not a question: a user contesting a figure is a dispute, not a correction.
//!
//! A value that several topics state (a dose, a sample size used as a label) is a **label**,
//! not a disputed value: sharing it alone never makes a sentence target a claim.
//!
//! What this module must never do: supersede a claim that shares neither subject nor value
//! with the correcting sentence (a property test checks it), or hold a wording that exists
//! because one evaluation session needed it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::citation::{self, CitationKind};
use crate::findings;

/// Content words a sentence must share with a claim to name its subject (when no cited
/// source is shared).
pub(crate) const MIN_SHARED_WORDS: usize = 2;
/// Sentences after a value-less announcement of an error that it covers.
pub(crate) const ANNOUNCED_SPAN: usize = 3;
/// A sentence that would correct more claims than this by restating their values is a recap.
pub(crate) const MAX_SWAP_TARGETS: usize = 2;
/// A value stated in this many topics is a label, not a disputed value.
pub(crate) const LABEL_TOPICS: usize = 3;

/// The ordinary vocabulary of error: supporting evidence that a turn corrects something.
pub(crate) const ERROR_WORDS: &str = concat!(
    r"(?i)\b(?:correction|corrected|correcting|wrong(?:ly)?|mistak\w*|errors?\b|erroneous\w*|",
    r"incorrect\w*|inaccura\w*|mis(?:read|attribut|assign|label|stat|quot|report|cop|typ|plac|",
    r"match|interpret|classif|took|taken|print)\w*|retract\w*|withdr[ae]w\w*|swapped|",
    r"mixed up|mix-up|conflat\w*|confus\w*|should (?:have )?(?:be|been|read)|",
    r"i was mistaken|overstat\w*|understat\w*)"
);
static ERROR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(ERROR_WORDS).expect("the pattern is valid"));
static AFFIRM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\b(?:stands?|stood|confirm\w*|unchanged|unaffected|(?:was|were|is|are) (?:right|",
        r"correct|accurate|valid)(?: all along)?\b|still (?:holds?|valid|right|correct)|",
        r"holds? up|remains? (?:valid|correct|right)|checks? out|as (?:stated|reported))"
    ))
    .expect("the pattern is valid")
});
static RETRACTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:retract\w*|withdr[ae]w\w*)").expect("the pattern is valid")
});
/// A value a sentence negates: `not (per) 10`, `instead of 12`, `rather than 3.1`.
static NEGATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\b(?:not|instead of|rather than|no longer)\s+(?:(?:per|at|in|on|the|a|an|for|",
        r"from|about|around|~|≈)\s+){0,2}([−\-+±]?\d[\d,]*(?:\.\d+)?)"
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
static FIRST_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:i|my|me|i'd|i've|i'm|mine)\b").expect("the pattern is valid")
});
static WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\p{L}[\p{L}\-]{2,}").expect("the pattern is valid"));

/// Words too common to name a subject.
const STOPWORDS: [&str; 64] = [
    "the", "and", "for", "with", "that", "this", "from", "was", "were", "are", "has", "have",
    "had", "but", "not", "its", "their", "than", "then", "which", "who", "what", "when", "where",
    "into", "over", "under", "about", "between", "after", "before", "all", "any", "each", "one",
    "two", "more", "less", "most", "also", "only", "per", "you", "your", "our", "they", "them",
    "there", "these", "those", "been", "being", "would", "could", "should", "will", "can", "did",
    "does", "such", "same", "other", "both", "very",
];

/// The values (bare numbers, normalized) a text states: `−0.84`, `1.18%`, `171 ± 29` give
/// `0.84`, `1.18`, `171`, `29`.
pub(crate) fn values(text: &str) -> BTreeSet<String> {
    findings::numbers(text)
        .into_iter()
        .flat_map(|n| {
            let core = core_value(&n);
            // A range states its ends too.
            let ends: Vec<String> = core
                .split(['–', '-'])
                .filter(|e| e.chars().filter(char::is_ascii_digit).count() >= 2)
                .map(str::to_owned)
                .collect();
            std::iter::once(core).chain(ends)
        })
        .filter(|v| !v.is_empty())
        .collect()
}

/// A number without sign, unit sign or spaces.
fn core_value(raw: &str) -> String {
    raw.trim_start_matches(['−', '-', '+', '±'])
        .chars()
        .filter(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '–' | '-'))
        .collect::<String>()
        .trim_end_matches(['.', ',', '-', '–'])
        .to_owned()
}

/// The content words of a text, lower case.
fn words(text: &str) -> BTreeSet<String> {
    WORD.find_iter(text)
        .map(|m| m.as_str().to_lowercase())
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect()
}

/// The cited sources (author-year keys, DOIs) of a text.
fn sources(text: &str) -> BTreeSet<String> {
    citation::extract(text)
        .into_iter()
        .filter(|c| c.kind != CitationKind::SourceLine)
        .map(|c| c.key)
        .collect()
}

/// True when a sentence uses the vocabulary of error.
pub(crate) fn announces_error(sentence: &str) -> bool {
    ERROR.is_match(sentence)
}

/// True when a sentence affirms what it states.
pub(crate) fn affirms(sentence: &str) -> bool {
    AFFIRM.is_match(sentence)
}

/// The values a sentence negates or calls wrong.
pub(crate) fn negated_values(sentence: &str) -> BTreeSet<String> {
    NEGATED
        .captures_iter(sentence)
        .chain(VALUE_WAS_WRONG.captures_iter(sentence))
        .filter_map(|c| c.get(1))
        .map(|m| core_value(m.as_str()))
        .filter(|v| v.chars().filter(char::is_ascii_digit).count() >= 2)
        .collect()
}

/// An earlier claim the correction step may target.
#[derive(Debug, Clone)]
pub(crate) struct Claim<'a> {
    /// The line.
    pub text: &'a str,
    /// Which topic it belongs to (for telling labels from values).
    pub topic: usize,
}

/// A new turn, as sentences: the user's and the answer's (table rows included).
#[derive(Debug, Clone, Default)]
pub(crate) struct NewTurn {
    /// The user's sentences.
    pub user: Vec<String>,
    /// The answer's sentences and table rows.
    pub answer: Vec<String>,
}

/// One supersession: the claim (by index) and the sentence that corrects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Supersession {
    /// Index of the corrected claim.
    pub claim: usize,
    /// The correcting sentence.
    pub by: String,
}

/// The sentences of a turn that may correct, each with whether a correction is announced
/// **at it**: the sentence uses the vocabulary of error, or follows (within
/// [`ANNOUNCED_SPAN`] sentences) one that does and states no value itself ("that figure was
/// given for the wrong arm:" followed by the right table). The user's sentences count only
/// when they correct the user's own statement.
fn correcting_sentences(turn: &NewTurn) -> Vec<(&String, bool)> {
    let mut out = Vec::new();
    let mut since_announcement: Option<usize> = None;
    for s in &turn.answer {
        let cue = announces_error(s);
        let near = since_announcement.is_some_and(|n| n < ANNOUNCED_SPAN);
        out.push((s, cue || near));
        since_announcement = if cue && values(s).is_empty() {
            Some(0)
        } else {
            since_announcement.map(|n| n + 1)
        };
    }
    for s in &turn.user {
        if announces_error(s) && FIRST_PERSON.is_match(s) && !s.trim_end().ends_with('?') {
            out.push((s, true));
        }
    }
    out
}

/// Values stated in at least [`LABEL_TOPICS`] topics.
fn labels(claims: &[Claim<'_>]) -> BTreeSet<String> {
    let mut topics: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for c in claims {
        for v in values(c.text) {
            topics.entry(v).or_default().insert(c.topic);
        }
    }
    topics
        .into_iter()
        .filter(|(_, t)| t.len() >= LABEL_TOPICS)
        .map(|(v, _)| v)
        .collect()
}

/// The claims `turn` corrects, each with the sentence that corrects it (the first one found).
pub(crate) fn supersessions(claims: &[Claim<'_>], turn: &NewTurn) -> Vec<Supersession> {
    let sentences = correcting_sentences(turn);
    let labels = labels(claims);
    let affirming = |s: &str| affirms(s) && !announces_error(s);
    // Values some sentence of the turn affirms are protected.
    let protected: BTreeSet<String> = sentences
        .iter()
        .filter(|(s, _)| affirming(s))
        .flat_map(|(s, _)| values(s))
        .collect();
    let stated: Vec<Stated> = sentences.iter().map(|(s, _)| Stated::of(s)).collect();
    // (claim, sentence index, by a swap)
    let mut found: Vec<(usize, usize, bool)> = Vec::new();
    for (i, claim) in claims.iter().enumerate() {
        let c = Stated::of(claim.text);
        let claim_sources = sources(claim.text);
        for (j, (s, announced)) in sentences.iter().enumerate() {
            if affirming(s) {
                continue;
            }
            let shared_sources = !claim_sources.is_disjoint(&sources(s));
            let subject =
                shared_sources || c.words.intersection(&stated[j].words).count() >= MIN_SHARED_WORDS;
            if !subject {
                continue;
            }
            let negated = negated_values(s)
                .into_iter()
                .any(|v| c.values.contains(&v) && !protected.contains(&v));
            let retracted = shared_sources && RETRACTION.is_match(s);
            let swap = *announced && swapped(&c, &stated[j], &labels, &protected);
            if negated || retracted || swap {
                found.push((i, j, !(negated || retracted)));
                break;
            }
        }
    }
    // A sentence that restates many claims is a recap, not a correction of one of them.
    let mut swaps_by: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, j, swap) in &found {
        if *swap {
            *swaps_by.entry(*j).or_default() += 1;
        }
    }
    found
        .into_iter()
        .filter(|(_, j, swap)| !swap || swaps_by.get(j).copied().unwrap_or(0) <= MAX_SWAP_TARGETS)
        .map(|(claim, j, _)| Supersession {
            claim,
            by: sentences[j].0.clone(),
        })
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

/// The sentence restates a (non-label, unprotected) value of the claim and says something
/// else about it: another value beside it (a new figure for the claim's subject, the old one
/// moved to another subject), or the same values with other words (another arm, dataset or
/// region).
fn swapped(claim: &Stated, sentence: &Stated, labels: &BTreeSet<String>, protected: &BTreeSet<String>) -> bool {
    let shares_value = claim
        .values
        .intersection(&sentence.values)
        .any(|v| !labels.contains(v) && !protected.contains(v));
    let other_values = claim.values != sentence.values;
    let other_words =
        !claim.words.is_subset(&sentence.words) && !sentence.words.is_subset(&claim.words);
    shares_value && (other_values || other_words)
}

/// What a line states: its values and content words.
struct Stated {
    values: BTreeSet<String>,
    words: BTreeSet<String>,
}

impl Stated {
    fn of(text: &str) -> Stated {
        Stated {
            values: values(text),
            words: words(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims<'a>(lines: &[&'a str]) -> Vec<Claim<'a>> {
        lines
            .iter()
            .enumerate()
            .map(|(i, t)| Claim { text: t, topic: i })
            .collect()
    }

    fn turn(user: &str, answer: &[&str]) -> NewTurn {
        NewTurn {
            user: vec![user.to_owned()],
            answer: answer.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn targets(lines: &[&str], t: &NewTurn) -> Vec<usize> {
        supersessions(&claims(lines), t)
            .into_iter()
            .map(|s| s.claim)
            .collect()
    }

    const CLAIMS: [&str; 3] = [
        "- Orchard thinning raised apple yield by 14.6 kg per tree (Marlow & Eze 2019).",
        "- Frost damage fell to 23% of buds in thinned rows.",
        "- Soil nitrate stayed at 41 ppm across plots (Quint 2020).",
    ];

    #[test]
    fn a_wrong_unit_or_increment() {
        let t = turn(
            "And per hectare?",
            &["Thinning raised apple yield by 14.6 kg per branch, not 14.6 kg per tree — my mistake."],
        );
        assert_eq!(targets(&CLAIMS, &t), [0]);
    }

    #[test]
    fn a_value_given_for_the_wrong_arm() {
        let lines = [
            "- In the early arm, frost damage fell to 23% of buds in thinned rows.",
            "- Soil nitrate stayed at 41 ppm across plots (Quint 2020).",
        ];
        let t = turn(
            "Which arm was that?",
            &[
                "I assigned that to the wrong arm.",
                "In the late arm, frost damage fell to 23% of buds in thinned rows.",
            ],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn a_local_figure_given_as_the_global_one() {
        let lines = [
            "- The whole watershed lost 312 tonnes of sediment per year.",
            "- Rainfall averaged 877 mm per year.",
        ];
        let t = turn(
            "Is that the whole watershed?",
            &["Correction: 312 tonnes of sediment per year is the upper sub-basin alone; the whole watershed lost 505 tonnes per year."],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn a_retracted_paper() {
        let t = turn(
            "Anything new on Marlow?",
            &["Marlow & Eze 2019 was retracted last year, so its yield gain cannot be used."],
        );
        assert_eq!(targets(&CLAIMS, &t), [0]);
    }

    #[test]
    fn the_user_corrects_their_own_statement() {
        let lines = ["- The user's cohort has 5,400 growers in the valley survey."];
        let t = NewTurn {
            user: vec!["I gave you the wrong number: my valley survey has 4,500 growers, not 5,400.".into()],
            answer: vec!["Thanks — with 4,500 growers the power drops.".into()],
        };
        assert_eq!(targets(&lines, &t), [0]);
        // A user contesting a figure (a question) corrects nothing by itself.
        let contest = NewTurn {
            user: vec!["Are you sure the 5,400 growers figure is not wrong?".into()],
            answer: vec!["The survey lists 5,400 growers; that figure stands.".into()],
        };
        assert!(targets(&lines, &contest).is_empty());
    }

    #[test]
    fn a_correction_of_a_correction() {
        let lines = [
            "- Correction: the mean canopy gap is 17.5 m over the decade, not 12.0 m.",
            "- Rainfall averaged 877 mm per year.",
        ];
        let t = turn(
            "Still odd?",
            &["That correction was wrong too: the decade mean canopy gap is 15.2 m, not 17.5 m."],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn a_rejected_dispute_supersedes_nothing() {
        let t = turn(
            "I doubt the 41 ppm nitrate figure, surely it is higher?",
            &[
                "I re-checked the plot table.",
                "Soil nitrate was 41 ppm across plots (Quint 2020); the figure stands.",
                "Higher values of 63 ppm occur only in the manured strip.",
            ],
        );
        assert!(targets(&CLAIMS, &t).is_empty());
    }

    #[test]
    fn a_claim_sharing_neither_subject_nor_value_is_untouched() {
        let t = turn(
            "Wait.",
            &["My mistake: frost damage fell to 31% of buds, not 23%."],
        );
        assert_eq!(targets(&CLAIMS, &t), [1]);
    }

    #[test]
    fn a_line_restating_the_old_claim_without_the_new_value_is_caught() {
        let claim = "Thinning raised apple yield by 14.6 kg per tree.";
        let by = "Thinning raised apple yield by 11.2 kg per tree, not 14.6 kg.";
        assert!(restates("- Apple yield rose by 14.6 kg per tree after thinning.", claim, by));
        assert!(!restates("- Apple yield rose by 11.2 kg per tree (corrected from 14.6).", claim, by));
        assert!(!restates("- Soil nitrate stayed at 14.6 ppm.", claim, by));
    }

    #[test]
    fn values_are_bare_numbers() {
        let v = values("g = −0.84 (−1.07 to −0.61), 1.18%/yr, 171 ± 29 Gt, 2,760–3,300 t");
        for want in ["0.84", "1.18", "171", "29", "2,760–3,300", "2,760", "3,300"] {
            assert!(v.contains(want), "{want}: {v:?}");
        }
        assert_eq!(
            negated_values("HR 2.2 per 5 mg, not per 10 mg; 7.5 was wrong"),
            ["10".to_owned(), "7.5".to_owned()].into()
        );
    }
}
