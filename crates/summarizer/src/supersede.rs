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
//!    A revision that moves the claim's value (`revises the total from 1,610 to 1,580`)
//!    negates it ([`negation`]).
//!
//! The exchange is read first ([`dispute`]): when the user names a value of an earlier claim,
//! the answer either **concedes** (its own error, agreement with the user, a negated contested
//! value) or **stands by** it (restates it, concedes nothing) — then no claim stating it is
//! superseded in this turn, whatever other words the answer uses.
//!
//! Phrase cues are supporting evidence only: a turn **announces a correction** when a sentence
//! uses the ordinary vocabulary of error (`wrong`, `mistake`, `correction`, `mis-read`,
//! `retracted`, …, see [`ERROR_WORDS`]); a clause that **affirms** a value (`stands`,
//! `confirmed`, `unchanged`, `was right`) protects it. A user's sentence counts when it speaks
//! of their own statement (`I`, `my`) and is not a question, or when it proposes the correction
//! the answer concedes (`I think it was per decade, not per year` — `You are right`); a user
//! contesting a figure is otherwise a dispute, not a correction.
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

mod dispute;
mod negation;
mod restate;

pub(crate) use negation::negated_values;
use negation::{disputed_words, names_its_figure, negates_a_word_of, weighs_replacement};
pub(crate) use restate::{mask_values, only_restates, restates, retracted_values, split_claim};

/// Content words a sentence must share with a claim to name its subject (when no cited
/// source is shared).
pub(crate) const MIN_SHARED_WORDS: usize = 2;
/// Sentences after a value-less announcement of an error that it covers.
pub(crate) const ANNOUNCED_SPAN: usize = 3;
/// A sentence that would correct more claims than this by restating their values is a recap
/// (the lines that state the same claim count once).
pub(crate) const MAX_SWAP_TARGETS: usize = 1;
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

/// A single-digit quantity: a lone digit and the unit word after it (`7 beats`).
static SMALL_QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w.,−\-])(\d) (\p{L}{3,})").expect("the pattern is valid")
});

