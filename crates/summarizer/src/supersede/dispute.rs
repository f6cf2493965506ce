//! The exchange around a contested figure ([`super`] reads it before it looks for
//! corrections): the user names a value an earlier claim states — asks about it, doubts it,
//! or proposes another — and the answer either **concedes** or **stands by** it.
//!
//! - The answer **concedes** when one of its clauses names its own error about an earlier
//!   claim (error vocabulary in a first-person clause, or one labelled `Correction:`, that
//!   states no value or a value an earlier claim states, and affirms nothing), negates a
//!   contested value, or agrees with the user (`you are right`). An error word about
//!   something else (`error bars`, `corrected for light`) concedes nothing. The user's own proposal then counts as a correcting sentence ([`proposals`]).
//! - The answer **stands by** the value when it restates a contested value and concedes
//!   nothing: the claims stating it are not superseded in this turn, whatever other words the
//!   answer uses (`the 47 kn you recall is with flaps retracted; 41 kn is correct at 12°`).
//!
//! Phrase cues (the vocabulary of error, of affirmation, of agreement) are evidence read per
//! clause; the structure is which values the user named and what the answer did with them.
//!
//! What this module must never do: call a dispute conceded from an error word in a clause
//! that speaks only of a value no earlier claim states, or let a stood-by claim be superseded.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::{Claim, NewTurn, affirms, announces_error, negated_values, values};

/// Where a sentence divides into clauses for reading a verdict.
static CLAUSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"; | — | – |: |, (?:so|yet|but|while|whereas|and) ").expect("the pattern is valid")
});
/// The answer agreeing with the user: `you are right`, `you're correct`, `good catch`.
static AGREES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\byou(?:'re|’re| are| were)\s+(?:quite\s+|absolutely\s+|entirely\s+)?",
        r"(?:right|correct)\b|\bgood catch\b"
    ))
    .expect("the pattern is valid")
});

/// A clause the answer labels as a correction (`Correction: …`).
static LABELLED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\W*correct(?:ion|ed)\b").expect("the pattern is valid"));

/// What the answer did with the values the user contested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The user named no value of an earlier claim.
    NoDispute,
    /// The answer conceded (a correction may follow).
    Conceded,
    /// The answer restated a contested value and conceded nothing.
    Stood,
}

/// The user's dispute and the answer's verdict.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    /// Values of earlier claims the user's sentences name.
    pub contested: BTreeSet<String>,
    /// What the answer did with them.
    pub verdict: Verdict,
}

impl Exchange {
    /// The contested values the answer stood by (none unless it stood).
    pub(crate) fn stood_by(&self, turn: &NewTurn) -> BTreeSet<String> {
        if self.verdict != Verdict::Stood {
            return BTreeSet::new();
        }
        let restated: BTreeSet<String> = turn.answer.iter().flat_map(|s| values(s)).collect();
        self.contested.intersection(&restated).cloned().collect()
    }
}

/// True when a sentence agrees with the user (`you are right`): a concession, not an
/// affirmation of what the sentence states.
pub(crate) fn agrees_with_user(sentence: &str) -> bool {
    AGREES.is_match(sentence)
}

/// `sentence` without its agreement with the user.
pub(crate) fn without_agreement(sentence: &str) -> std::borrow::Cow<'_, str> {
    AGREES.replace_all(sentence, "")
}

