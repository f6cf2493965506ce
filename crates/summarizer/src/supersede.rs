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
fn words(text: &str) -> BTreeSet<String> {
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
mod tests {
    use super::*;

    fn claims<'a>(lines: &[&'a str]) -> Vec<Claim<'a>> {
        lines
            .iter()
            .enumerate()
            .map(|(i, t)| Claim { text: t, topic: i })
            .collect()
    }

    /// A new turn of `user`'s query and `answer`'s sentences, with no table (shared with the
    /// child modules' tests).
    pub(super) fn turn(user: &str, answer: &[&str]) -> NewTurn {
        NewTurn {
            user: vec![user.to_owned()],
            answer: answer.iter().map(|s| (*s).to_owned()).collect(),
            rows: Vec::new(),
            rows_announced: false,
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
            &[
                "Thinning raised apple yield by 14.6 kg per branch, not 14.6 kg per tree — my mistake.",
            ],
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
            &[
                "Correction: 312 tonnes of sediment per year is the upper sub-basin alone; the whole watershed lost 505 tonnes per year.",
            ],
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

    /// A single-digit quantity is a value with its unit: moved to another arm, it is a swap;
    /// another small quantity of the same line is not the disputed one.
    #[test]
    fn a_single_digit_quantity_moved_to_another_arm() {
        let lines = [
            "In the sham arm, sleep latency fell by 9 minutes over 4 weeks.",
            "Adherence was 88% in both arms.",
        ];
        let t = turn(
            "Sham?",
            &[
                "I put that in the wrong arm: the 9 minutes fall in sleep latency was in the light arm; the sham arm fell by 2 minutes.",
            ],
        );
        assert_eq!(targets(&lines, &t), [0]);
        assert!(values("fell by 9 minutes over 4 weeks").contains("4 weeks"));
        assert!(!values("9 of the 12 sites").contains("9 the"));
    }

    /// A work named without the brackets of a citation (a table's label column) is still the
    /// subject a retraction names; a retraction of another work leaves it.
    #[test]
    fn a_retraction_names_an_uncited_work_by_author_and_year() {
        let lines = [
            "Pellham 2011 — Effect size: g = 0.58",
            "Ostrova 2014 — Effect size: g = 0.21",
            "In 2011 the effect size was g = 0.33 in the pooled sample.",
        ];
        let t = turn(
            "Still usable?",
            &["The editors retracted Pellham 2011 in March; its estimate is void."],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn the_user_corrects_their_own_statement() {
        let lines = ["- The user's cohort has 5,400 growers in the valley survey."];
        let t = NewTurn {
            user: vec![
                "I gave you the wrong number: my valley survey has 4,500 growers, not 5,400."
                    .into(),
            ],
            answer: vec!["Thanks — with 4,500 growers the power drops.".into()],
            rows: Vec::new(),
            rows_announced: false,
        };
        assert_eq!(targets(&lines, &t), [0]);
        // A user contesting a figure (a question) corrects nothing by itself.
        let contest = NewTurn {
            user: vec!["Are you sure the 5,400 growers figure is not wrong?".into()],
            answer: vec!["The survey lists 5,400 growers; that figure stands.".into()],
            rows: Vec::new(),
            rows_announced: false,
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
        assert!(restates(
            "- Apple yield rose by 14.6 kg per tree after thinning.",
            claim,
            by
        ));
        assert!(!restates(
            "- Apple yield rose by 11.2 kg per tree (corrected from 14.6).",
            claim,
            by
        ));
        assert!(!restates("- Soil nitrate stayed at 14.6 ppm.", claim, by));
    }

    #[test]
    fn a_negated_property_supersedes_the_claim_that_states_it() {
        let lines = [
            "- Root uptake of zinc is transporter-limited at 12.5 µM (Vance 2018).",
            "- Leaf area grew 18% in the first month.",
        ];
        let t = turn(
            "Check the uptake model?",
            &["Correction: root uptake of zinc is diffusion-limited, not transporter-limited."],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn an_announcement_lends_its_subject_to_the_figures_beside_it() {
        let lines = ["- Moth counts are robust: 41.5 per trap in all three valleys."];
        let t = turn(
            "Sure?",
            &[
                "My statement was wrong.",
                "The 41.5 per trap comes from the north transect alone, in one season.",
                "I wrongly applied that figure to all three valleys.",
            ],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn only_the_retracted_clause_of_a_claim_goes() {
        let claim = "- Plots held 35 beetles per trap, yet the survey mean was 412 per site.";
        let by = "Correction: plots held 53 beetles per trap, not 35.";
        let (gone, rest) = split_claim(claim, by);
        assert_eq!(gone, "- Plots held 35 beetles per trap");
        assert_eq!(rest.as_deref(), Some("the survey mean was 412 per site."));
        assert_eq!(split_claim("- Plots held 35 beetles.", by).1, None);
        // `, and` joins two claims: the untouched one stays.
        let (gone, rest) = split_claim(
            "- Plots held 35 beetles per trap, and the survey mean was 412 per site.",
            by,
        );
        assert_eq!(gone, "- Plots held 35 beetles per trap");
        assert_eq!(rest.as_deref(), Some("the survey mean was 412 per site."));
        // A disputed word, no value: the clauses naming the word go, the figure stays.
        let (gone, rest) = split_claim(
            "- Zinc: Km = 31.5 µM, and the data fit the transporter model best — so uptake is transporter-limited (Vance 2018).",
            "Correction: uptake is diffusion-limited, not transporter-limited.",
        );
        assert_eq!(
            gone,
            "the data fit the transporter model best; so uptake is transporter-limited (Vance 2018)."
        );
        assert_eq!(rest.as_deref(), Some("- Zinc: Km = 31.5 µM"));
        // A value-less clause right before the retracted figure is its subject.
        let (gone, rest) = split_claim(
            "- The densest plots — those under oak — held 35 beetles per trap, and the survey mean was 412 per site.",
            by,
        );
        assert_eq!(
            gone,
            "- The densest plots; those under oak; held 35 beetles per trap"
        );
        assert_eq!(rest.as_deref(), Some("the survey mean was 412 per site."));
    }

    #[test]
    fn one_claim_stated_on_several_lines_is_corrected_on_each() {
        // A bullet, a table row and a synthesis line state the same wrong claim.
        let lines = [
            "- Spring hive density: 12.5 and 19.0 colonies per km² on the survey grid.",
            "- Survey grid — spring density: 12.5; peak density: 19.0 colonies per km²",
            "* On the survey grid, spring densities were 12.5 and 19.0 colonies per km².",
        ];
        let t = turn(
            "Spring?",
            &[
                "I mixed up the seasons.",
                "The survey grid gives 12.5 and 19.0 colonies per km² for the autumn count, with 8.1 in spring.",
            ],
        );
        let one_topic: Vec<Claim<'_>> = lines.iter().map(|t| Claim { text: t, topic: 0 }).collect();
        let found: Vec<usize> = supersessions(&one_topic, &t)
            .into_iter()
            .map(|s| s.claim)
            .collect();
        assert_eq!(found, [0, 1, 2]);
        // The same sentence restating three different claims is a recap: nothing goes.
        let spread = [
            "- Grid A held 12.5 and 19.0 colonies per km².",
            "- Grid B held 7.25 and 3.5 colonies per km².",
            "- Grid C held 41.5 and 60.5 colonies per km².",
        ];
        let recap = turn(
            "Recap?",
            &[
                "I mixed up the grids.",
                "Grids A, B and C held 12.5 and 19.0, 7.25 and 3.5, 41.5 and 60.5 colonies per km², and 8.1 overall.",
            ],
        );
        assert!(targets(&spread, &recap).is_empty());
    }

    #[test]
    fn a_claim_that_already_weighs_the_corrected_word_is_not_targeted() {
        let lines = [
            "- Bud loss of 23% in thinned rows is frost-driven (Marlow & Eze 2019).",
            "- A 23% bud loss is far above the 5% typical of frost damage and points to a drought-driven loss.",
        ];
        let t = turn(
            "Frost?",
            &["Correction: the bud loss is drought-driven, not frost-driven."],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn a_table_after_a_named_dispute_corrects_only_the_disputed_rows() {
        let lines = [
            "- Copper uptake: 31.5 µM/h, transporter-limited (Vance 2018).",
            "- Zinc uptake 12.5 µM/h, reported as channel-limited.",
        ];
        let t = NewTurn {
            user: vec!["Check the table?".into()],
            answer: vec![
                "Correction: copper uptake is channel-limited, not transporter-limited.".into(),
            ],
            rows: vec![
                "Copper — uptake (µM/h): 31.5; fit: 0.97; limit: channel".into(),
                "Zinc — uptake (µM/h): 12.5; fit: 0.91; limit: channel".into(),
            ],
            rows_announced: true,
        };
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn a_dispute_stood_by_beside_an_unrelated_error_word_supersedes_nothing() {
        let lines = ["- Seed germination reached 64% at 18 °C in the dark trays (Ruiz 2017)."];
        let t = turn(
            "I recall 78% germination from the greenhouse. Are you sure about 64%?",
            &[
                "I re-checked the tray log.",
                "The 78% germination you recall is the greenhouse value, corrected for light, so both stand; the 64% germination figure is right for the dark trays.",
            ],
        );
        assert!(targets(&lines, &t).is_empty());
    }

    #[test]
    fn agreeing_with_the_user_concedes_rather_than_affirms() {
        let lines = [
            "- Glacier front retreat averaged 0.85 km per year across the 12 outlets (Nakamura 2015).",
            "- Calving flux was 31.5 Gt per year.",
        ];
        let t = turn(
            "I think the 0.85 km retreat was per decade, not per year.",
            &[
                "You are right: Nakamura 2015 gives 0.85 km per decade across the 12 outlets, about 0.085 km per year.",
                "My earlier figure was wrong.",
            ],
        );
        assert_eq!(targets(&lines, &t), [0]);
    }

    #[test]
    fn a_conceded_user_proposal_is_the_correction() {
        let lines = [
            "- Glacier front retreat averaged 0.85 km per year across the outlets.",
            "- Calving flux was 31.5 Gt per year.",
        ];
        let t = turn(
            "I think the glacier front retreat of 0.85 km was per decade, not per year.",
            &["You are right, my mistake."],
        );
        assert_eq!(targets(&lines, &t), [0]);
        // The same proposal, not conceded, corrects nothing.
        let kept = turn(
            "I think the glacier front retreat of 0.85 km was per decade, not per year.",
            &["The outlet record gives 0.85 km per year; the annual figure stands."],
        );
        assert!(targets(&lines, &kept).is_empty());
    }

    #[test]
    fn a_revision_from_one_value_to_another_supersedes_the_old_value() {
        let lines = [
            "- Correction: the nest total for all three valleys was 2,310, not 1,870.",
            "- Rainfall averaged 877 mm per year.",
        ];
        let t = turn(
            "Does the recount change it?",
            &["The recount revises the three-valley nest total from 2,310 to 2,265."],
        );
        assert_eq!(targets(&lines, &t), [0]);
        // A change in the world, or new information, is no revision.
        for later in [
            "The three-valley nest total fell from 2,310 to 2,265 by the next survey.",
            "The spring survey updated the three-valley nest total from 2,310 to 2,265.",
        ] {
            assert!(
                targets(&lines, &turn("And since?", &[later])).is_empty(),
                "{later}"
            );
        }
    }

    #[test]
    fn a_negated_property_of_a_named_figure_targets_only_the_claim_stating_it() {
        let lines = [
            "- The cohort study (n = 9,812) estimated univariate associations for 21 phenotypes.",
            "- The strongest univariate association was |r| = 0.31.",
        ];
        let t = turn(
            "Univariate?",
            &["Correction: the 0.31 I gave in turn 21 is not a univariate effect."],
        );
        assert_eq!(targets(&lines, &t), [1]);
    }

    #[test]
    fn a_table_row_repeating_a_claims_values_is_a_recap() {
        let lines =
            ["- After six trials, 38% of exposed workers responded versus 67% of controls."];
        let t = NewTurn {
            user: vec!["Table please?".into()],
            answer: vec!["I mislabelled a column earlier.".into()],
            rows: vec!["Learning — Measure: exposed workers responding; Effect: 38% vs 67% of controls; Source: Iwa 2021"
                    .into(),],
            rows_announced: true,
        };
        assert!(targets(&lines, &t).is_empty());
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
        assert!(
            negated_values("I re-read Quint et al. 2020 in the archive, and my figure was wrong")
                .is_empty()
        );
    }
}