/// The values (bare numbers, normalized) a text states: `−0.84`, `1.18%`, `171 ± 29` give
/// `0.84`, `1.18`, `171`, `29`. A single digit counts with its unit (`7 beats per minute`
/// gives `7 beats`): the unit tells one small quantity from another.
pub(crate) fn values(text: &str) -> BTreeSet<String> {
    let small = SMALL_QUANTITY.captures_iter(text).filter_map(|c| {
        let (digit, unit) = (c.get(1)?.as_str(), c.get(2)?.as_str().to_lowercase());
        (!STOPWORDS.contains(&unit.as_str())).then(|| format!("{digit} {unit}"))
    });
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
        .chain(small)
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
pub(crate) fn words(text: &str) -> BTreeSet<String> {
    WORD.find_iter(text)
        .flat_map(|m| {
            let w = m.as_str().to_lowercase();
            let parts: Vec<String> = w
                .split('-')
                .filter(|p| p.chars().count() >= 3)
                .map(str::to_owned)
                .collect();
            parts
        })
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

/// The works a text names by surname and year ([`citation::named_works`]), cited or not:
/// the subject a retraction names. A common word before a year (`Both 2019`) is none.
fn named_works(text: &str) -> BTreeSet<String> {
    citation::named_works(text)
        .into_iter()
        .filter(|key| {
            key.split(':')
                .next()
                .is_some_and(|surname| !STOPWORDS.contains(&surname))
        })
        .collect()
}

/// True when a sentence uses the vocabulary of error.
pub(crate) fn announces_error(sentence: &str) -> bool {
    ERROR.is_match(sentence)
}

/// True when a sentence affirms what it states. Agreeing with the user (`you are right`) is
/// a concession ([`dispute`]), not an affirmation.
pub(crate) fn affirms(sentence: &str) -> bool {
    AFFIRM.is_match(&dispute::without_agreement(sentence))
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
    /// The answer's sentences.
    pub answer: Vec<String>,
    /// The answer's table rows.
    pub rows: Vec<String>,
    /// A value-less announcement of an error comes right before the answer's first table
    /// ([`announced_before_table`]).
    pub rows_announced: bool,
}

/// True when one of the [`ANNOUNCED_SPAN`] sentences before the first Markdown table of
/// `answer` announces an error and states no value ("Correction: … Correct reading:" before
/// the corrected table).
pub(crate) fn announced_before_table(answer: &str) -> bool {
    let Some(at) = answer
        .lines()
        .scan(0usize, |pos, line| {
            let start = *pos;
            *pos += line.len() + 1;
            Some((start, line))
        })
        .find(|(_, line)| line.trim_start().starts_with('|'))
        .map(|(start, _)| start)
    else {
        return false;
    };
    let before = crate::text::sentences(&answer[..at]);
    before
        .iter()
        .rev()
        .take(ANNOUNCED_SPAN)
        .any(|s| announces_error(s) && values(s).is_empty())
}

/// One supersession: the claim (by index) and the sentence that corrects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Supersession {
    /// Index of the corrected claim.
    pub claim: usize,
    /// The correcting sentence.
    pub by: String,
}

/// A sentence that may correct, with its **announcement**: whether a correction is announced
/// at it, and the words of the value-less announcements around it.
struct Candidate<'a> {
    text: &'a String,
    announced: bool,
    /// Its own words and those of value-less error announcements within [`ANNOUNCED_SPAN`]
    /// sentences ("I wrongly applied that row to all three codes" names the subject its
    /// neighbour's figures belong to).
    words: BTreeSet<String>,
    values: BTreeSet<String>,
    /// A user's proposal the answer conceded ([`dispute::proposals`]): it corrects by
    /// negating a word as an announced sentence does.
    proposal: bool,
    /// A table row: it corrects by a swap only when it brings a value (a row repeating a
    /// claim's values is a recap).
    row: bool,
}

