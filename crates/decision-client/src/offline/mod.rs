//! The offline lexical model: the embedded default when no decision host is configured.
//! Deterministic, tens of microseconds for a 500-token state, no network, no global state
//! beyond a lazily built stopword set.
//!
//! # Features
//! From `latest_turn`'s user message ("the user message") and `earlier_discussion`:
//!
//! | feature | meaning | rubric criterion |
//! | --- | --- | --- |
//! | `novelty_earlier` | share of the user message's content words absent from the earlier discussion | PROGRESS/PIVOT |
//! | `novelty_last_pair` | the same share against the last earlier pair only | PROGRESS/PIVOT |
//! | `reply_novelty` | share of the latest assistant reply's content words absent from the earlier discussion | PROGRESS/PIVOT |
//! | `previous_asked` | 1 when the last earlier assistant message asked a question (the user is answering it) | mid-thought |
//! | `user_asks` | 1 when the user message asks a question (opens something) | PROGRESS/PIVOT |
//! | `answer_opening` | 1 when the user message opens like an answer (`yes`, `no`, `i`, `sure`, …) | mid-thought |
//! | `user_length` | ln(1 + content words of the user message) | SUMMARIZABLE |
//! | `stuck_cue` | a clarification or correction phrase (`what do you mean`, `i meant`, `still`, `again`, `actually`, …) | NOT STUCK |
//! | `drill_cue` | a drill-down phrase (`more detail`, `elaborate`, `what about the`, `in that case`, …) | NOT STUCK |
//! | `pivot_cue` | a pivot phrase (`switching`, `another question`, `moving on`, `now let's`, …) | PROGRESS/PIVOT |
//! | `closure_cue` | a closing phrase (`thanks`, `got it`, `makes sense`, …) | CLOSED-UNIT |
//!
//! Content words are lower-cased word tokens that are not stopwords, cut by a crude suffix
//! stem (see [`text`]).
//!
//! # How p is computed
//! z = bias + Σ wᵢ·xᵢ over the first seven features + Σ cᵢ·cueᵢ over the four cue flags;
//! p = σ(A·z + B). The seven weights and the bias were fitted by L2-regularized logistic
//! regression on the TIAGE **train** split only; Platt's A and B were then fitted on the
//! **dev** split; the test split was not used for any choice. The cue weights were set by
//! hand from the rubric, because chit-chat holds too few such phrases to fit them. The fit is
//! reproducible: `cargo run -p decision-client --example fit_offline_model` prints the
//! constants below from `../shared/data/topic-shift/cases.jsonl`.

pub mod text;

use async_trait::async_trait;
use compaction_core::{
    AdapterError, DecisionAnswer, DecisionModel, DecisionState, ModelInfo, ProbeRequest,
};

use text::{WordSet, content_words, normalize, novelty, padded, pairs, words};

/// The served-model name the offline model reports.
pub const MODEL_NAME: &str = "offline-lexical-v1";

/// Names of the fitted features, in weight order.
pub const FITTED_FEATURES: [&str; 7] = [
    "novelty_earlier",
    "novelty_last_pair",
    "reply_novelty",
    "previous_asked",
    "user_asks",
    "answer_opening",
    "user_length",
];

// Fitted by `cargo run -p decision-client --example fit_offline_model` on 1177 train and 397
// dev cases of TIAGE (L2-regularized logistic regression on train, Platt scaling on dev).
// Figures of the fit: train auc 0.764 ece 0.040; dev auc 0.769 ece 0.044.