/// The clauses of a sentence.
pub(crate) fn clauses(sentence: &str) -> Vec<&str> {
    CLAUSE
        .split(sentence)
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// Reads the exchange of `turn` against the earlier `claims`.
pub(crate) fn read(claims: &[Claim<'_>], turn: &NewTurn) -> Exchange {
    let claimed: BTreeSet<String> = claims.iter().flat_map(|c| values(c.text)).collect();
    let contested: BTreeSet<String> = turn
        .user
        .iter()
        .flat_map(|s| values(s))
        .filter(|v| claimed.contains(v))
        .collect();
    let verdict = if contested.is_empty() {
        Verdict::NoDispute
    } else if turn
        .answer
        .iter()
        .any(|s| concedes(s, &claimed, &contested))
    {
        Verdict::Conceded
    } else if turn
        .answer
        .iter()
        .any(|s| !values(s).is_disjoint(&contested))
    {
        Verdict::Stood
    } else {
        Verdict::NoDispute
    };
    Exchange { contested, verdict }
}

/// True when a clause of `sentence` concedes: it agrees with the user, negates a contested
/// value, or names an error (and affirms nothing) while stating no value or a claimed one.
fn concedes(sentence: &str, claimed: &BTreeSet<String>, contested: &BTreeSet<String>) -> bool {
    if (agrees_with_user(sentence) && !affirms(sentence))
        || !negated_values(sentence).is_disjoint(contested)
    {
        return true;
    }
    clauses(sentence).into_iter().any(|c| {
        let v = values(c);
        let own = super::FIRST_PERSON.is_match(c) || LABELLED.is_match(c);
        own && announces_error(c) && !affirms(c) && (v.is_empty() || !v.is_disjoint(claimed))
    })
}

/// The user's sentences that propose the correction an answer conceded: those that name a
/// contested value and negate something or bring a value no earlier claim states.
pub(crate) fn proposals<'t>(
    claims: &[Claim<'_>],
    turn: &'t NewTurn,
    exchange: &Exchange,
) -> Vec<&'t String> {
    if exchange.verdict != Verdict::Conceded {
        return Vec::new();
    }
    let claimed: BTreeSet<String> = claims.iter().flat_map(|c| values(c.text)).collect();
    turn.user
        .iter()
        .filter(|s| {
            let v = values(s);
            let negates = super::negation::negates_a_word(s) || !negated_values(s).is_empty();
            !v.is_disjoint(&exchange.contested) && (negates || !v.is_subset(&claimed))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supersede::tests::turn;

    const CLAIM: &str = "- Seed germination reached 64% at 18 °C in the dark trays (Ruiz 2017).";

    #[test]
    fn the_answer_stands_by_a_contested_value_beside_an_unrelated_error_word() {
        let claims = [Claim {
            text: CLAIM,
            topic: 0,
        }];
        let t = turn(
            "I recall 78% from the greenhouse. Are you sure about 64%?",
            &[
                "The 78% you recall is the greenhouse value, corrected for light, so both stand; the 64% figure is right for the dark trays.",
            ],
        );
        let e = read(&claims, &t);
        assert_eq!(e.verdict, Verdict::Stood);
        assert_eq!(e.stood_by(&t), ["64".to_owned()].into());
    }

    #[test]
    fn agreeing_with_the_user_or_naming_the_error_concedes() {
        let claims = [Claim {
            text: CLAIM,
            topic: 0,
        }];
        for answer in [
            "You are right: the 64% was for the lit trays.",
            "My earlier 64% figure was wrong.",
            "Germination in the dark trays was 46%, not 64%.",
        ] {
            let t = turn("Is 64% right for the dark trays?", &[answer]);
            assert_eq!(read(&claims, &t).verdict, Verdict::Conceded, "{answer}");
        }
        let t = turn(
            "I think the 64% was for lit trays, not dark ones.",
            &["You are right, my mistake."],
        );
        assert_eq!(proposals(&claims, &t, &read(&claims, &t)).len(), 1);
        // An error word about something else concedes nothing.
        let bars = turn(
            "Is 64% right for the dark trays?",
            &["The error bars are wide, but 64% holds for the dark trays."],
        );
        assert_eq!(read(&claims, &bars).verdict, Verdict::Stood);
        // A question that names no claimed value is no dispute.
        let none = turn("What about the lit trays?", &["Lit trays reached 71%."]);
        assert_eq!(read(&claims, &none).verdict, Verdict::NoDispute);
    }
}