/// The sentences of a turn that may correct. A sentence is announced when it uses the
/// vocabulary of error or lies within [`ANNOUNCED_SPAN`] sentences of one that does and
/// states no value itself; a table row is announced when the answer has such a value-less
/// announcement. The user's sentences count when they correct the user's own statement, or
/// propose a correction the answer conceded (`proposals`).
fn correcting_sentences<'t>(turn: &'t NewTurn, proposals: &[&'t String]) -> Vec<Candidate<'t>> {
    let announcements: Vec<usize> = turn
        .answer
        .iter()
        .enumerate()
        .filter(|(_, s)| announces_error(s) && values(s).is_empty())
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for (i, s) in turn.answer.iter().enumerate() {
        let near: Vec<usize> = announcements
            .iter()
            .copied()
            .filter(|&a| a.abs_diff(i) <= ANNOUNCED_SPAN)
            .collect();
        let mut w = words(s);
        for &a in &near {
            w.extend(words(&turn.answer[a]));
        }
        out.push(Candidate {
            text: s,
            announced: announces_error(s) || !near.is_empty(),
            words: w,
            values: values(s),
            proposal: false,
            row: false,
        });
    }
    for row in &turn.rows {
        out.push(Candidate {
            text: row,
            announced: turn.rows_announced || announces_error(row),
            words: words(row),
            values: values(row),
            proposal: false,
            row: true,
        });
    }
    for s in &turn.user {
        let own = announces_error(s) && FIRST_PERSON.is_match(s) && !s.trim_end().ends_with('?');
        let proposal = proposals.contains(&s);
        if own || proposal {
            out.push(Candidate {
                text: s,
                announced: true,
                words: words(s),
                values: values(s),
                proposal,
                row: false,
            });
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

/// What a turn's correcting sentences share: values stated in many topics (labels), values a
/// clause affirms or the answer stood by against the user's dispute (protected), and what the
/// turn explicitly disputes (values and words it negates in its announced sentences).
struct TurnContext {
    labels: BTreeSet<String>,
    /// Every value an earlier claim states.
    claimed: BTreeSet<String>,
    protected: BTreeSet<String>,
    /// Contested values the answer stood by: no claim stating one is superseded.
    stood: BTreeSet<String>,
    disputed: BTreeSet<String>,
}

impl TurnContext {
    fn of(
        claims: &[Claim<'_>],
        sentences: &[Candidate<'_>],
        stood: BTreeSet<String>,
    ) -> TurnContext {
        let mut protected: BTreeSet<String> = sentences
            .iter()
            .flat_map(|c| dispute::clauses(c.text))
            .filter(|c| affirming(c))
            .flat_map(values)
            .collect();
        protected.extend(stood.iter().cloned());
        let disputed = sentences
            .iter()
            .filter(|c| c.announced)
            .flat_map(|c| {
                let mut d = negated_values(c.text);
                if announces_error(c.text) {
                    d.extend(disputed_words(c.text));
                }
                d
            })
            .collect();
        TurnContext {
            labels: labels(claims),
            claimed: claims.iter().flat_map(|c| values(c.text)).collect(),
            protected,
            stood,
            disputed,
        }
    }

    /// A restatement corrects `claim` only when the turn disputes nothing explicitly, the
    /// restating sentence itself names an error, or the claim states what the turn disputes:
    /// a table that follows `the model labels were wrong: Co is reaction-limited, not
    /// diffusion-limited` corrects the rows that said diffusion, not the rows it repeats.
    fn may_swap(&self, claim: &Stated, cand: &Candidate<'_>) -> bool {
        self.disputed.is_empty()
            || announces_error(cand.text)
            || self
                .disputed
                .iter()
                .any(|d| claim.values.contains(d) || claim.words.contains(d))
    }
}

/// The claims `turn` corrects, each with the sentence that corrects it (the first one found).
pub(crate) fn supersessions(claims: &[Claim<'_>], turn: &NewTurn) -> Vec<Supersession> {
    let exchange = dispute::read(claims, turn);
    let proposals = dispute::proposals(claims, turn, &exchange);
    let sentences = correcting_sentences(turn, &proposals);
    let context = TurnContext::of(claims, &sentences, exchange.stood_by(turn));
    // (claim, sentence index, by a swap)
    let found: Vec<(usize, usize, bool)> = claims
        .iter()
        .enumerate()
        .filter_map(|(i, claim)| {
            first_correction(claim.text, &sentences, &context).map(|(j, s)| (i, j, s))
        })
        .collect();
    // A sentence that restates many claims is a recap, not a correction of one of them. The
    // lines that state one claim (a bullet, a table row, a synthesis line) are one target:
    // the lines whose values shared with the sentence another target's include.
    let mut swaps_by: BTreeMap<usize, BTreeSet<BTreeSet<String>>> = BTreeMap::new();
    for (i, j, swap) in &found {
        if *swap {
            let shared = values(claims[*i].text)
                .intersection(&sentences[*j].values)
                .cloned()
                .collect();
            swaps_by.entry(*j).or_default().insert(shared);
        }
    }
    found
        .into_iter()
        .filter(|(_, j, swap)| {
            !swap || swaps_by.get(j).map_or(0, distinct_claims) <= MAX_SWAP_TARGETS
        })
        .map(|(claim, j, _)| Supersession {
            claim,
            by: correction_text(claims[claim].text, &sentences, j, turn.answer.len()),
        })
        .collect()
}

/// How many claims sets of shared values stand for: a set another includes is the same claim.
fn distinct_claims(sets: &BTreeSet<BTreeSet<String>>) -> usize {
    sets.iter()
        .filter(|a| !sets.iter().any(|b| b != *a && a.is_subset(b)))
        .count()
}

/// A sentence that affirms what it states and names no error.
fn affirming(s: &str) -> bool {
    affirms(s) && !announces_error(s)
}

/// The first sentence that corrects `claim`, and whether it does so by a swap (rather than
/// a negation or a retraction).
fn first_correction(
    claim: &str,
    sentences: &[Candidate<'_>],
    context: &TurnContext,
) -> Option<(usize, bool)> {
    let c = Stated::of(claim);
    if !c.values.is_disjoint(&context.stood) {
        return None;
    }
    let claim_sources = sources(claim);
    let protected = &context.protected;
    for (j, cand) in sentences.iter().enumerate() {
        if affirming(cand.text) {
            continue;
        }
        let shared_sources = !claim_sources.is_disjoint(&sources(cand.text));
        let shared_words = c.words.intersection(&cand.words).count();
        // (A disputed value recurs in every turn of the dispute: labels matter only to the
        // swap rule.)
        let shares_value = c
            .values
            .intersection(&cand.values)
            .any(|v| !protected.contains(v));
        let names_work = shared_sources || !named_works(claim).is_disjoint(&named_works(cand.text));
        let subject =
            names_work || shared_words >= MIN_SHARED_WORDS || (shared_words >= 1 && shares_value);
        if !subject {
            continue;
        }
        let negated = negated_values(cand.text)
            .into_iter()
            .any(|v| c.values.contains(&v) && !protected.contains(&v));
        let negated_word = (announces_error(cand.text) || cand.proposal)
            && negates_a_word_of(cand.text, &c.words)
            && !weighs_replacement(cand.text, &c.words)
            && names_its_figure(cand.text, &c.values, &context.claimed);
        // A retraction names the work (author–year) the claim rests on, cited or not.
        let retracted = names_work && RETRACTION.is_match(cand.text);
        let swap = cand.announced
            && context.may_swap(&c, cand)
            && (!cand.row || !cand.values.is_subset(&c.values))
            && swapped(
                &c,
                &Stated {
                    values: cand.values.clone(),
                    words: cand.words.clone(),
                },
                &context.labels,
                protected,
            );
        if negated || negated_word || retracted || swap {
            return Some((j, !(negated || negated_word || retracted)));
        }
    }
    None
}

/// The correcting sentence `j`, and the answer's next sentences that go on about the same
/// claim.
fn correction_text(claim: &str, sentences: &[Candidate<'_>], j: usize, answers: usize) -> String {
    let c = Stated::of(claim);
    let mut by = sentences[j].text.clone();
    if j < answers {
        for next in sentences
            .iter()
            .take(answers)
            .skip(j + 1)
            .take(ANNOUNCED_SPAN - 1)
        {
            let about = !c.values.is_disjoint(&next.values)
                || c.words.intersection(&words(next.text)).count() >= MIN_SHARED_WORDS;
            if !about || affirming(next.text) {
                break;
            }
            by.push(' ');
            by.push_str(next.text);
        }
    }
    by
}

/// The sentence restates the claim in parallel — two (non-label, unprotected) values in
/// common, or one and three content words — and says something else about it: another value beside it (a new figure for the claim's subject, the old one
/// moved to another subject), or the same values with other words (another arm, dataset or
/// region).
fn swapped(
    claim: &Stated,
    sentence: &Stated,
    labels: &BTreeSet<String>,
    protected: &BTreeSet<String>,
) -> bool {
    let shared: Vec<&String> = claim
        .values
        .intersection(&sentence.values)
        .filter(|v| !labels.contains(*v) && !protected.contains(*v))
        .collect();
    // Parallel statements: two values in common, or one and three content words.
    let shares_value = shared.len() >= 2
        || (shared.len() == 1 && claim.words.intersection(&sentence.words).count() >= 3);
    // It must bring something: a value the claim lacks, or the same values with other words.
    let brings_value = !sentence.values.is_subset(&claim.values);
    let other_words =
        !claim.words.is_subset(&sentence.words) && !sentence.words.is_subset(&claim.words);
    shares_value && (brings_value || (claim.values == sentence.values && other_words))
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
mod tests;