/// Fitted on TIAGE train (see the module docs); same order as [`FITTED_FEATURES`].
pub const WEIGHTS: [f64; 7] = [
    0.4814,  // novelty_earlier
    0.7537,  // novelty_last_pair
    0.3915,  // reply_novelty
    -1.0444, // previous_asked
    1.2389,  // user_asks
    -0.1161, // answer_opening
    0.5830,  // user_length
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -2.4501;
/// Platt scaling slope, fitted on TIAGE dev.
pub const PLATT_A: f64 = 1.2247;
/// Platt scaling intercept, fitted on TIAGE dev.
pub const PLATT_B: f64 = -0.0981;

/// Hand-set weight of a clarification or correction phrase (NOT STUCK fails).
pub const STUCK_CUE_WEIGHT: f64 = -2.0;
/// Hand-set weight of a drill-down phrase (still on the same point).
pub const DRILL_CUE_WEIGHT: f64 = -1.0;
/// Hand-set weight of an explicit pivot phrase.
pub const PIVOT_CUE_WEIGHT: f64 = 1.5;
/// Hand-set weight of a closing phrase (the earlier unit is resolved).
pub const CLOSURE_CUE_WEIGHT: f64 = 0.75;

/// Clarification or correction phrases, matched on word bounds in the user message.
pub const STUCK_CUES: &[&str] = &[
    "what do you mean",
    "i meant",
    "i mean",
    "not what i asked",
    "that's not what",
    "that is not what",
    "misunderstood",
    "clarify",
    "i don't understand",
    "i do not understand",
    "don't follow",
    "confused",
    "confusing",
    "doesn't make sense",
    "does not make sense",
    "still",
    "again",
    "actually",
    "wrong",
    "incorrect",
    "mistake",
    "doesn't work",
    "didn't work",
    "not working",
    "same error",
    "same problem",
    "same issue",
    "you said",
    "wait",
    "hold on",
    "no i",
    "that's not right",
    "not quite",
];
/// Drill-down phrases.
pub const DRILL_CUES: &[&str] = &[
    "more detail",
    "in more detail",
    "elaborate",
    "expand on",
    "go deeper",
    "dig into",
    "follow up",
    "what about the",
    "in that case",
    "how does that",
    "why does that",
    "why is that",
    "does that",
    "is that",
    "can you explain",
    "explain why",
    "explain how",
    "specifically",
    "for example",
    "which of these",
    "which one",
    "how much",
    "how many of",
    "break down",
    "compare them",
    "those results",
    "that result",
    "that study",
    "that paper",
    "the same",
];
/// Pivot phrases.
pub const PIVOT_CUES: &[&str] = &[
    "switching",
    "switch to",
    "switch gears",
    "another question",
    "different question",
    "different topic",
    "separate question",
    "unrelated",
    "moving on",
    "move on",
    "now let's",
    "let's turn to",
    "turning to",
    "turn to",
    "next topic",
    "next question",
    "new topic",
    "change of topic",
    "changing topics",
    "on another note",
    "separately",
    "shifting to",
    "let's look at",
    "now for",
    "now on to",
    "on a different",
    "different area",
    "new direction",
    "next phase",
    "next step",
];
/// Closing phrases.
pub const CLOSURE_CUES: &[&str] = &[
    "thanks",
    "thank you",
    "got it",
    "perfect",
    "makes sense",
    "that helps",
    "that's helpful",
    "understood",
    "excellent",
    "that answers",
    "that settles",
    "clear now",
    "good to know",
];
/// Openings that read as an answer to the previous message.
const ANSWER_OPENERS: &[&str] = &[
    "yes", "no", "yeah", "yep", "nope", "sure", "i", "me", "not", "that", "it", "oh", "lol",
    "haha", "wow", "cool", "nice", "same", "really", "sounds",
];

/// The features of one decision state. See the module docs for each.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Features {
    /// Share of user content words absent from the earlier discussion.
    pub novelty_earlier: f64,
    /// Share of user content words absent from the last earlier pair.
    pub novelty_last_pair: f64,
    /// Share of reply content words absent from the earlier discussion.
    pub reply_novelty: f64,
    /// The last earlier assistant message asked a question.
    pub previous_asked: bool,
    /// The user message asks a question.
    pub user_asks: bool,
    /// The user message opens like an answer.
    pub answer_opening: bool,
    /// ln(1 + user content words).
    pub user_length: f64,
    /// A clarification or correction phrase.
    pub stuck_cue: bool,
    /// A drill-down phrase.
    pub drill_cue: bool,
    /// A pivot phrase.
    pub pivot_cue: bool,
    /// A closing phrase.
    pub closure_cue: bool,
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// True when one of `cues` occurs in `padded` on word bounds. `words` (the message's words)
/// lets most cues be rejected by their first word without a substring search.
fn any_cue(padded: &str, words: &WordSet<'_>, cues: &[&str]) -> bool {
    cues.iter().any(|cue| {
        let first = cue.split(' ').next().unwrap_or(cue);
        words.contains(first)
            && padded.match_indices(cue).any(|(i, _)| {
                padded[..i].ends_with(' ') && padded[i + cue.len()..].starts_with(' ')
            })
    })
}

impl Features {
    /// Extracts the features of `state`.
    pub fn of(state: &DecisionState) -> Features {
        let earlier: Vec<(String, String)> = pairs(&state.earlier_discussion)
            .into_iter()
            .map(|p| (normalize(&p.user), normalize(&p.assistant)))
            .collect();
        let latest = pairs(&state.latest_turn)
            .into_iter()
            .next()
            .unwrap_or_default();
        let (user, assistant) = (normalize(&latest.user), normalize(&latest.assistant));
        let mut earlier_words = WordSet::default();
        let mut last_words = WordSet::default();
        for (i, (u, a)) in earlier.iter().enumerate() {
            let words = content_words(u).into_iter().chain(content_words(a));
            if i + 1 == earlier.len() {
                for w in words {
                    earlier_words.insert(w);
                    last_words.insert(w);
                }
            } else {
                earlier_words.extend(words);
            }
        }
        let last_assistant = earlier.last().map_or("", |(_, a)| a.as_str());
        let user_words = content_words(&user);
        let reply_words = content_words(&assistant);
        let padded_user = padded(&user);
        let user_all_words: WordSet<'_> = words(&user).collect();
        let first = words(&user).next().unwrap_or_default();
        Features {
            novelty_earlier: novelty(&user_words, &earlier_words),
            novelty_last_pair: novelty(&user_words, &last_words),
            reply_novelty: novelty(&reply_words, &earlier_words),
            previous_asked: last_assistant.contains('?'),
            user_asks: user.contains('?'),
            answer_opening: ANSWER_OPENERS.contains(&first),
            user_length: (user_words.len() as f64).ln_1p(),
            stuck_cue: any_cue(&padded_user, &user_all_words, STUCK_CUES),
            drill_cue: any_cue(&padded_user, &user_all_words, DRILL_CUES),
            pivot_cue: any_cue(&padded_user, &user_all_words, PIVOT_CUES),
            closure_cue: any_cue(&padded_user, &user_all_words, CLOSURE_CUES),
        }
    }

    /// The fitted features as a vector, in [`FITTED_FEATURES`] order.
    pub fn fitted(&self) -> [f64; 7] {
        [
            self.novelty_earlier,
            self.novelty_last_pair,
            self.reply_novelty,
            flag(self.previous_asked),
            flag(self.user_asks),
            flag(self.answer_opening),
            self.user_length,
        ]
    }

    /// The hand-set cue contribution to z.
    pub fn cue_offset(&self) -> f64 {
        STUCK_CUE_WEIGHT * flag(self.stuck_cue)
            + DRILL_CUE_WEIGHT * flag(self.drill_cue)
            + PIVOT_CUE_WEIGHT * flag(self.pivot_cue)
            + CLOSURE_CUE_WEIGHT * flag(self.closure_cue)
    }

    /// z with the given fitted weights and bias (the fitting program passes its own).
    pub fn logit(&self, weights: &[f64; 7], bias: f64) -> f64 {
        bias + self.cue_offset()
            + weights
                .iter()
                .zip(self.fitted())
                .map(|(w, x)| w * x)
                .sum::<f64>()
    }
}

/// σ(x), finite for every finite x.
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// p for `state` with the embedded constants.
pub fn probability(state: &DecisionState) -> f64 {
    let z = Features::of(state).logit(&WEIGHTS, BIAS);
    sigmoid(PLATT_A * z + PLATT_B).clamp(0.0, 1.0)
}

/// The plain lexical-novelty baseline: the share of the latest user message's content words
/// absent from the earlier discussion (0.5 when it has none).
pub fn lexical_novelty(state: &DecisionState) -> f64 {
    Features::of(state).novelty_earlier
}

/// The offline lexical model as a [`DecisionModel`].
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineLexical;

#[async_trait]
impl DecisionModel for OfflineLexical {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("offline", "local", MODEL_NAME.to_owned())
    }

    async fn decide(&self, request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        Ok(DecisionAnswer::new(probability(&request.state)).with_served_model(MODEL_NAME))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(earlier: &str, latest: &str) -> DecisionState {
        DecisionState {
            earlier_discussion: earlier.to_owned(),
            latest_turn: latest.to_owned(),
        }
    }

    const EARLIER: &str = "**User**: What causes capacity fade in lithium-ion battery anodes during fast charging?\n**Assistant**: Fast charging accelerates lithium plating on graphite anodes, thickening the SEI layer.\n\n**User**: Do silicon-graphite composite anodes suffer from the same plating issues?\n**Assistant**: Silicon composites suffer less from plating but face pulverization from 300% volume expansion.";

    #[test]
    fn features_read_the_rubric_cues() {
        let f = Features::of(&state(
            EARLIER,
            "**User**: What do you mean by pulverization, still confused?\n**Assistant**: The particles crack.",
        ));
        assert!(f.stuck_cue && f.user_asks && !f.pivot_cue);
        let g = Features::of(&state(
            EARLIER,
            "**User**: Thanks. Switching topics: what are LCOS estimates for vanadium redox flow batteries?\n**Assistant**: $0.20-0.35/kWh.",
        ));
        assert!(g.pivot_cue && g.closure_cue && !g.stuck_cue);
        assert!(g.novelty_earlier > f.novelty_earlier);
        // "still" inside "distilled" is not a cue.
        assert!(!Features::of(&state("", "**User**: distilled water")).stuck_cue);
    }

    #[test]
    fn a_pivot_scores_above_a_clarification_loop() {
        let pivot = probability(&state(
            EARLIER,
            "**User**: Moving on: what are the current levelized cost of storage estimates for vanadium redox flow batteries in grid peaking?\n**Assistant**: Between $0.20 and $0.35/kWh.",
        ));
        let stuck = probability(&state(
            EARLIER,
            "**User**: Wait, I meant silicon plating, not graphite. What do you mean by less plating?\n**Assistant**: Silicon's higher potential keeps it further from lithium plating.",
        ));
        assert!(pivot > stuck, "{pivot} <= {stuck}");
    }

    #[test]
    fn sigmoid_is_finite_at_the_extremes() {
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert_eq!(sigmoid(1000.0), 1.0);
        assert_eq!(sigmoid(0.0), 0.5);
    }
}
